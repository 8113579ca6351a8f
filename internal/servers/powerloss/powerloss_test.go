package powerloss_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/internal/powerfs"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/powerloss"
	"github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// skipNoFuse skips a test that needs powerfs where FUSE cannot be used, with one line
// saying why; under CI=true it fails instead.
func skipNoFuse(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, powerfs.ErrUnavailable) {
		return
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%v (CI=true: powerfs needs root and /dev/fuse)", err)
	}
	t.Skipf("powerfs: %v", err)
}

func pgConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestPostgresPowerLoss launches PostgreSQL on powerfs with its defaults: every
// committed row survives a power loss, the server answers again on its port, and Stop
// unmounts and removes everything.
func TestPostgresPowerLoss(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := postgres.Start(ctx, postgres.Options{DataFS: powerloss.FS{}})
	skipNoFuse(t, err)
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if filepath.Dir(pg.DataDir) == pg.Dir {
		t.Fatalf("data dir %s is not on the mount in %s", pg.DataDir, pg.Dir)
	}
	c := pgConnect(t, pg.DSN)
	const n = 30
	if _, err := c.Exec(ctx, "create table t (v int)"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := c.Exec(ctx, "insert into t values ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	port := pg.Port
	if err := powerloss.Cut(ctx, pg, powerfs.PowerLossOptions{Tear: true, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	if pg.Port != port {
		t.Errorf("port %d after the power loss, was %d", pg.Port, port)
	}
	var got int
	if err := pgConnect(t, pg.DSN).QueryRow(ctx, "select count(*) from t").Scan(&got); err != nil || got != n {
		t.Fatalf("after the power loss: %d rows (%v), want the %d committed", got, err, n)
	}
	if st, ok := powerloss.Stats(pg); !ok || st.PowerLosses != 1 || st.FileSyncs == 0 {
		t.Errorf("powerfs stats %+v, %v: want one power loss and some fsyncs", st, ok)
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pg.Dir); !os.IsNotExist(err) {
		t.Errorf("after Stop %s is still there (%v)", pg.Dir, err)
	}
}

// redisGet returns the value of key on r, "" when it has none.
func redisGet(t *testing.T, ctx context.Context, r *redis.Server, key string) string {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr, Password: r.Password, MaxRetries: -1})
	defer c.Close()
	v, err := c.Get(ctx, key).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

func redisSet(t *testing.T, ctx context.Context, r *redis.Server, key, value string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr, Password: r.Password, MaxRetries: -1})
	defer c.Close()
	if err := c.Set(ctx, key, value, 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

// TestRedisPowerLoss: with appendfsync always an acknowledged write survives a power
// loss; with no persistence it does not; a server not on powerfs refuses one.
func TestRedisPowerLoss(t *testing.T) {
	for _, tc := range []struct {
		persistence string
		kept        bool
	}{{redis.Always, true}, {redis.NoPersistence, false}} {
		t.Run(tc.persistence, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r, err := redis.Start(ctx, redis.Options{Persistence: tc.persistence, DataFS: powerloss.FS{}})
			skipNoFuse(t, err)
			servertest.SkipOrFail(t, err)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = r.Stop() })
			redisSet(t, ctx, r, "k", "v1")
			if err := powerloss.Cut(ctx, r, powerfs.PowerLossOptions{}); err != nil {
				t.Fatal(err)
			}
			got := redisGet(t, ctx, r, "k")
			if kept := got == "v1"; kept != tc.kept {
				t.Errorf("GET after the power loss: %q; want kept=%v", got, tc.kept)
			}
		})
	}
	t.Run("not on powerfs", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := redis.Start(ctx, redis.Options{})
		servertest.SkipOrFail(t, err)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Stop() })
		if err := powerloss.Cut(ctx, r, powerfs.PowerLossOptions{}); !errors.Is(err, powerloss.ErrNotOnPowerFS) {
			t.Errorf("Cut without DataFS: %v, want ErrNotOnPowerFS", err)
		}
		if _, ok := powerloss.Stats(r); ok {
			t.Error("Stats without DataFS: ok")
		}
		redisSet(t, ctx, r, "k", "still")
		if got := redisGet(t, ctx, r, "k"); got != "still" {
			t.Errorf("after the refused power loss: GET %q", got)
		}
	})
}
