package runner_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/runner"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// TestLockDSNRedis: the run lock of a Redis DSN is held by one run at a time: a second
// LockDSN is refused while the first holds it and taken once it is released. A store
// without a lock (mongo) and a launched server (no DSN) take none.
func TestLockDSNRedis(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := redisserver.Start(ctx, redisserver.Options{})
	if err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	defer r.Stop()
	release, err := runner.LockDSN(ctx, runner.Redis, r.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runner.LockDSN(ctx, runner.Redis, r.DSN); err == nil || !strings.Contains(err.Error(), "another indoubt run is using this database") {
		t.Errorf("a second lock of the DSN: %v", err)
	}
	release()
	release, err = runner.LockDSN(ctx, runner.Redis, r.DSN)
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	release()
	for _, c := range []struct {
		store runner.StoreName
		dsn   string
	}{{runner.Mongo, "mongodb://127.0.0.1:1/"}, {runner.Redis, ""}} {
		release, err := runner.LockDSN(ctx, c.store, c.dsn)
		if err != nil || release == nil {
			t.Errorf("%s %q: %v", c.store, c.dsn, err)
			continue
		}
		release()
	}
}
