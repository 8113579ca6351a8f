package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/internal/runner"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
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

// TestRunRefusesARedisAnotherRunUses: the same on Redis, whose lock is the key
// indoubt:run-lock set while a run lasts: set by another run, a run on the DSN is
// refused with one line; once it is gone the run goes ahead, and the run deletes its
// own lock when it ends, so that the next run is not refused for 30 s.
func TestRunRefusesARedisAnotherRunUses(t *testing.T) {
	const redisRunLockKey = "indoubt:run-lock" // docs/commands.md names it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := redisserver.Start(ctx, redisserver.Options{Dir: servertest.ReachableDir(t)})
	if err != nil {
		servertest.SkipOrFail(t, err)
	}
	defer srv.Stop()
	opt, err := redis.ParseURL(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Set(ctx, redisRunLockKey, "another run's token", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	args := []string{"run", "--store", "redis", "--dsn", srv.DSN, "--ops", "2", "--workers", "1", "--out", out}
	wantRefused(t, "another indoubt run is using this database", args...)
	if v, err := c.Get(ctx, redisRunLockKey).Result(); err != nil || v != "another run's token" {
		t.Errorf("the refused run touched the other run's lock: %q %v", v, err)
	}
	if err := c.Del(ctx, redisRunLockKey).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		code, stdout, stderr := invoke(t, args...)
		if code == 3 || strings.Contains(stderr, "another indoubt run") {
			t.Errorf("run %d after the lock was deleted: exit %d, stdout %q, stderr %q", i+1, code, stdout, stderr)
		}
	}
	if n, err := c.Exists(ctx, redisRunLockKey).Result(); err != nil || n != 0 {
		t.Errorf("after the runs the lock key exists (%d, %v): a run must delete its own lock", n, err)
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
