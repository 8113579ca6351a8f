package main

import (
	"bytes"
	"context"
	"encoding/binary"
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

// TestCheckCobra runs indoubt check --format cobra on a directory of Cobra's client
// logs: a fractured read fails read atomic; a file that is not a Cobra log, exit 3.
func TestCheckCobra(t *testing.T) {
	rec := func(tag byte, ns ...int64) []byte {
		b := []byte{tag}
		for _, n := range ns {
			b = binary.BigEndian.AppendUint64(b, uint64(n))
		}
		return b
	}
	dir := t.TempDir()
	logs := map[string][][]byte{
		"1.log": {rec('S', 1), rec('W', 11, 1, 0), rec('W', 12, 2, 0), rec('C', 1)},
		"2.log": {rec('S', 2), rec('W', 21, 1, 0), rec('W', 22, 2, 0), rec('C', 2)},
		"3.log": {rec('S', 3), rec('R', 2, 21, 1, 0), rec('R', 1, 12, 2, 0), rec('C', 3)},
	}
	for name, recs := range logs {
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Join(recs, nil), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"check", "--format", "cobra", "--consistency-models", "read-atomic", dir}, &out, &errb)
	if code := exitCode(err, &errb); code != 1 || !strings.Contains(out.String(), "read-atomic-cycle") {
		t.Fatalf("exit %d, want 1 and a read-atomic-cycle:\n%s%s", code, out.String(), errb.String())
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "x.log"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	err = run(context.Background(), []string{"check", "--format", "cobra", bad}, &out, &errb)
	if code := exitCode(err, &errb); code != 3 || strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
		t.Fatalf("exit %d, want 3 and one line:\n%s%s", code, out.String(), errb.String())
	}
}
