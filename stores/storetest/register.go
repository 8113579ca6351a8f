package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

// Register runs the register conformance suite. open returns a store connected to the
// real server; the store is used by one subtest and may be closed by open's own cleanup.
func Register(t *testing.T, open func(t *testing.T) register.Store, opts ...Option) {
	o := buildOptions(opts)

	// fresh resets the store and returns it with one session.
	fresh := func(t *testing.T) (context.Context, register.Store, register.Session) {
		ctx := testContext(t)
		s := open(t)
		if err := s.Reset(ctx); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		return ctx, s, registerSession(t, s)
	}

	t.Run("absent key reads not found", func(t *testing.T) {
		ctx, _, sess := fresh(t)
		checkRead(ctx, t, sess, "absent", 0, false)
	})
	t.Run("write then read", func(t *testing.T) {
		ctx, _, sess := fresh(t)
		for _, v := range []int64{1, 0, -5, 1 << 40} {
			write(ctx, t, sess, workloads.Request{OpID: "w"}, "k", v)
			checkRead(ctx, t, sess, "k", v, true)
		}
		checkRead(ctx, t, sess, "other", 0, false)
	})
	t.Run("writes are seen by other sessions", func(t *testing.T) {
		ctx, s, a := fresh(t)
		b := registerSession(t, s)
		write(ctx, t, a, workloads.Request{OpID: "w1"}, "k", 3)
		checkRead(ctx, t, b, "k", 3, true)
		write(ctx, t, b, workloads.Request{OpID: "w2"}, "k", 4)
		checkRead(ctx, t, a, "k", 4, true)
	})
	t.Run("cas", func(t *testing.T) {
		ctx, _, sess := fresh(t)
		write(ctx, t, sess, workloads.Request{OpID: "w"}, "k", 1)
		checkCAS(ctx, t, sess, workloads.Request{OpID: "c1"}, "k", 1, 2, true)
		checkRead(ctx, t, sess, "k", 2, true)
		checkCAS(ctx, t, sess, workloads.Request{OpID: "c2"}, "k", 1, 3, false)
		checkRead(ctx, t, sess, "k", 2, true)
	})
	t.Run("cas on an absent key fails and leaves it absent", func(t *testing.T) {
		ctx, _, sess := fresh(t)
		// 0 is what a store that confused absent with zero would hold.
		checkCAS(ctx, t, sess, workloads.Request{OpID: "c"}, "absent", 0, 1, false)
		checkRead(ctx, t, sess, "absent", 0, false)
	})
	t.Run("reset removes every register", func(t *testing.T) {
		ctx, s, sess := fresh(t)
		write(ctx, t, sess, workloads.Request{OpID: "w1"}, "a", 1)
		write(ctx, t, sess, workloads.Request{OpID: "w2"}, "b", 2)
		if err := s.Reset(ctx); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		checkRead(ctx, t, sess, "a", 0, false)
		checkRead(ctx, t, sess, "b", 0, false)
	})
	t.Run("without Idempotent the op id is not consulted", func(t *testing.T) {
		ctx, s, sess := fresh(t)
		other := registerSession(t, s)
		req := workloads.Request{OpID: "naive"}
		write(ctx, t, sess, req, "k", 1)
		write(ctx, t, other, workloads.Request{OpID: "other"}, "k", 2)
		write(ctx, t, sess, req, "k", 1)
		checkRead(ctx, t, sess, "k", 1, true)
	})
	t.Run(ConcurrentCASIncrements, func(t *testing.T) {
		ctx, s, sess := fresh(t)
		write(ctx, t, sess, workloads.Request{OpID: "init"}, "k", 0)
		const workers, attempts = 8, 20
		wins := make([]int64, workers)
		sessions := make([]register.Session, workers)
		for w := range sessions {
			sessions[w] = registerSession(t, s)
		}
		errs := race(workers, func(w int) error {
			ws := sessions[w]
			for i := 0; i < attempts; i++ {
				v, _, err := ws.Read(ctx, "k")
				if err != nil {
					return fmt.Errorf("worker %d read: %w", w, err)
				}
				ok, err := ws.CAS(ctx, workloads.Request{OpID: fmt.Sprintf("%d-%d", w, i)}, "k", v, v+1)
				if err != nil {
					return fmt.Errorf("worker %d cas: %w", w, err)
				}
				if ok {
					wins[w]++
				}
			}
			return nil
		})
		var total int64
		for w := range wins {
			if errs[w] != nil {
				t.Fatal(errs[w])
			}
			total += wins[w]
		}
		if total == 0 {
			t.Fatal("no cas succeeded")
		}
		// Every successful cas moved the register by exactly 1 from the value it read.
		got, found, err := sess.Read(ctx, "k")
		if err != nil || !found {
			t.Fatalf("Read(k) = %d, found %v, %v", got, found, err)
		}
		var v violations
		if got != total {
			v.add("register holds %d after %d successful cas increments from 0: %d were lost", got, total, total-got)
		}
		v.report(t, o, ConcurrentCASIncrements)
	})
	t.Run("conn is a loopback address after a call", func(t *testing.T) {
		ctx, _, sess := fresh(t)
		checkRead(ctx, t, sess, "k", 0, false)
		checkLoopbackConn(t, sess.Conn())
	})

	idem := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			if o.noIdempotentRegister != "" {
				t.Skipf("store does not support idempotent register operations: %s", o.noIdempotentRegister)
			}
			f(t)
		})
	}
	idem("idempotent write replay does not apply again", func(t *testing.T) {
		ctx, s, sess := fresh(t)
		other := registerSession(t, s)
		req := workloads.Request{OpID: "iw", Idempotent: true}
		write(ctx, t, sess, req, "k", 1)
		write(ctx, t, other, workloads.Request{OpID: "later", Idempotent: true}, "k", 2)
		write(ctx, t, sess, req, "k", 1)
		write(ctx, t, other, req, "k", 1)
		checkRead(ctx, t, sess, "k", 2, true)
	})
	idem("idempotent cas replay returns the original outcome", func(t *testing.T) {
		ctx, s, sess := fresh(t)
		other := registerSession(t, s)
		write(ctx, t, sess, workloads.Request{OpID: "w", Idempotent: true}, "k", 1)
		req := workloads.Request{OpID: "ic", Idempotent: true}
		checkCAS(ctx, t, sess, req, "k", 1, 2, true)
		write(ctx, t, other, workloads.Request{OpID: "later", Idempotent: true}, "k", 1)
		// The register holds from again: a replay that applied again would move it to 2.
		checkCAS(ctx, t, sess, req, "k", 1, 2, true)
		checkCAS(ctx, t, other, req, "k", 1, 2, true)
		checkRead(ctx, t, sess, "k", 1, true)
	})
	idem("reset forgets idempotent op ids", func(t *testing.T) {
		ctx, s, sess := fresh(t)
		req := workloads.Request{OpID: "ir", Idempotent: true}
		write(ctx, t, sess, req, "k", 1)
		if err := s.Reset(ctx); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		write(ctx, t, sess, req, "k", 1)
		checkRead(ctx, t, sess, "k", 1, true)
	})
}

func registerSession(t *testing.T, s register.Store) register.Session {
	t.Helper()
	return openSession(t, s.Session)
}

func write(ctx context.Context, t *testing.T, s register.Session, req workloads.Request, key string, v int64) {
	t.Helper()
	if err := s.Write(ctx, req, key, v); err != nil {
		t.Fatalf("Write(%s, %d, %+v): %v", key, v, req, err)
	}
}

func checkRead(ctx context.Context, t *testing.T, s register.Session, key string, want int64, wantFound bool) {
	t.Helper()
	got, found, err := s.Read(ctx, key)
	if err != nil {
		t.Fatalf("Read(%s): %v", key, err)
	}
	if found != wantFound || (found && got != want) {
		t.Errorf("Read(%s) = %d, found %v; want %d, found %v", key, got, found, want, wantFound)
	}
}

func checkCAS(ctx context.Context, t *testing.T, s register.Session, req workloads.Request, key string, from, to int64, want bool) {
	t.Helper()
	got, err := s.CAS(ctx, req, key, from, to)
	if err != nil {
		t.Fatalf("CAS(%s, %d, %d, %+v): %v", key, from, to, req, err)
	}
	if got != want {
		t.Errorf("CAS(%s, %d, %d, %+v) = %v, want %v", key, from, to, req, got, want)
	}
}
