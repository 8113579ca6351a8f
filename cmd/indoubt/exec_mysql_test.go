package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// indoubt exec --store mysql launches MariaDB and hands the program the proxy in the
// variables the mariadb client reads: the client's INSERT goes through the proxy,
// which cuts it after the server committed (the second commit point: the CREATE TABLE is the first), and the event names it.
func TestExecMySQL(t *testing.T) {
	if _, err := exec.LookPath("mariadb"); err != nil {
		servertest.SkipOrFail(t, &servers.NotInstalledError{Server: "mariadb", Program: "mariadb", Hint: "install Debian package mariadb-server"})
		t.Skip(err)
	}
	out := t.TempDir()
	envFile := filepath.Join(t.TempDir(), "env")
	prog := script(t, `env > `+envFile+`
mariadb --no-defaults -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "CREATE TABLE t (k INT PRIMARY KEY)" || exit 1
ev invoke apply 0 p-1
if mariadb --no-defaults -u "$MYSQL_USER" "$MYSQL_DATABASE" -e "INSERT INTO t VALUES (1)"; then
  ev ok apply 0 p-1
else
  ev info apply 0 p-1
fi
`)
	code, stdout, stderr := invoke(t, "exec", "--quiet", "--out", out, "--store", "mysql", "--model", "exactly-once",
		"--fault", "commit-cut@commit:2", "--final-cmd", `echo '{"p-1":1}'`, "--", prog)
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
	if env["MYSQL_HOST"] != "127.0.0.1" || env["INDOUBT_PROXY_ADDR"] != "127.0.0.1:"+env["MYSQL_TCP_PORT"] || env["MYSQL_PWD"] == "" ||
		!strings.HasPrefix(env["DATABASE_URL"], "mysql://indoubt:") || env["MYSQL_DATABASE"] != "indoubt" {
		t.Errorf("MYSQL_HOST %q MYSQL_TCP_PORT %q INDOUBT_PROXY_ADDR %q DATABASE_URL %q MYSQL_DATABASE %q", env["MYSQL_HOST"], env["MYSQL_TCP_PORT"],
			env["INDOUBT_PROXY_ADDR"], env["DATABASE_URL"], env["MYSQL_DATABASE"])
	}
	runs := published(t, out)
	if len(runs) != 1 {
		t.Fatalf("runs %v", runs)
	}
	events, err := os.ReadFile(filepath.Join(runs[0], "faults.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(events), `"protocol":"mysql","kind":"commit-cut","truth":"applied","statement":"INSERT INTO t VALUES (1)","tag":"INSERT 1"`) {
		t.Errorf("faults.jsonl has no cut of the INSERT:\n%s", events)
	}
}
