package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckPlume runs indoubt check --format plume: a fractured read (T3 saw T2's x
// and T1's y, each of which wrote both) fails read atomic and passes read committed;
// a file that is not Plume's is refused with one line and exit 3; a model that
// forbids nothing is refused.
func TestCheckPlume(t *testing.T) {
	dir := t.TempDir()
	hist := filepath.Join(dir, "fractured.txt")
	if err := os.WriteFile(hist, []byte("w(1,1,0,0)\nw(2,1,0,0)\nw(1,2,1,1)\nw(2,2,1,1)\nr(1,2,2,2)\nr(2,1,2,2)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(bad, []byte("w(1,1,0,0)\n{\"index\":0}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"read committed holds", []string{"--format", "plume", "--consistency-models", "axiomatic-read-committed", hist}, 0, "valid (rw-register)"},
		{"read atomic does not", []string{"--format", "plume", "--consistency-models", "read-atomic", hist}, 1, "read-atomic-cycle: a cycle of 2 transactions"},
		{"causal does not", []string{"--format", "plume", "--consistency-models", "causal", hist}, 1, "violates axiomatic-read-atomic"},
		{"not Plume", []string{"--format", "plume", bad}, 3, ""},
		{"forbids nothing", []string{"--format", "plume", "--consistency-models", "PRAM", hist}, 3, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"check"}, c.args...), &out, &errb)
			if code := exitCode(err, &errb); code != c.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), c.want) {
				t.Errorf("output lacks %q:\n%s", c.want, out.String())
			}
			if c.code == 3 && (strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 || errb.Len() == 0) {
				t.Errorf("want one line on stderr, got %q", errb.String())
			}
		})
	}
}
