// Package redistest gives a test a Redis database of its own behind indoubt's
// commit-aware proxy. It links go-redis and nothing of the other stores.
//
//	srv := redistest.Redis(t)                 // srv.DSN: redis://...@proxy/N
//	opt, _ := redis.ParseURL(srv.DSN)
//	opt.MaxRetries = -1                       // let your code own its retries
//	srv.Arm("commit-cut:0.2")
//
// The server is launched once per test binary from Debian's redis-server (or
// INDOUBT_REDIS_SERVER), or is the one INDOUBT_REDIS_DSN names. Each test gets one of
// the server's 16 database numbers, one it has proven empty, and flushes it when the
// test ends: a test never touches keys it did not create. While the test holds the
// database it keeps one key of its own in it, indoubttest:claim, so that tests of other
// test binaries pointed at the same server (go test ./... runs packages in parallel)
// see it taken; your code sees that key too. Where every database holds keys, the
// test fails and says so; a DSN that names a database (redis://host:port/3) restricts
// the tests to that one. Tests of one binary that run in parallel wait for a database
// to come free. Call indoubttest.Main from TestMain to stop a launched server when the
// tests end.
package redistest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
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
// (redis://[:password@]host:port[/db]) instead of a launched one. The tests use only
// databases they find empty, and flush only those, when they end.
const EnvDSN = "INDOUBT_REDIS_DSN"

// databases is how many database numbers Redis has by default.
const databases = 16

// claimKey is the key a test keeps in its database while it holds it.
const claimKey = "indoubttest:claim"

var server = &serve.SharedServer{Env: EnvDSN, Timeout: time.Minute,
	Launch: func(ctx context.Context) (string, func() error, error) {
		r, err := redisserver.Start(ctx, redisserver.Options{})
		if err != nil {
			return "", nil, err
		}
		// Every database of a launched server is the tests' to use: no path.
		return strings.TrimSuffix(r.DSN, "/0"), r.Stop, nil
	},
}

// held is the database numbers this test binary's tests hold; a test waits on free
// when every number it may use is held here.
var held = struct {
	sync.Mutex
	by   map[int]bool
	free *sync.Cond
}{by: map[int]bool{}}

func init() { held.free = sync.NewCond(&held.Mutex) }

// claim is the atomic check-and-take of a database: empty, then holding the claim key.
var claim = redis.NewScript(`if redis.call('DBSIZE') == 0 then redis.call('SET', KEYS[1], ARGV[1]) return 1 end return 0`)

// Redis returns a database number of the test's own on the shared Redis, proven empty,
// behind a commit-aware proxy; srv.DSN selects it through the proxy, srv.DirectDSN
// without, srv.Database is its number. The error rules are those of the stores/redis
// adapter: a reply error is a failure, a lost connection is unknown. opts configure the
// Server (indoubttest.Seed).
func Redis(tb testing.TB, opts ...indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	base := server.Need(tb, "redistest: launch Redis")
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "redis" || u.Host == "" {
		tb.Fatalf("redistest: %s: want redis://[:password@]host:port[/db], got an unparseable URL", EnvDSN)
	}
	candidates := make([]int, 0, databases)
	if p := strings.Trim(u.Path, "/"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			tb.Fatalf("redistest: %s names database %q: want a number", EnvDSN, p)
		}
		candidates = append(candidates, n)
	} else {
		for i := range databases {
			candidates = append(candidates, i)
		}
	}
	dsn := func(db int) string {
		v := *u
		v.Path = "/" + strconv.Itoa(db)
		return v.String()
	}
	db, err := take(tb, candidates, dsn)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	direct := dsn(db)
	tb.Cleanup(func() {
		if err := flush(direct); err != nil {
			tb.Errorf("redistest: flush database %d: %v", db, err)
		}
		held.Lock()
		delete(held.by, db)
		held.free.Broadcast()
		held.Unlock()
	})
	return serve.NewServer(tb, serve.Target{
		Store:      "redis",
		DirectAddr: u.Host,
		DirectDSN:  direct,
		Database:   fmt.Sprint(db),
		Protocol:   toxics.Resp{},
		Options:    opts,
		Classify:   indoubtredis.Classify,
	}).(*indoubttest.Server)
}

// take claims the first of candidates that no test of this binary holds and that is
// empty, waiting while every empty-looking one is held here. It errs when none is
// empty, naming them.
func take(tb testing.TB, candidates []int, dsn func(int) string) (int, error) {
	owner := fmt.Sprintf("%s pid %d", tb.Name(), os.Getpid())
	held.Lock()
	defer held.Unlock()
	for {
		waiting := false
		var full []string
		for _, db := range candidates {
			if held.by[db] {
				waiting = true
				continue
			}
			ok, err := tryClaim(dsn(db), owner)
			if err != nil {
				return 0, fmt.Errorf("database %d: %v", db, err)
			}
			if ok {
				held.by[db] = true
				return db, nil
			}
			full = append(full, strconv.Itoa(db))
		}
		if !waiting {
			return 0, fmt.Errorf("%s: databases %s of %s hold keys (or are claimed by another test): a test uses only a database it proves empty; empty one (FLUSHDB of data you do not need) or point %s at another server",
				EnvDSN, strings.Join(full, ", "), redactedHost(dsn(0)), EnvDSN)
		}
		held.free.Wait()
	}
}

// tryClaim takes database dsn when it is empty.
func tryClaim(dsn, owner string) (bool, error) {
	c, err := client(dsn)
	if err != nil {
		return false, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := claim.Run(ctx, c, []string{claimKey}, owner).Int()
	return n == 1, err
}

// flush empties a database the test holds: the keys it created, and its claim.
func flush(dsn string) error {
	c, err := client(dsn)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.FlushDB(ctx).Err()
}

func client(dsn string) (*redis.Client, error) {
	opt, err := redis.ParseURL(dsn)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(opt), nil
}

func redactedHost(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "the server"
	}
	return u.Host
}
