package redistest_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/redistest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

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
