package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFile writes text to name in a temporary directory and returns its path.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantRefused runs indoubt with args and wants exit 3 with one line on stderr holding
// want, and nothing on stdout.
func wantRefused(t *testing.T, want string, args ...string) {
	t.Helper()
	code, out, errs := invoke(t, args...)
	if code != 3 || !strings.Contains(errs, want) || strings.Count(errs, "\n") != 1 || out != "" {
		t.Errorf("%v: exit %d, stdout %q, stderr %q; want 3 and one line holding %q", args[1:], code, out, errs, want)
	}
}

// TestCheckEDNRefusesBytesThatAreNotEDN: a NUL (or any control byte) between the ops
// of an EDN history refuses it at its line; it used to end the history there, and the
// ops after it went unchecked ("valid ... all 1 operations").
func TestCheckEDNRefusesBytesThatAreNotEDN(t *testing.T) {
	write1 := "{:type :invoke, :f :write, :process 0, :value 1}\n{:type :ok, :f :write, :process 0, :value 1}\n"
	read2 := "{:type :invoke, :f :read, :process 0}\n{:type :ok, :f :read, :process 0, :value 2}\n"
	for _, tc := range []struct{ name, between, want string }{
		{"nul line", "\x00\n", "line 3: byte 0x00 is not EDN"},
		{"nul after a value", "\x00", "line 3: byte 0x00 is not EDN"},
		{"escape byte", "\x1b[2J\n", "line 3: byte 0x1b is not EDN"},
		{"del", "\x7f\n", "line 3: byte 0x7f is not EDN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "h.edn", write1+tc.between+read2)
			wantRefused(t, "h.edn "+tc.want, "check", "--format", "jepsen-edn", "--model", "register", path)
			vec := writeFile(t, "v.edn", "["+write1+tc.between+read2+"]")
			wantRefused(t, "v.edn "+tc.want, "check", "--format", "jepsen-edn", "--model", "register", vec)
		})
	}
	// Inside an op map too, where it used to become part of a symbol.
	inMap := writeFile(t, "m.edn", write1+"{:type :invoke, :f :read, \x00 :process 0}\n")
	wantRefused(t, "m.edn line 3: byte 0x00 is not EDN", "check", "--format", "jepsen-edn", "--model", "register", inMap)
	// Without the byte, the stale read is found.
	path := writeFile(t, "h.edn", write1+read2)
	if code, out, errs := invoke(t, "check", "--format", "jepsen-edn", "--model", "register", path); code != 1 {
		t.Errorf("without the NUL: exit %d (%s%s), want 1, invalid", code, out, errs)
	}
}
