package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"plain", "3-41 read balance 877", "3-41 read balance 877"},
		{"unicode letters stay", "bűdget 日本語 ✓", "bűdget 日本語 ✓"},
		{"clear screen", "3-\x1b[2J\x1b[H41", `3-\x1b[2J\x1b[H41`},
		{"set title", "\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
		{"newline and tab of a string are its own", "a\nb\tc\r", `a\nb\tc\r`},
		{"NUL and DEL", "a\x00b\x7f", `a\x00b\x7f`},
		{"C1 CSI", "a\u009b2Jb", `a\u009b2Jb`},
		{"bidi override", "admin\u202eNIMDA", `admin\u202eNIMDA`},
		{"isolates and marks", "\u2066x\u2069\u200f\u061c", `\u2066x\u2069\u200f\u061c`},
		{"line separator", "a\u2028b", `a\u2028b`},
		{"bytes that are not UTF-8", "a\xff\xfeb", `a\xff\xfeb`},
		{"a truncated rune", "a\xe2\x80", `a\xe2\x80`},
		{"backslash left as it is", `a\x1b`, `a\x1b`},
		{"empty", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Escape(c.in); got != c.want {
				t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestFprintf(t *testing.T) {
	type name string
	var b strings.Builder
	Fprintf(&b, "%s\t%v %d %s %s %v %s\n", "x\x1by", name("n\u202e"), 7, errors.New("e\x07"), stringer("s\x1b"), []string{"a\nb"}, (*ptrStringer)(nil))
	if got, want := b.String(), "x\\x1by\tn\\u202e 7 e\\a s\\x1b [a\\nb] <nil>\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// A verb that does not print text formats the value as fmt does, a Stringer too;
	// width and flags apply before the escapes.
	b.Reset()
	Fprintf(&b, "%d %x %q %-4s| %v\n", level(3), "\x1b", "\x1b", "ab", map[string]int{"k\x1b": 1})
	if got, want := b.String(), "3 1b \"\\x1b\" ab  | map[k\\x1b:1]\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestJSON(t *testing.T) {
	in := map[string]string{"op_id": "0-1\x1b[2J\u202e\u009b\x7f", "plain": "ok"}
	b, _ := json.MarshalIndent(in, "", "\t")
	got := JSON(b)
	if firstUnsafe(strings.NewReplacer("\n", "", "\t", "").Replace(string(got))) >= 0 {
		t.Errorf("JSON(%q) = %q keeps a control", b, got)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["op_id"] != in["op_id"] || back["plain"] != "ok" {
		t.Errorf("JSON(%q) = %q reads back as %q (%v): not the same value", b, got, back, err)
	}
	if plain := []byte("{\n\t\"a\": \"b\"\n}"); string(JSON(plain)) != string(plain) {
		t.Errorf("JSON changed JSON with nothing to escape")
	}
}

func TestLines(t *testing.T) {
	var b strings.Builder
	Fprintf(&b, "  %s: %s\n", "cycle", Lines("G1c:\n  T1 wr T2\x1b[2J\n  T2 ww T1\r", "    "))
	if got, want := b.String(), "  cycle: G1c:\n      T1 wr T2\\x1b[2J\n      T2 ww T1\\r\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

type level int

func (l level) String() string { return "level-" + strconv.Itoa(int(l)) }

type stringer string

func (s stringer) String() string { return string(s) }

type ptrStringer struct{ s string }

func (p *ptrStringer) String() string { return p.s }

// FuzzEscape: whatever the input, the output holds no character a terminal acts on,
// is valid UTF-8, and a string with none is returned as it is.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b[2J", "\u202e", "\xff", "a\u009bb", "\t\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q: not UTF-8", s, got)
		}
		for _, r := range got {
			if unsafe(r) {
				t.Fatalf("Escape(%q) = %q keeps %U", s, got, r)
			}
		}
		if firstUnsafe(s) < 0 && got != s {
			t.Fatalf("Escape(%q) = %q: changed a safe string", s, got)
		}
	})
}

func ExampleEscape() {
	opID := "3-\x1b[2J41" // an op id that would clear the screen
	fmt.Println("operation " + Escape(opID))
	// Output: operation 3-\x1b[2J41
}
