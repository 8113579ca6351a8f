// Package redistest gives a test a Redis database of its own behind indoubt's
// commit-aware proxy. It links go-redis and nothing of the other stores.
//
//	srv := redistest.Redis(t)                 // srv.DSN: redis://...@proxy/N
//	opt, _ := redis.ParseURL(srv.DSN)
//	opt.MaxRetries = -1                       // let your code own its retries
//	srv.Arm("commit-cut:0.2")
//
// The server is launched once per test binary from Debian's redis-server (or
// INDOUBT_REDIS_SERVER), or is the one INDOUBT_REDIS_DSN names. Tests get one of the
// server's 16 database numbers each, flushed before and after; a seventeenth test
// running in parallel waits for a number to come free. Call indoubttest.Main from
// TestMain to stop a launched server when the tests end.
package redistest

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	indoubtredis "github.com/indoubt/indoubt/stores/redis"
)

// EnvDSN names the environment variable that points the tests at an existing Redis
// (redis://[:password@]host:port) instead of a launched one. Its databases 0 to 15
// are flushed by the tests.
const EnvDSN = "INDOUBT_REDIS_DSN"

// databases is how many database numbers Redis has by default.
const databases = 16

var server = &serve.SharedServer{Env: EnvDSN, Timeout: time.Minute,
	Launch: func(ctx context.Context) (string, func() error, error) {
		r, err := redisserver.Start(ctx, redisserver.Options{})
		if err != nil {
			return "", nil, err
		}
		return launchedDSN(r), r.Stop, nil
	},
}

// free holds the database numbers no test holds.
var free = func() chan int {
	c := make(chan int, databases)
	for i := range databases {
		c <- i
	}
	return c
}()

// launchedDSN is the DSN of a launched Redis, with its per-launch password.
func launchedDSN(r *redisserver.Server) string { return r.DSN }

// Redis returns a database number of the test's own on the shared Redis, flushed, behind
// a commit-aware proxy; srv.DSN selects it through the proxy, srv.DirectDSN without.
// The error rules are those of the stores/redis adapter: a reply error is a failure,
// a lost connection is unknown.
func Redis(tb testing.TB) *indoubttest.Server {
	tb.Helper()
	base := server.Need(tb, "redistest: launch Redis")
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "redis" || u.Host == "" {
		tb.Fatalf("redistest: %s: want redis://[:password@]host:port, got an unparseable URL", EnvDSN)
	}
	db := <-free
	u.Path = "/" + strconv.Itoa(db)
	direct := u.String()
	flush := func() error {
		opt, err := redis.ParseURL(direct)
		if err != nil {
			return err
		}
		c := redis.NewClient(opt)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.FlushDB(ctx).Err()
	}
	if err := flush(); err != nil {
		free <- db
		tb.Fatalf("redistest: flush database %d: %v", db, err)
	}
	tb.Cleanup(func() {
		if err := flush(); err != nil {
			tb.Errorf("redistest: flush database %d: %v", db, err)
		}
		free <- db
	})
	return serve.NewServer(tb, serve.Target{
		Store:      "redis",
		DirectAddr: u.Host,
		DirectDSN:  direct,
		Database:   fmt.Sprint(db),
		Protocol:   toxics.Resp{},
		Classify:   indoubtredis.Classify,
	}).(*indoubttest.Server)
}
