// Package console shows text that comes from outside indoubt (a history's op ids and
// account names, a run directory's strings, a server's error message) on a terminal
// without letting that text control the terminal.
//
// The rule, for every string from a run directory, a history or a server that a
// command prints: the characters a terminal would act on instead of showing are
// written as Go escapes, and everything else is written as it is. Escaped are the C0
// controls (tab, newline and carriage return too: in a string from outside they would
// forge a column or a line of their own; the printer's own tabs and newlines are its
// format's, not the string's), DEL, the C1 controls (U+0080 to U+009F: U+009B is CSI
// on terminals that read C1), the bidirectional overrides, embeddings and isolates
// with the marks LRM, RLM and ALM (they reorder what is shown: "Trojan source"), the
// line and paragraph separators, and bytes that are not UTF-8. ESC is written \x1b,
// a newline \n, U+202E \u202e, a stray byte \xff: the forms of Go's %q. A string with
// none of them is returned unchanged.
//
// Printers format with Fprintf, which escapes what %s and %v make of every argument
// this way and leaves the format itself, and numbers, alone; Lines keeps a text's own
// lines, each escaped. JSON printed for machines
// (--json) goes through JSON, which writes the same characters as \u escapes: the
// same JSON value, with nothing a terminal acts on.
package console

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every character a terminal would act on written as a Go
// escape (the package's rule), and s itself when it holds none. A backslash already in
// s is left as it is, so "\x1b" typed as four characters and an escaped ESC read the
// same: the bytes are in the file, and what is printed is never a control.
func Escape(s string) string {
	i := firstUnsafe(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&15, 16))
		case unsafe(r):
			q := strconv.QuoteRuneToASCII(r) // '\x1b', '\n', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// firstUnsafe returns the index of the first byte of s that starts a character Escape
// rewrites, or -1.
func firstUnsafe(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || unsafe(r) {
			return i
		}
		i += n
	}
	return -1
}

// unsafe reports whether a terminal acts on r rather than showing it, or reorders what
// follows it.
func unsafe(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f: // ALM, LRM, RLM
		return true
	case 0x202a <= r && r <= 0x202e: // LRE, RLE, PDF, LRO, RLO
		return true
	case 0x2066 <= r && r <= 0x2069: // LRI, RLI, FSI, PDI
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	}
	return false
}

// JSON returns b, JSON as encoding/json writes it, with every character Escape would
// escape written as a JSON \u escape instead (encoding/json leaves DEL, the C1
// controls and the bidirectional controls raw). The value is the same; only strings
// can hold such characters, so nothing else changes.
func JSON(b []byte) []byte {
	ascii := true
	for _, c := range b {
		if c >= 0x7f {
			ascii = false
			break
		}
	}
	if ascii {
		return b // valid JSON holds no raw C0 control but its white space
	}
	var out []byte
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		// Tab, newline and carriage return are raw only outside strings: the
		// indentation's white space.
		if r == utf8.RuneError && n == 1 || unsafe(r) && r != '\t' && r != '\n' && r != '\r' {
			if r == utf8.RuneError && n == 1 {
				r = utf8.RuneError // not UTF-8: as encoding/json reads it
			}
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// Fprintf is fmt.Fprintf with every argument shown through Escape where a verb prints
// it as text: %s and %v of a string (of any string type), an error, a fmt.Stringer, a
// []string or any other value; %q is Go-quoted already; numbers and the format itself
// are written as they are. An Escaped argument is printed as it is.
func Fprintf(w io.Writer, format string, args ...any) (int, error) {
	esc := make([]any, len(args))
	for i, a := range args {
		esc[i] = escapeArg(a)
	}
	return fmt.Fprintf(w, format, esc...)
}

func escapeArg(a any) any {
	if a == nil {
		return nil
	}
	return textArg{a}
}

// textArg formats its value as fmt would, then escapes what %s and %v made of it.
type textArg struct{ v any }

func (t textArg) Format(f fmt.State, verb rune) {
	if e, ok := t.v.(Escaped); ok && (verb == 's' || verb == 'v') {
		io.WriteString(f, fmt.Sprintf(fmt.FormatString(f, verb), string(e)))
		return
	}
	out := fmt.Sprintf(fmt.FormatString(f, verb), t.v)
	if verb == 's' || verb == 'v' {
		out = Escape(out)
	}
	io.WriteString(f, out)
}

// Escaped is text already shown through Escape: Fprintf prints it as it is.
type Escaped string

// Lines returns s with each of its lines shown through Escape and joined again by a
// newline and indent: a text from outside that has lines of its own (a checker's
// explanation of a cycle) keeps them, indented under the line that introduces it,
// and nothing in it acts on the terminal. A carriage return is not a line break.
func Lines(s, indent string) Escaped {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return Escaped(strings.Join(lines, "\n"+indent))
}
