package histories

import "unicode/utf8"

// jepsenFast reads an op map in the plain shape Jepsen writes, straight into an Op:
//
//	{:type :ok, :f :txn, :value [[:append 3 1] [:r 4 [1 2]]], :time 10, :process 2, :index 7}
//
// keyword keys, each at most once; :type, :f and :error keywords; integer processes
// (or :nemesis), times, indices and attempts; values of integers, nil, booleans,
// keywords, symbols and strings of plain ASCII, in vectors, lists and sets. It declines
// (ok false) anything else, every error included, and the caller then reads the op
// with the general parser and jepsenOp, whose reading it must equal:
// FuzzJepsenEDNFast holds the two together. The general path builds a tree of every
// value and converts it with encoding/json; for the histories Elle and Knossos check
// this path is an order of magnitude faster and allocates a fraction.
type jepsenFast struct {
	d   decoder // the block values are copied into, interned connections
	val []byte  // :value as JSON, reused
	// The shape of :value, for Jepsen's independent [key value] tuples: its kind, how
	// many elements it has when it is a collection, and the JSON offsets and kinds of
	// its first two.
	kind      jepsenKind
	elems     int
	elemStart [2]int
	elemEnd   [2]int
	elemKind  [2]jepsenKind
}

// The keys jepsenFast reads, as bits of its record of those seen.
const (
	jfType = 1 << iota
	jfF
	jfProcess
	jfValue
	jfError
	jfTime
	jfIndex
	jfAttempt
	jfOpID
	jfConn
)

// jepsenFastMaxDepth bounds the nesting of values jepsenFast follows; deeper ones are
// left to the general parser.
const jepsenFastMaxDepth = 64

// op reads the op map at p.pos. On a decline p.pos and p.line are wherever it stopped:
// the caller rewinds them.
func (f *jepsenFast) op(p *jepsenParser) (op Op, m jepsenMeta, ok bool) {
	p.skip()
	if !p.more() {
		return op, m, false
	}
	if p.src[p.pos] == '#' {
		// A tagged record, #jepsen.history.Op{...}: the tag names a type.
		p.pos++
		if !p.more() || !isJepsenSymbolStart(p.src[p.pos]) || p.src[p.pos] == '_' {
			return op, m, false
		}
		jepsenFastToken(p)
		p.skip()
		if !p.more() {
			return op, m, false
		}
	}
	if p.src[p.pos] != '{' {
		return op, m, false
	}
	m.line = p.line
	p.pos++
	var seen int
	var others [][]byte // the keys read other than jepsenFast's own
	hasValue := false
	for {
		p.skip()
		if !p.more() {
			return op, m, false
		}
		if p.src[p.pos] == '}' {
			p.pos++
			break
		}
		if p.src[p.pos] != ':' {
			return op, m, false
		}
		p.pos++
		key := jepsenFastToken(p)
		if len(key) == 0 || key[0] == ':' || !utf8.Valid(key) {
			return op, m, false
		}
		p.skip()
		if !p.more() {
			return op, m, false
		}
		bit := 0
		switch string(key) {
		case "type":
			bit = jfType
			name, ok := jepsenFastKeyword(p)
			if !ok {
				return op, m, false
			}
			if op.Type, ok = typeNamed(name); !ok {
				return op, m, false
			}
		case "f":
			bit = jfF
			name, ok := jepsenFastKeyword(p)
			if !ok {
				return op, m, false
			}
			op.F = internF(name)
		case "process":
			bit = jfProcess
			if p.src[p.pos] == ':' {
				name, ok := jepsenFastKeyword(p)
				if !ok || string(name) != jepsenNemesisProcess {
					return op, m, false
				}
				op.Process = Nemesis
				break
			}
			n, ok := jepsenFastInt(jepsenFastToken(p), 9)
			if !ok || n < 0 {
				return op, m, false
			}
			op.Process = int(n)
		case "value":
			bit = jfValue
			f.val = f.val[:0]
			kind, ok := f.value(p, 0)
			if !ok {
				return op, m, false
			}
			f.kind, hasValue = kind, true
		case "time", "index", "attempt":
			bit = jfTime
			if key[0] == 'i' {
				bit = jfIndex
			} else if key[0] == 'a' {
				bit = jfAttempt
			}
			tok := jepsenFastToken(p)
			if string(tok) == "nil" {
				break
			}
			n, ok := jepsenFastInt(tok, 18)
			if !ok {
				return op, m, false
			}
			switch bit {
			case jfTime:
				m.time, m.hasTime = n, true
			case jfIndex:
				m.index, m.hasIndex = n, true
			default:
				if n < 0 || n > 1<<31-1 {
					return op, m, false
				}
				op.Attempt = int(n)
			}
		case "error", "op-id", "conn":
			bit = jfError
			if key[0] == 'o' {
				bit = jfOpID
			} else if key[0] == 'c' {
				bit = jfConn
			}
			s, isNil, ok := jepsenFastName(p, bit != jfError)
			if !ok {
				return op, m, false
			}
			if isNil {
				break
			}
			switch bit {
			case jfError:
				op.Error = string(s)
			case jfOpID:
				op.OpID = string(s)
			default:
				op.Conn = f.d.conn(s)
			}
		default:
			// Any other key: once only (the general path refuses a key twice), and
			// its value must still be EDN, and one this path reads.
			for _, o := range others {
				if string(o) == string(key) {
					return op, m, false
				}
			}
			others = append(others, key)
			mark := len(f.val)
			if _, ok := f.value(p, 0); !ok {
				return op, m, false
			}
			f.val = f.val[:mark]
		}
		if bit != 0 {
			if seen&bit != 0 {
				return op, m, false // a repeated key: the general path's rules
			}
			seen |= bit
		}
	}
	if op.Type == 0 || seen&jfProcess == 0 || op.F == "" && op.Process != Nemesis {
		return op, m, false // errors, which the general path words
	}
	if hasValue {
		if !f.setValue(&op) {
			return op, m, false
		}
	}
	return op, m, true
}

// setValue sets op's Value (and Key, for an independent tuple) from the JSON of
// :value, as jepsenOp does with jepsenIndependent.
func (f *jepsenFast) setValue(op *Op) bool {
	val, kind := f.val, f.kind
	if op.Process != Nemesis && (kind == jepsenVector || kind == jepsenList) && f.elems == 2 {
		independent := false
		switch op.F {
		case "read", "write":
			independent = true
		case "cas":
			k := f.elemKind[1]
			independent = k == jepsenVector || k == jepsenList || k == jepsenNil
		}
		if independent {
			key := val[f.elemStart[0]:f.elemEnd[0]]
			switch f.elemKind[0] {
			case jepsenInt:
			case jepsenKeyword, jepsenSymbol, jepsenString:
				key = key[1 : len(key)-1] // plain ASCII: the JSON string is the text quoted
			default:
				return false // rendered as EDN by the general path
			}
			op.Key = string(key)
			val, kind = val[f.elemStart[1]:f.elemEnd[1]], f.elemKind[1]
		}
	}
	if kind != jepsenNil {
		op.Value = f.d.value(val)
	}
	return true
}

// value appends the JSON of the EDN value at p.pos to f.val and returns its kind. At
// depth 0 it records the shape of a collection's first two elements.
func (f *jepsenFast) value(p *jepsenParser, depth int) (jepsenKind, bool) {
	if depth > jepsenFastMaxDepth || !p.more() {
		return 0, false
	}
	c := p.src[p.pos]
	switch c {
	case '[', '(', '#':
		kind, closer := jepsenVector, byte(']')
		switch c {
		case '(':
			kind, closer = jepsenList, ')'
		case '#':
			// A set: the general parser refuses it in a value (jepsenSetIn).
			return 0, false
		}
		p.pos++
		f.val = append(f.val, '[')
		n := 0
		for {
			p.skip()
			if !p.more() {
				return 0, false
			}
			if p.src[p.pos] == closer {
				p.pos++
				break
			}
			if n > 0 {
				f.val = append(f.val, ',')
			}
			start := len(f.val)
			k, ok := f.value(p, depth+1)
			if !ok {
				return 0, false
			}
			if depth == 0 && n < 2 {
				f.elemStart[n], f.elemEnd[n], f.elemKind[n] = start, len(f.val), k
			}
			n++
		}
		f.val = append(f.val, ']')
		if depth == 0 {
			f.elems = n
		}
		return kind, true
	case '"':
		p.pos++
		start := p.pos
		for p.more() && jepsenFastPlain[p.src[p.pos]] {
			p.pos++
		}
		if !p.more() || p.src[p.pos] != '"' {
			return 0, false // an escape, a line break or a byte JSON escapes
		}
		f.val = append(f.val, '"')
		f.val = append(f.val, p.src[start:p.pos]...)
		f.val = append(f.val, '"')
		p.pos++
		return jepsenString, true
	case ':':
		// One pass over the name: each byte both not a delimiter and written as it is.
		src, start := p.src, p.pos+1
		i := start
		for i < len(src) && jepsenFastNameByte[src[i]] {
			i++
		}
		if i == start || src[start] == ':' || i < len(src) && !jepsenDelimiters[src[i]] {
			return 0, false
		}
		if i == len(src) && !p.final {
			p.short = true
		}
		p.pos = i
		f.val = append(f.val, '"')
		f.val = append(f.val, src[start:i]...)
		f.val = append(f.val, '"')
		return jepsenKeyword, true
	}
	if c >= '0' && c <= '9' || c == '-' {
		// An integer: digits up to a delimiter, as the general parser writes it back.
		src, start := p.src, p.pos
		i := start
		if c == '-' {
			i++
		}
		d := i
		for i < len(src) && src[i] >= '0' && src[i] <= '9' {
			i++
		}
		if i < len(src) && !jepsenDelimiters[src[i]] {
			return 0, false // a float, a ratio, a suffix: the general path's
		}
		if i == len(src) && !p.final {
			p.short = true
		}
		if i == d || src[d] == '0' && (i-d > 1 || c == '-') {
			return 0, false
		}
		p.pos = i
		f.val = append(f.val, src[start:i]...)
		return jepsenInt, true
	}
	tok := jepsenFastToken(p)
	switch string(tok) {
	case "":
		return 0, false
	case "nil":
		f.val = append(f.val, "null"...)
		return jepsenNil, true
	case "true", "false":
		f.val = append(f.val, tok...)
		return jepsenBool, true
	}
	if d := tok[0]; d >= '0' && d <= '9' || d == '-' || d == '+' {
		if !jepsenFastDigits(tok) {
			return 0, false // signs, suffixes, floats, ratios: the general path's
		}
		f.val = append(f.val, tok...)
		return jepsenInt, true
	}
	if d := tok[0]; !(d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z') || !jepsenFastPlainAll(tok) {
		return 0, false
	}
	f.val = append(f.val, '"')
	f.val = append(f.val, tok...)
	f.val = append(f.val, '"')
	return jepsenSymbol, true
}

// jepsenFastToken reads bytes up to the next delimiter, as the general parser's token,
// without copying them.
func jepsenFastToken(p *jepsenParser) []byte {
	src, start := p.src, p.pos
	i := start
	for i < len(src) && !jepsenDelimiters[src[i]] {
		i++
	}
	if i == len(src) && !p.final {
		p.short = true
	}
	p.pos = i
	return src[start:i]
}

// jepsenFastKeyword reads a keyword and returns its name.
func jepsenFastKeyword(p *jepsenParser) ([]byte, bool) {
	if p.src[p.pos] != ':' {
		return nil, false
	}
	p.pos++
	tok := jepsenFastToken(p)
	if len(tok) == 0 || tok[0] == ':' || !utf8.Valid(tok) {
		return nil, false // not valid UTF-8: the general path refuses it
	}
	return tok, true
}

// jepsenFastName reads a keyword's name or a string without escapes (the bytes as they
// are, as the general parser's), nil (isNil), or, with ints, an integer's digits.
func jepsenFastName(p *jepsenParser, ints bool) (s []byte, isNil, ok bool) {
	switch c := p.src[p.pos]; {
	case c == ':':
		s, ok = jepsenFastKeyword(p)
		return s, false, ok
	case c == '"':
		p.pos++
		start := p.pos
		for p.more() && p.src[p.pos] != '"' && p.src[p.pos] != '\\' && p.src[p.pos] != '\n' {
			p.pos++
		}
		if !p.more() || p.src[p.pos] != '"' || !utf8.Valid(p.src[start:p.pos]) {
			return nil, false, false
		}
		p.pos++
		return p.src[start : p.pos-1], false, true
	}
	tok := jepsenFastToken(p)
	if string(tok) == "nil" {
		return nil, true, true
	}
	if ints && len(tok) > 0 && jepsenFastDigits(tok) {
		return tok, false, true
	}
	return nil, false, false
}

// jepsenFastDigits reports whether tok is an integer as the general parser writes it
// back: -?(0|[1-9][0-9]*), never -0.
func jepsenFastDigits(tok []byte) bool {
	d := tok
	if d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || d[0] == '0' && (len(d) > 1 || len(tok) > 1) {
		return false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// jepsenFastInt parses an integer of at most most digits.
func jepsenFastInt(tok []byte, most int) (int64, bool) {
	if len(tok) == 0 || !jepsenFastDigits(tok) {
		return 0, false
	}
	neg := tok[0] == '-'
	if neg {
		tok = tok[1:]
	}
	if len(tok) > most {
		return 0, false
	}
	var n int64
	for _, c := range tok {
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// jepsenFastPlain marks the bytes that encoding/json writes as they are: printable
// ASCII but the quote, the backslash and the three it escapes for HTML.
var jepsenFastPlain = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// jepsenFastNameByte marks the bytes of a keyword's name that jepsenFast writes as they
// are: plain, and not a delimiter.
var jepsenFastNameByte = func() (t [256]bool) {
	for c := range t {
		t[c] = jepsenFastPlain[c] && !jepsenDelimiters[c]
	}
	return t
}()

func jepsenFastPlainAll(b []byte) bool {
	for _, c := range b {
		if !jepsenFastPlain[c] {
			return false
		}
	}
	return true
}
