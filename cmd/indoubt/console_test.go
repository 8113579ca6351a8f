package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// controls returns the first character of s a terminal would act on (outside the
// printer's own newlines), or "".
func controls(s string) string {
	for i, r := range s {
		switch {
		case r == '\n':
		case r == utf8.RuneError:
			return s[i:min(len(s), i+1)]
		case r < 0x20, r == 0x7f, 0x80 <= r && r <= 0x9f, 0x202a <= r && r <= 0x202e, 0x2066 <= r && r <= 0x2069:
			return string(r)
		}
	}
	return ""
}

// TestCheckPrintsControlsEscaped: indoubt check prints an exactly-once history's op
// ids and a bank history's account names with their control characters escaped
// (clear screen, set title, bidi override, C1 CSI), never raw.
func TestCheckPrintsControlsEscaped(t *testing.T) {
	evil := "\x1b[2J\x1b]0;pwned\x07\u202e\u009b"
	esc := `\x1b[2J\x1b]0;pwned\a\u202e\u009b`
	jsonEvil, _ := json.Marshal(evil)
	inner := strings.Trim(string(jsonEvil), `"`)
	dir := t.TempDir()
	for _, tc := range []struct{ name, golden, from, to string }{
		{"exactly-once op ids", "exactly-once/duplicate.jsonl", `"0-1"`, `"0-1` + inner + `"`},
		{"bank account names", "bank/duplicate.jsonl", `"a"`, `"a` + inner + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("..", "..", "checker", "testdata", tc.golden))
			if err != nil {
				t.Fatal(err)
			}
			h := strings.ReplaceAll(string(b), tc.from, tc.to)
			if h == string(b) {
				t.Fatalf("%s holds no %s", tc.golden, tc.from)
			}
			path := filepath.Join(dir, strings.ReplaceAll(tc.golden, "/", "-"))
			if err := os.WriteFile(path, []byte(h), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := invoke(t, "check", path)
			if code != 1 {
				t.Fatalf("exit %d, want 1 (invalid); stderr %q", code, stderr)
			}
			if c := controls(stdout + stderr); c != "" {
				t.Errorf("printed the control %q:\n%q", c, stdout)
			}
			if !strings.Contains(stdout, esc) {
				t.Errorf("the hostile name is not shown escaped (%s):\n%q", esc, stdout)
			}
			// --json: the same value, with the controls as JSON escapes.
			code, stdout, _ = invoke(t, "check", "--json", path)
			var v map[string]any
			if code != 1 || json.Unmarshal([]byte(stdout), &v) != nil {
				t.Fatalf("check --json: exit %d, not JSON: %q", code, stdout)
			}
			if c := controls(stdout); c != "" {
				t.Errorf("check --json printed the control %q", c)
			}
			if !strings.Contains(stdout, `\u001b[2J`) || !strings.Contains(stdout, `\u202e\u009b`) {
				t.Errorf("check --json does not carry the name as JSON escapes: %q", stdout)
			}
		})
	}
}
