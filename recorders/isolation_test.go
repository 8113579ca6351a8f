package recorders_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestListAppendThroughExec: the list-append examples (Python, five threads; Node, five
// clients), their own transactions checked for serializability through indoubt exec.
// At READ COMMITTED the verdict is invalid and names the anomalies; at SERIALIZABLE it
// is valid. Concurrency makes the anomalies, so READ COMMITTED gets three runs to show
// one.
func TestListAppendThroughExec(t *testing.T) {
	for _, c := range []struct {
		name string
		need func(*testing.T)
		prog []string
	}{
		{"python-psycopg", needPsycopg, []string{"python3", filepath.Join("python", "examples", "list_append.py")}},
		{"node-pg", needPG, []string{"node", filepath.Join("js", "examples", "list-append.mjs")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.need(t)
			srv := pg.Get(t)
			run := func(args ...string) (int, string) {
				bin, err := indoubtBinary()
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				argv := append([]string{"exec", "--quiet", "--out", t.TempDir(), "--dsn", srv.DSN, "--"}, c.prog...)
				cmd := exec.CommandContext(ctx, bin, append(argv, args...)...)
				cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonDeps)
				var buf bytes.Buffer
				cmd.Stdout, cmd.Stderr = &buf, &buf
				err = cmd.Run()
				var exit *exec.ExitError
				switch {
				case errors.As(err, &exit):
					return exit.ExitCode(), buf.String()
				case err != nil:
					t.Fatal(err)
				}
				return 0, buf.String()
			}
			code, out := 0, ""
			for range 3 {
				if code, out = run("20"); code != 0 {
					break
				}
			}
			if code != 1 {
				t.Fatalf("READ COMMITTED: exit %d, want 1 (invalid):\n%s", code, out)
			}
			m := regexp.MustCompile(`verdict: invalid: violates (.*?): (.*?), among \d+ transactions`).FindStringSubmatch(out)
			if m == nil || !strings.Contains(m[2], "G") && !strings.Contains(m[2], "lost-update") {
				t.Fatalf("READ COMMITTED: the verdict does not name the anomalies:\n%s", out)
			}
			t.Logf("READ COMMITTED: violates %s: %s", m[1], m[2])
			// Beside the verdict, exec says whether an acknowledged write was lost.
			lost := regexp.MustCompile(`(?m)^  (no acknowledged write was lost: .*|\d+ acknowledged appends? (is|are) missing .*|for \d+ keys? no read began after .*)$`)
			if l := lost.FindString(out); l == "" {
				t.Errorf("READ COMMITTED: no sentence says whether an acknowledged write was lost:\n%s", out)
			} else {
				t.Logf("READ COMMITTED:%s", l)
			}
			code, out = run("--isolation", "serializable", "20")
			if code != 0 {
				t.Errorf("SERIALIZABLE: exit %d, want 0 (valid):\n%s", code, out)
			}
			if !lost.MatchString(out) {
				t.Errorf("SERIALIZABLE: no sentence says whether an acknowledged write was lost:\n%s", out)
			}
		})
	}
}
