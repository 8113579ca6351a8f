package histories

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file is a small reader of EDN, the data notation Jepsen writes its histories in.
// It reads what history.edn files contain (maps, vectors, lists, sets, keywords,
// symbols, strings, characters, numbers, nil, booleans, tagged literals such as
// #inst "..." or #jepsen.history.Op{...}, and #_ discards) and nothing clever beyond
// that: tags are dropped and the tagged value kept, because an op is a map whatever
// record type printed it.

// jepsenKind is the kind of an EDN value.
type jepsenKind uint8

const (
	jepsenNil jepsenKind = iota
	jepsenBool
	jepsenInt    // text holds the decimal digits, possibly beyond int64
	jepsenFloat  // text holds the literal as written
	jepsenString // text holds the decoded string
	jepsenChar   // text holds the character
	jepsenKeyword
	jepsenSymbol
	jepsenList
	jepsenVector
	jepsenSet
	jepsenMap // items alternate key, value
)

var jepsenKindNames = [...]string{
	jepsenNil: "nil", jepsenBool: "boolean", jepsenInt: "integer", jepsenFloat: "number",
	jepsenString: "string", jepsenChar: "character", jepsenKeyword: "keyword",
	jepsenSymbol: "symbol", jepsenList: "list", jepsenVector: "vector", jepsenSet: "set",
	jepsenMap: "map",
}

func (k jepsenKind) String() string { return jepsenKindNames[k] }

// jepsenValue is one EDN value and the line it starts on.
type jepsenValue struct {
	kind jepsenKind
	line int
	// text is the name of a keyword or symbol (without the colon), the decoded string
	// or character, or the number as written.
	text  string
	b     bool
	items []jepsenValue
}

// jepsenMaxDepth bounds nesting so that hostile input cannot exhaust the stack.
const jepsenMaxDepth = 256

// errJepsenEnd is returned by next at the end of the input or of the enclosing
// collection.
var errJepsenEnd = errors.New("end of input")

// jepsenParser reads EDN values from a byte slice, counting lines for errors.
//
// The slice may be a window on a longer input (JepsenEDNReader): then final is false,
// and every look at the window's end sets short, because what the parser made of the
// bytes it had (a token cut in two, a collection not yet closed) may not be what the
// input holds. The reader then gives the parser a longer window and parses the value
// again from its start.
type jepsenParser struct {
	name  string
	src   []byte
	pos   int
	line  int
	final bool   // src ends where the input ends
	short bool   // the parser looked past src's end, which is not the input's
	f     string // JepsenOptions.F
}

func newJepsenParser(name string, src []byte) *jepsenParser {
	return &jepsenParser{name: name, src: src, line: 1, final: true}
}

// more reports whether a byte is left at pos, and notes when the window, not the
// input, ran out.
func (p *jepsenParser) more() bool {
	if p.pos < len(p.src) {
		return true
	}
	if !p.final {
		p.short = true
	}
	return false
}

// has reports whether n bytes are left at pos, like more.
func (p *jepsenParser) has(n int) bool {
	if p.pos+n <= len(p.src) {
		return true
	}
	if !p.final {
		p.short = true
	}
	return false
}

// isJepsenControl reports whether c is a control byte that is not EDN whitespace: no
// EDN value holds one outside a string.
func isJepsenControl(c byte) bool {
	return c < 0x20 && c != '\n' && c != '\t' && c != '\r' && c != '\f' && c != '\v' || c == 0x7f
}

func (p *jepsenParser) errAt(line int, format string, a ...any) error {
	return fmt.Errorf("%s line %d: %s", p.name, line, fmt.Sprintf(format, a...))
}

// skip moves past whitespace, commas and comments. Most calls find none: that case
// is small enough to be inlined.
func (p *jepsenParser) skip() {
	if p.pos < len(p.src) && !jepsenSpace[p.src[p.pos]] {
		return
	}
	p.skipSpace()
}

func (p *jepsenParser) skipSpace() {
	src, i := p.src, p.pos
	for i < len(src) && jepsenSpace[src[i]] {
		switch src[i] {
		case '\n':
			p.line++
		case ';':
			j := bytes.IndexByte(src[i:], '\n')
			if j < 0 {
				i = len(src)
				continue
			}
			i += j
			continue
		}
		i++
	}
	p.pos = i
	if i == len(src) && !p.final {
		p.short = true
	}
}

// jepsenSpace marks the bytes skip moves past: whitespace, commas, and the semicolon
// that starts a comment.
var jepsenSpace = func() (t [256]bool) {
	for _, c := range []byte(" \t\n\r,\f\v;") {
		t[c] = true
	}
	return t
}()

// atEnd reports whether only whitespace and comments remain.
func (p *jepsenParser) atEnd() bool {
	p.skip()
	return !p.more()
}

// peek returns the next significant byte, or 0 at the end.
func (p *jepsenParser) peek() byte {
	p.skip()
	if !p.more() {
		return 0
	}
	return p.src[p.pos]
}

// next reads one value. closer is the byte that ends the enclosing collection (0 at
// the top level); meeting it returns errJepsenEnd without consuming it.
func (p *jepsenParser) next(closer byte, depth int) (jepsenValue, error) {
	for {
		p.skip()
		if !p.more() {
			if closer != 0 {
				return jepsenValue{}, p.errAt(p.line, "unexpected end of input, missing %q", closer)
			}
			return jepsenValue{}, errJepsenEnd
		}
		c := p.src[p.pos]
		if c == closer && closer != 0 {
			return jepsenValue{}, errJepsenEnd
		}
		if isJepsenControl(c) {
			return jepsenValue{}, p.errAt(p.line, "byte 0x%02x is not EDN", c)
		}
		if depth > jepsenMaxDepth {
			return jepsenValue{}, p.errAt(p.line, "values nested deeper than %d", jepsenMaxDepth)
		}
		line := p.line
		switch c {
		case ')', ']', '}':
			return jepsenValue{}, p.errAt(line, "unexpected %q", c)
		case '(':
			p.pos++
			return p.collection(jepsenList, ')', line, depth)
		case '[':
			p.pos++
			return p.collection(jepsenVector, ']', line, depth)
		case '{':
			p.pos++
			return p.collection(jepsenMap, '}', line, depth)
		case '"':
			p.pos++
			return p.str(line)
		case '\\':
			p.pos++
			return p.char(line)
		case '#':
			p.pos++
			if !p.more() {
				return jepsenValue{}, p.errAt(line, "unexpected end of input after #")
			}
			switch d := p.src[p.pos]; {
			case d == '{':
				p.pos++
				return p.collection(jepsenSet, '}', line, depth)
			case d == '_':
				// #_ discards the next value.
				p.pos++
				if _, err := p.next(closer, depth+1); err != nil {
					if err == errJepsenEnd {
						return jepsenValue{}, p.errAt(line, "#_ discards nothing")
					}
					return jepsenValue{}, err
				}
				continue
			case d == '#':
				// ##Inf, ##-Inf, ##NaN.
				p.pos++
				tok := p.token()
				switch tok {
				case "Inf", "-Inf", "NaN":
					return jepsenValue{kind: jepsenFloat, line: line, text: "##" + tok}, nil
				}
				return jepsenValue{}, p.errAt(line, "unknown symbolic value ##%s", tok)
			case isJepsenSymbolStart(d):
				// A tagged literal: the tag names a type; the value that follows is
				// what matters.
				p.token()
				v, err := p.next(closer, depth+1)
				if err == errJepsenEnd {
					return jepsenValue{}, p.errAt(line, "tag without a value")
				}
				return v, err
			}
			return jepsenValue{}, p.errAt(line, "unsupported dispatch #%c", p.src[p.pos])
		case ':':
			p.pos++
			tok := p.token()
			if tok == "" {
				return jepsenValue{}, p.errAt(line, "empty keyword")
			}
			if !utf8.ValidString(tok) {
				return jepsenValue{}, p.errAt(line, "keyword is not valid UTF-8")
			}
			return jepsenValue{kind: jepsenKeyword, line: line, text: strings.TrimPrefix(tok, ":")}, nil
		}
		tok := p.token()
		if tok == "" {
			r, _ := utf8.DecodeRune(p.src[p.pos:])
			return jepsenValue{}, p.errAt(line, "unexpected character %q", r)
		}
		if !utf8.ValidString(tok) {
			return jepsenValue{}, p.errAt(line, "symbol is not valid UTF-8")
		}
		return p.atom(tok, line)
	}
}

// isJepsenDelimiter reports whether c ends a token: EDN's delimiters, and the control
// bytes that no token holds (next refuses them).
func isJepsenDelimiter(c byte) bool {
	return jepsenDelimiters[c]
}

var jepsenDelimiters = func() (t [256]bool) {
	for _, c := range []byte(" \t\n\r\f\v,;()[]{}\"\\") {
		t[c] = true
	}
	for c := range t {
		if isJepsenControl(byte(c)) {
			t[c] = true
		}
	}
	return t
}()

func isJepsenSymbolStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '*' ||
		c == '+' || c == '!' || c == '-' || c == '_' || c == '?' || c == '$' ||
		c == '%' || c == '&' || c == '=' || c == '<' || c == '>' || c == '/' || c >= 0x80
}

// token reads bytes up to the next delimiter.
func (p *jepsenParser) token() string {
	start := p.pos
	for p.more() && !isJepsenDelimiter(p.src[p.pos]) {
		p.pos++
	}
	return string(p.src[start:p.pos])
}

func (p *jepsenParser) atom(tok string, line int) (jepsenValue, error) {
	switch tok {
	case "nil":
		return jepsenValue{kind: jepsenNil, line: line}, nil
	case "true", "false":
		return jepsenValue{kind: jepsenBool, line: line, b: tok == "true"}, nil
	}
	c := tok[0]
	if c >= '0' && c <= '9' || (c == '-' || c == '+') && len(tok) > 1 && tok[1] >= '0' && tok[1] <= '9' {
		return p.number(tok, line)
	}
	return jepsenValue{kind: jepsenSymbol, line: line, text: tok}, nil
}

// number reads integers (with an optional N suffix for arbitrary precision), floats
// (with an optional M suffix for decimals) and ratios, which stay as written.
func (p *jepsenParser) number(tok string, line int) (jepsenValue, error) {
	digits := strings.TrimSuffix(tok, "N")
	if isJepsenInteger(digits) {
		digits = strings.TrimPrefix(digits, "+")
		neg := strings.HasPrefix(digits, "-")
		digits = strings.TrimLeft(strings.TrimPrefix(digits, "-"), "0")
		if digits == "" {
			digits = "0"
		} else if neg {
			digits = "-" + digits
		}
		return jepsenValue{kind: jepsenInt, line: line, text: digits}, nil
	}
	f := strings.TrimSuffix(tok, "M")
	if _, err := strconv.ParseFloat(f, 64); (err == nil || errors.Is(err, strconv.ErrRange)) && !strings.ContainsAny(f, "xXpP_") &&
		!strings.Contains(strings.ToLower(f), "inf") && !strings.Contains(strings.ToLower(f), "nan") {
		return jepsenValue{kind: jepsenFloat, line: line, text: f}, nil
	}
	if i := strings.IndexByte(tok, '/'); i > 0 && isJepsenInteger(tok[:i]) && isJepsenInteger(tok[i+1:]) {
		return jepsenValue{kind: jepsenFloat, line: line, text: tok}, nil
	}
	return jepsenValue{}, p.errAt(line, "malformed number %q", tok)
}

func isJepsenInteger(s string) bool {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (p *jepsenParser) collection(kind jepsenKind, closer byte, line, depth int) (jepsenValue, error) {
	v := jepsenValue{kind: kind, line: line}
	for {
		item, err := p.next(closer, depth+1)
		if err == errJepsenEnd {
			p.pos++ // the closer
			break
		}
		if err != nil {
			return jepsenValue{}, err
		}
		v.items = append(v.items, item)
	}
	if kind == jepsenMap && len(v.items)%2 != 0 {
		return jepsenValue{}, p.errAt(line, "map has a key without a value")
	}
	if err := p.distinct(v); err != nil {
		return jepsenValue{}, err
	}
	return v, nil
}

// distinct refuses a map with a key twice and a set with an element twice, as EDN
// does: read one way or the other (the last key wins, say), an op's :type or :value
// would be a guess.
func (p *jepsenParser) distinct(v jepsenValue) error {
	step, what := 1, "set has the element"
	switch v.kind {
	case jepsenMap:
		step, what = 2, "map has the key"
	case jepsenSet:
	default:
		return nil
	}
	n := len(v.items) / step
	if n < 2 {
		return nil
	}
	seen := make(map[string]struct{}, n)
	for i := 0; i < len(v.items); i += step {
		k := v.items[i].String()
		if _, dup := seen[k]; dup {
			return p.errAt(v.items[i].line, "%s %s twice", what, jepsenLogShow([]byte(k)))
		}
		seen[k] = struct{}{}
	}
	return nil
}

func (p *jepsenParser) str(line int) (jepsenValue, error) {
	var b strings.Builder
	for p.more() {
		c := p.src[p.pos]
		p.pos++
		switch c {
		case '"':
			if !utf8.ValidString(b.String()) {
				return jepsenValue{}, p.errAt(line, "string is not valid UTF-8")
			}
			return jepsenValue{kind: jepsenString, line: line, text: b.String()}, nil
		case '\n':
			p.line++
			b.WriteByte(c)
		case '\\':
			if !p.more() {
				return jepsenValue{}, p.errAt(line, "unterminated string")
			}
			e := p.src[p.pos]
			p.pos++
			switch e {
			case '"', '\\':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'u':
				if !p.has(4) {
					return jepsenValue{}, p.errAt(p.line, "truncated \\u escape")
				}
				n, err := strconv.ParseUint(string(p.src[p.pos:p.pos+4]), 16, 32)
				if err != nil {
					return jepsenValue{}, p.errAt(p.line, "malformed \\u escape")
				}
				p.pos += 4
				b.WriteRune(rune(n))
			default:
				return jepsenValue{}, p.errAt(p.line, "unknown escape \\%c in string", e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return jepsenValue{}, p.errAt(line, "unterminated string")
}

var jepsenNamedChars = map[string]string{
	"newline": "\n", "space": " ", "tab": "\t", "return": "\r", "backspace": "\b", "formfeed": "\f",
}

func (p *jepsenParser) char(line int) (jepsenValue, error) {
	if !p.more() {
		return jepsenValue{}, p.errAt(line, "character literal without a character")
	}
	// The first character may itself be a delimiter, as in \( or \space.
	r, size := utf8.DecodeRune(p.src[p.pos:])
	start := p.pos
	if !utf8.FullRune(p.src[p.pos:]) {
		p.has(utf8.UTFMax) // a character cut by the window's end
	}
	p.pos += size
	for p.more() && !isJepsenDelimiter(p.src[p.pos]) {
		p.pos++
	}
	tok := string(p.src[start:p.pos])
	if utf8.RuneCountInString(tok) == 1 {
		if r == '\n' {
			p.line++
		}
		return jepsenValue{kind: jepsenChar, line: line, text: tok}, nil
	}
	if s, ok := jepsenNamedChars[tok]; ok {
		return jepsenValue{kind: jepsenChar, line: line, text: s}, nil
	}
	if len(tok) == 5 && tok[0] == 'u' {
		if n, err := strconv.ParseUint(tok[1:], 16, 32); err == nil {
			return jepsenValue{kind: jepsenChar, line: line, text: string(rune(n))}, nil
		}
	}
	return jepsenValue{}, p.errAt(line, "unknown character literal \\%s", tok)
}

// String renders v back as EDN, for error messages and independent keys.
func (v jepsenValue) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v jepsenValue) write(b *strings.Builder) {
	switch v.kind {
	case jepsenNil:
		b.WriteString("nil")
	case jepsenBool:
		b.WriteString(strconv.FormatBool(v.b))
	case jepsenInt, jepsenFloat, jepsenSymbol:
		b.WriteString(v.text)
	case jepsenString:
		b.WriteString(strconv.Quote(v.text))
	case jepsenChar:
		b.WriteString(`\` + v.text)
	case jepsenKeyword:
		b.WriteString(":" + v.text)
	case jepsenList, jepsenVector, jepsenSet, jepsenMap:
		open, closer := "(", ")"
		switch v.kind {
		case jepsenVector:
			open, closer = "[", "]"
		case jepsenSet:
			open, closer = "#{", "}"
		case jepsenMap:
			open, closer = "{", "}"
		}
		b.WriteString(open)
		for i, it := range v.items {
			if i > 0 {
				b.WriteByte(' ')
			}
			it.write(b)
		}
		b.WriteString(closer)
	}
}
