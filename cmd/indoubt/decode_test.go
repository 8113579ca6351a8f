package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A tampered results.json or faults.jsonl is refused with one line that names the field
// and what it holds, never a Go type, by report, compare and check --faults.
func TestDecodeErrorsPrintNoGoTypes(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join("..", "..", "checker", "testdata", "exactly-once", "valid.jsonl")
	for _, c := range []struct {
		file, content, want string
	}{
		{"results.json", `{"workers":"x"}`, "workers is a string, want an integer"},
		{"results.json", `{"workload":"budget","final":{"applied":"x"}}`, "final.applied is a string, want an integer"},
		{"results.json", `{"faults":{"by_kind":{"commit-cut":"many"}}}`, "faults.by_kind is a string, want an integer"},
		{"results.json", `[]`, "the value is an array, want an object"},
		{"results.json", `{"workers":`, "not JSON"},
		{"faults.jsonl", `{"kind":"commit-cut","conn":5,"time":"2026-01-01T00:00:00Z"}`, "conn is a number, want a string"},
	} {
		d := filepath.Join(dir, strings.ReplaceAll(c.want, " ", "-"))
		os.MkdirAll(d, 0o755)
		path := filepath.Join(d, c.file)
		os.WriteFile(path, []byte(c.content+"\n"), 0o644)
		var cmds [][]string
		if c.file == "results.json" {
			cmds = [][]string{{"report", d}, {"compare", d, d}}
		} else {
			cmds = [][]string{{"check", "--faults", path, hist}}
		}
		for _, args := range cmds {
			code, stdout, stderr := invoke(t, args...)
			if code != 3 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("%v on %s: exit %d, stdout %q, stderr %q; want exit 3 and one line saying %q", args, c.content, code, stdout, stderr, c.want)
			}
			for _, goType := range []string{"Go struct", "Go value", "of type", "plain", "int64"} {
				if strings.Contains(stderr, goType) {
					t.Errorf("%v on %s prints a Go type: %q", args, c.content, stderr)
				}
			}
		}
	}
}
