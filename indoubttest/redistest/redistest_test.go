package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	redisserver "github.com/indoubt/indoubt/internal/servers/redis"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/redistest"
	"github.com/indoubt/indoubt/internal/servers"
)

// shared is the server this test binary starts itself and names in INDOUBT_REDIS_DSN,
// as a developer would name the Redis of their machine: its database 0 holds keys that
// are not the tests', which must be there, unchanged, when the tests end.
var shared *redisserver.Server

// theirs are the keys of database 0 that no test created.
var theirs = map[string]string{"session:42": "alice", "cart:42": "3 items"}

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	r, err := redisserver.Start(ctx, redisserver.Options{})
	cancel()
	switch {
	case errors.Is(err, servers.ErrNotInstalled) && os.Getenv("CI") != "true":
		fmt.Fprintf(os.Stderr, "redistest: %v; the tests that need it skip\n", err)
	case err != nil:
		fmt.Fprintf(os.Stderr, "redistest: %v\n", err)
		os.Exit(3)
	default:
		shared = r
		if err := setTheirs(r.DSN); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: %v\n", err)
			r.Stop()
			os.Exit(3)
		}
		os.Setenv(redistest.EnvDSN, strings.TrimSuffix(r.DSN, "/0"))
	}
	code := indoubttest.Main(m)
	if shared != nil {
		if err := checkTheirs(shared.DSN); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: after the tests: %v\n", err)
			code = 1
		}
		shared.Stop()
	}
	os.Exit(code)
}

func setTheirs(dsn string) error {
	opt, err := redis.ParseURL(dsn)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	for k, v := range theirs {
		if err := c.Set(context.Background(), k, v, 0).Err(); err != nil {
			return err
		}
	}
	return nil
}

// checkTheirs says what became of database 0's keys.
func checkTheirs(dsn string) error {
	opt, err := redis.ParseURL(dsn)
	if err != nil {
		return err
	}
	c := redis.NewClient(opt)
	defer c.Close()
	n, err := c.DBSize(context.Background()).Result()
	if err != nil {
		return err
	}
	for k, v := range theirs {
		if got, err := c.Get(context.Background(), k).Result(); err != nil || got != v {
			return fmt.Errorf("database 0's key %s is %q (%v), want %q", k, got, err, v)
		}
	}
	if n != int64(len(theirs)) {
		return fmt.Errorf("database 0 holds %d keys, want its own %d", n, len(theirs))
	}
	return nil
}

func client(t *testing.T, dsn string) *redis.Client {
	opt, err := redis.ParseURL(dsn)
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// Faults per phase: a capped cut fires exactly its cap, a window armed later fires
// nothing before it opens, and Disarm ends it.
func TestArmPhases(t *testing.T) {
	srv := redistest.Redis(t)
	ctx := context.Background()
	c := client(t, srv.DSN)
	incr := func(n int) {
		for range n {
			c.Incr(ctx, "n") // errors are the faults under test
		}
	}
	srv.Arm("commit-cut:1,max=2")
	incr(5)
	if got := len(srv.Events()); got != 2 {
		t.Fatalf("%d cuts with max=2, want 2", got)
	}
	srv.Disarm()
	srv.Arm("commit-drop:1@300ms-")
	incr(3)
	if got := len(srv.Events()); got != 2 {
		t.Fatalf("%d faults before the window opened, want the 2 cuts", got)
	}
	time.Sleep(400 * time.Millisecond)
	incr(1)
	ev := srv.Events()
	if len(ev) != 3 || ev[2].Kind != toxics.CommitDrop || ev[2].Truth != toxics.NotApplied {
		t.Fatalf("after the window opened: %+v, want a third event, a drop", ev)
	}
	srv.Disarm()
	incr(3)
	if got := len(srv.Events()); got != 3 {
		t.Fatalf("%d faults after Disarm, want 3", got)
	}
	// The ground truth matches the store: 5 + 3 + 1 + 3 increments sent, 1 dropped, and
	// the cut ones applied.
	n, err := client(t, srv.DirectDSN).Get(ctx, "n").Int()
	if err != nil || n != 11 {
		t.Fatalf("n = %d (%v), want 11", n, err)
	}
}

// Nothing outlives a test: the proxy, its links and the schedule's goroutines end with
// it.
func TestNoLeaks(t *testing.T) {
	// The shared server and its watchers stay for the binary's lifetime: start them first.
	t.Run("launch", func(t *testing.T) { redistest.Redis(t) })
	ignore := goleak.IgnoreCurrent()
	t.Run("test", func(t *testing.T) {
		srv := redistest.Redis(t)
		c := client(t, srv.DSN)
		srv.Arm("commit-cut:0.5", "commit-drop:0.2@10ms-")
		for range 20 {
			c.Incr(context.Background(), "n")
		}
	})
	goleak.VerifyNone(t, ignore)
}

// Each test has a database of its own, flushed: what one writes, the next does not see.
func TestDatabasePerTest(t *testing.T) {
	var first string
	t.Run("writes", func(t *testing.T) {
		srv := redistest.Redis(t)
		first = srv.Database
		if err := client(t, srv.DirectDSN).Set(context.Background(), "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("reads", func(t *testing.T) {
		srv := redistest.Redis(t)
		n, err := client(t, srv.DSN).Exists(context.Background(), "k").Result()
		if err != nil || n != 0 {
			t.Fatalf("database %s (the previous test's was %s) holds k: %d, %v", srv.Database, first, n, err)
		}
	})
}

// A database that holds keys is never a test's: pointed at a Redis whose database 0
// holds someone's keys, the tests use others and leave those keys as they were
// (checked again after every test of the binary, in TestMain).
func TestNeverTouchesDataItDidNotCreate(t *testing.T) {
	if shared == nil {
		t.Skip("redis-server is not installed")
	}
	t.Run("test", func(t *testing.T) {
		srv := redistest.Redis(t)
		if srv.Database == "0" {
			t.Fatalf("the test got database 0, which holds keys it did not create")
		}
		if err := client(t, srv.DSN).Set(context.Background(), "session:42", "the test's", 0).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if err := checkTheirs(shared.DSN); err != nil {
		t.Fatal(err)
	}
}

// With every database holding keys, a test fails at once and says so, and touches
// nothing.
func TestRefusesADatabaseThatHoldsKeys(t *testing.T) {
	if shared == nil {
		t.Skip("redis-server is not installed")
	}
	base := strings.TrimSuffix(shared.DSN, "/0")
	for db := 1; db < 16; db++ {
		c := client(t, base+"/"+strconv.Itoa(db))
		if err := c.Set(context.Background(), "filler", "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		defer c.Del(context.Background(), "filler")
	}
	done := make(chan struct{})
	ft := &fatal{TB: t}
	go func() {
		defer close(done)
		redistest.Redis(ft)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the test waited instead of refusing")
	}
	if !strings.Contains(ft.msg, "hold keys") || !strings.Contains(ft.msg, "0, 1, 2") {
		t.Fatalf("got %q, want a failure naming the databases that hold keys", ft.msg)
	}
	if err := checkTheirs(shared.DSN); err != nil {
		t.Fatal(err)
	}
	for db := 1; db < 16; db++ {
		if n, err := client(t, base+"/"+strconv.Itoa(db)).DBSize(context.Background()).Result(); err != nil || n != 1 {
			t.Errorf("database %d holds %d keys (%v), want its filler alone", db, n, err)
		}
	}
}

// fatal keeps the first Fatalf and ends the goroutine, as testing.T does.
type fatal struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatal) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
