package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/counter"
)

// ConcurrentIncrements is the name of the counter subtest that checks increments under
// concurrency, for KnownViolation: a mechanism and level that let lost updates through
// (a read-write increment under snapshot reads) fail it.
const ConcurrentIncrements = "concurrent increments are counted exactly"

// Counter runs the counter conformance suite. open returns a counter store on the real
// server, with the mechanism and level the caller chose; it is used by one subtest.
func Counter(t *testing.T, open func(t *testing.T) counter.Store, opts ...Option) {
	o := buildOptions(opts)
	fresh := func(t *testing.T) (context.Context, counter.Store, counter.Session) {
		ctx := testContext(t)
		s := open(t)
		if err := s.Reset(ctx); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		return ctx, s, openSession(t, s.Session)
	}
	value := func(ctx context.Context, t *testing.T, s counter.Store, want int64) {
		t.Helper()
		v, err := s.Value(ctx)
		if err != nil {
			t.Fatalf("Value: %v", err)
		}
		if v != want {
			t.Errorf("Value = %d, want %d", v, want)
		}
	}

	t.Run("increments count one each", func(t *testing.T) {
		ctx, s, sess := fresh(t)
		if s.Mechanism() == "" {
			t.Error("Mechanism() is empty")
		}
		value(ctx, t, s, 0)
		for i := int64(1); i <= 3; i++ {
			out, err := sess.Increment(ctx, workloads.Request{OpID: fmt.Sprint("i", i)})
			if err != nil {
				t.Fatalf("Increment %d: %v", i, err)
			}
			if out.Wrote != i || out.Replayed || out.Read != nil && *out.Read != i-1 {
				t.Errorf("Increment %d = %+v, want wrote %d (read %d where read)", i, out, i, i-1)
			}
		}
		checkLoopbackConn(t, sess.Conn())
		if v, err := sess.Read(ctx); err != nil || v != 3 {
			t.Errorf("Read = %d, %v; want 3", v, err)
		}
		value(ctx, t, s, 3)
		if err := s.Reset(ctx); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		value(ctx, t, s, 0)
	})
	t.Run("idempotent increment replays its outcome", func(t *testing.T) {
		ctx, s, sess := fresh(t)
		other := openSession(t, s.Session)
		req := workloads.Request{OpID: "once", Idempotent: true}
		first, err := sess.Increment(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := other.Increment(ctx, workloads.Request{OpID: "other", Idempotent: true}); err != nil {
			t.Fatal(err)
		}
		again, err := sess.Increment(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !again.Replayed || again.Wrote != first.Wrote {
			t.Errorf("replay = %+v, want replayed with wrote %d", again, first.Wrote)
		}
		value(ctx, t, s, 2)
		// Without Idempotent the op id is not consulted.
		if out, err := sess.Increment(ctx, workloads.Request{OpID: "once"}); err != nil || out.Replayed {
			t.Errorf("naive increment with a recorded op id = %+v, %v; want a new increment", out, err)
		}
		value(ctx, t, s, 3)
	})
	t.Run(ConcurrentIncrements, func(t *testing.T) {
		ctx, s, _ := fresh(t)
		const workers, each = 6, 20
		sessions := make([]counter.Session, workers)
		for w := range sessions {
			sessions[w] = openSession(t, s.Session)
		}
		wrote := make([][]int64, workers)
		errs := race(workers, func(w int) error {
			for i := range each {
				for {
					out, err := sessions[w].Increment(ctx, workloads.Request{OpID: fmt.Sprintf("w%d-%d", w, i)})
					if workloads.Classify(err) == workloads.ClassConflict && ctx.Err() == nil {
						continue // refused by the server: retried, as the workload's conflict policy does
					}
					if err != nil {
						return err
					}
					wrote[w] = append(wrote[w], out.Wrote)
					break
				}
			}
			return nil
		})
		for w, err := range errs {
			if err != nil {
				t.Fatalf("worker %d: %v", w, err)
			}
		}
		var v violations
		seen := map[int64]string{}
		for w, ws := range wrote {
			for i, x := range ws {
				if prev, ok := seen[x]; ok {
					v.add("two acknowledged increments wrote %d: %s and w%d-%d (a lost update)", x, prev, w, i)
				}
				seen[x] = fmt.Sprintf("w%d-%d", w, i)
			}
		}
		got, err := s.Value(ctx)
		if err != nil {
			t.Fatalf("Value: %v", err)
		}
		if got != workers*each {
			v.add("counter holds %d after %d acknowledged increments", got, workers*each)
		}
		v.report(t, o, ConcurrentIncrements)
	})
}
