package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckElleHistories checks, through the binary, every history of Elle's
// repository kept beside the project (../shared/histories/elle) for the verdict Elle
// gives it: si-without-g-single.edn, checked for snapshot isolation and repeatable
// read, is exactly G2-item and violates repeatable read (Elle's
// intermediate-sequential-extension-test); huge-scc.edn violates strong snapshot
// isolation (huge-scc-test); the ops of paper-example.edn carry no :process, which
// makes them no client's, and Elle's check, keeping client ops alone, finds nothing to
// check: unknown. A file of the directory with no case here fails the test.
func TestCheckElleHistories(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "histories", "elle")
	files, _ := filepath.Glob(filepath.Join(dir, "*.edn"))
	if len(files) == 0 {
		t.Skipf("Elle's histories are not here (%s)", dir)
	}
	cases := map[string]struct {
		args []string
		code int
		want []string
		not  string
	}{
		"si-without-g-single.edn": {[]string{"--consistency-models", "snapshot-isolation,repeatable-read"}, 1,
			[]string{"invalid (list-append): violates repeatable-read: G2-item 1,"}, "G-single"},
		"huge-scc.edn":      {nil, 1, []string{"invalid (list-append): violates strong-snapshot-isolation"}, ""},
		"paper-example.edn": {nil, 2, []string{"unknown (list-append): nothing was checked"}, ""},
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("%s: no verdict of Elle's known for it", name)
			}
			args := append([]string{"check", "--format", "jepsen-edn", "--model", "list-append"}, c.args...)
			cmd, out, errb := startBinary(t, append(args, f)...)
			err := cmd.Wait()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code || errb.Len() > 0 {
				t.Fatalf("exit %d, want %d; stdout %q, stderr %q", code, c.code, cut(out.String(), 500), errb.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout %q; want %q", cut(out.String(), 500), w)
				}
			}
			if c.not != "" && strings.Contains(out.String(), c.not) {
				t.Errorf("stdout %q names %s", cut(out.String(), 500), c.not)
			}
		})
	}
}
