package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// TestExecServesEachStore: exec launches PostgreSQL, Redis and FerretDB as indoubt run
// does and gives the program the store's DSN through the proxy in the variable its
// drivers read; a client's write through that DSN (psql, redis-cli) meets the proxy's
// cut, named in faults.jsonl with the store's protocol, and the server is described as
// launched.
func TestExecServesEachStore(t *testing.T) {
	for _, c := range []struct {
		store, envVar, client, protocol string
	}{
		{"postgres", "DATABASE_URL", `psql -X -q "$DATABASE_URL" -c 'CREATE TABLE t (x int)' -c 'INSERT INTO t VALUES (1)'`, "postgres"},
		{"redis", "REDIS_URL", `redis-cli -u "$REDIS_URL" SET k 1 | grep -qx OK`, "resp"},
		{"mongo", "MONGODB_URI", "", ""},
	} {
		t.Run(c.store, func(t *testing.T) {
			if err := runner.Available(runner.StoreName(c.store)); err != nil {
				servertest.SkipOrFail(t, err)
			}
			if c.client != "" {
				if _, err := exec.LookPath(strings.Fields(c.client)[0]); err != nil {
					servertest.SkipOrFail(t, err)
				}
			}
			out := t.TempDir()
			envFile := filepath.Join(t.TempDir(), "env")
			body := "env > " + envFile + "\nev invoke apply 0 p-1\n"
			args := []string{"exec", "--quiet", "--out", out, "--store", c.store, "--model", "exactly-once", "--final-cmd", `echo '{"p-1":1}'`}
			if c.client != "" {
				body += "if " + c.client + "; then ev ok apply 0 p-1; else ev info apply 0 p-1; fi\n"
				args = append(args, "--fault", "commit-cut:1")
			} else {
				body += "ev ok apply 0 p-1\n"
			}
			code, stdout, stderr := invoke(t, append(args, "--", script(t, body))...)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
			}
			b, _ := os.ReadFile(envFile)
			env := map[string]string{}
			for _, l := range strings.Split(string(b), "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					env[k] = v
				}
			}
			proxied, direct := env[c.envVar], env["INDOUBT_DIRECT_URL"]
			if px := env["INDOUBT_PROXY_ADDR"]; px == "" || !strings.Contains(proxied, "@"+px+"/") && !strings.Contains(proxied, "//"+px+"/") {
				t.Errorf("%s %q does not go through the proxy at %q", c.envVar, proxied, px)
			}
			if direct == "" || direct == proxied || env["INDOUBT_STORE"] != c.store {
				t.Errorf("INDOUBT_DIRECT_URL %q, %s %q, INDOUBT_STORE %q", direct, c.envVar, proxied, env["INDOUBT_STORE"])
			}
			runs := published(t, out)
			if len(runs) != 1 {
				t.Fatalf("runs %v", runs)
			}
			var res struct {
				Server string `json:"server"`
			}
			if b, err := os.ReadFile(filepath.Join(runs[0], "results.json")); err != nil || json.Unmarshal(b, &res) != nil || !strings.HasPrefix(res.Server, "launched ") {
				t.Errorf("results.json's server %q (%v)", res.Server, err)
			}
			if c.protocol == "" {
				return
			}
			events, err := os.ReadFile(filepath.Join(runs[0], "faults.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(events), `"protocol":"`+c.protocol+`","kind":"commit-cut"`) {
				t.Errorf("faults.jsonl has no cut of the client's write:\n%s", events)
			}
		})
	}
}
