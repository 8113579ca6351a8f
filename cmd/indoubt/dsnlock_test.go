package main

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/runner"
)

// TestRunRefusesADatabaseAnotherRunUses: while a run holds a database's lock (here a
// session holding the advisory lock a run takes), a second run on the same DSN is
// refused with one line, exit 3, before it writes anything; once the lock is released
// the database can be run on. Two runs on one DSN used to both say invalid, each
// reading the other's writes. indoubt exec takes the same lock.
func TestRunRefusesADatabaseAnotherRunUses(t *testing.T) {
	srv := startPostgres(t)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	var got bool
	if err := other.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", int64(runner.PGRunLockKey)).Scan(&got); err != nil || !got {
		t.Fatalf("take the lock as another run would: %v %v", got, err)
	}
	out := t.TempDir()
	wantRefused(t, "another indoubt run is using this database", "run", "--dsn", srv.DSN, "--ops", "2", "--workers", "1", "--out", out)
	wantRefused(t, "another indoubt run is using this database", "exec", "--dsn", srv.DSN, "--out", out, "--", "true")
	if _, err := other.Exec(ctx, "SELECT pg_advisory_unlock($1)", int64(runner.PGRunLockKey)); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := invoke(t, "run", "--dsn", srv.DSN, "--ops", "2", "--workers", "1", "--out", out)
	if code == 3 || strings.Contains(stderr, "another indoubt run") {
		t.Errorf("after the lock was released: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestUnreachableRedisDSNIsOneLine: run and exec on a Redis DSN nothing answers are
// refused in one line on stderr, exit 3: the lock's client printed go-redis's dial
// failures first, four lines of its own log (and exec said "exec: exec:").
func TestUnreachableRedisDSNIsOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--out", t.TempDir(), "--store", "redis", "--dsn", "redis://127.0.0.1:1/0", "--ops", "2", "--workers", "1"},
		{"exec", "--out", t.TempDir(), "--store", "redis", "--dsn", "redis://127.0.0.1:1/0", "--", "true"},
	} {
		cmd, _, errb := startBinary(t, args...)
		err := cmd.Wait()
		code := -1
		if cmd.ProcessState != nil {
			code = cmd.ProcessState.ExitCode()
		}
		if code != 3 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "take the run's lock") ||
			strings.Contains(errb.String(), "exec: exec:") {
			t.Errorf("%v: exit %d (%v), stderr %q: want 3 and one line", args, code, err, errb.String())
		}
	}
}
