package main

import (
	"fmt"
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

// A history value of the wrong JSON type is refused with one line naming the field and
// what it holds: a budget outcome's applied that is a string, a value that is an array
// where an object goes (encoding/json named an anonymous struct type in full).
func TestHistoryValueErrorsPrintNoGoTypes(t *testing.T) {
	dir := t.TempDir()
	header := `{"header":{"format":"indoubt-history/1","model":"budget","params":{"budget":3}}}` + "\n"
	for i, c := range []struct{ value, want string }{
		{`{"applied":"yes"}`, "applied is a string, want true or false"},
		{`{"applied":true,"balance":"2"}`, "balance is a string, want an integer"},
		{`[1]`, "the value is an array, want an object"},
	} {
		path := filepath.Join(dir, fmt.Sprintf("h%d.jsonl", i))
		os.WriteFile(path, []byte(header+`{"index":0,"type":"invoke","process":0,"f":"decrement","value":1}`+"\n"+
			`{"index":1,"type":"ok","process":0,"f":"decrement","value":`+c.value+"}\n"), 0o644)
		code, stdout, stderr := invoke(t, "check", path)
		if code != 3 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("value %s: exit %d, stdout %q, stderr %q; want exit 3 and one line saying %q", c.value, code, stdout, stderr, c.want)
		}
		for _, goType := range []string{"Go struct", "Go value", "of type", "*bool", "int64"} {
			if strings.Contains(stderr, goType) {
				t.Errorf("value %s prints a Go type: %q", c.value, stderr)
			}
		}
	}
}
