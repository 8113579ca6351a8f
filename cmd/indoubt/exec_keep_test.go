package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// TestExecKeep: with --keep the launched PostgreSQL stops with the run but keeps its
// data, and exec prints how to look at it and remove it; the printed commands, run as
// printed, start a server on the data with the program's row in it, stop it, and remove
// everything. --keep where there is no launched PostgreSQL is refused.
func TestExecKeep(t *testing.T) {
	if _, err := pgserver.Find(); err != nil {
		servertest.SkipOrFail(t, err)
	}
	for _, args := range [][]string{
		{"exec", "--keep", "--dsn", "postgres://u:p@127.0.0.1:9/db", "--", "true"},
		{"exec", "--keep", "--store", "redis", "--", "true"},
	} {
		if code, _, errs := invoke(t, args...); code != 3 || !strings.Contains(errs, "--keep") {
			t.Errorf("%v: exit %d %q, want 3 naming --keep", args, code, errs)
		}
	}
	prog := script(t, `psql -X -q "$INDOUBT_DIRECT_URL" -c 'CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)'
ev invoke apply 0 p-1
ev ok apply 0 p-1
`)
	code, stdout, stderr := invoke(t, "exec", "--quiet", "--keep", "--out", t.TempDir(), "--model", "exactly-once", "--final-cmd", `echo '{"p-1":1}'`, "--", prog)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	start := regexp.MustCompile(`(?m)^indoubt exec:   (.*pg_ctl -D .* start)$`).FindStringSubmatch(stdout)
	dsn := regexp.MustCompile(`(?m)^indoubt exec:   and connect to (\S+)$`).FindStringSubmatch(stdout)
	end := regexp.MustCompile(`(?m)^indoubt exec:   then stop it with (.*pg_ctl -D \S+ stop), and remove it with (rm -rf \S+)$`).FindStringSubmatch(stdout)
	if start == nil || dsn == nil || end == nil {
		t.Fatalf("exec does not say how to look at the kept data and remove it:\n%s", stdout)
	}
	sh := func(cmd string) {
		t.Helper()
		if out, err := exec.Command("sh", "-c", cmd).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
	}
	t.Cleanup(func() { exec.Command("sh", "-c", end[1]+"; "+end[2]).Run() })
	sh(start[1])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var c *pgx.Conn
	var err error
	for c == nil && ctx.Err() == nil {
		if c, err = pgx.Connect(ctx, dsn[1]); err != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if c == nil {
		t.Fatalf("connect to the kept server: %v", err)
	}
	var x int
	err = c.QueryRow(ctx, `SELECT x FROM kept`).Scan(&x)
	c.Close(ctx)
	if err != nil || x != 7 {
		t.Errorf("the program's row: %d, %v", x, err)
	}
	sh(end[1])
	sh(end[2])
	dir := strings.TrimPrefix(end[2], "rm -rf ")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", dir, err)
	}
}
