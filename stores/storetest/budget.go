package storetest

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

// Budget runs the budget conformance suite. open returns a store connected to the real
// server; the store is used by one subtest and may be closed by open's own cleanup.
func Budget(t *testing.T, open func(t *testing.T) budget.Store, opts ...Option) {
	o := buildOptions(opts)

	// fresh opens the store and resets it to balance.
	fresh := func(t *testing.T, balance int64) (context.Context, budget.Store) {
		ctx := testContext(t)
		s := open(t)
		if err := s.Reset(ctx, balance); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		return ctx, s
	}

	t.Run("mechanism is named", func(t *testing.T) {
		if m := open(t).Mechanism(); m == "" {
			t.Error("Mechanism() is empty")
		}
	})
	t.Run("reset sets the balance", func(t *testing.T) {
		ctx := testContext(t)
		s := open(t)
		for _, want := range []int64{7, 0, 1000} {
			if err := s.Reset(ctx, want); err != nil {
				t.Fatalf("Reset(%d): %v", want, err)
			}
			got, err := s.Balance(ctx)
			if err != nil {
				t.Fatalf("Balance: %v", err)
			}
			if got != want {
				t.Errorf("Balance after Reset(%d) = %d", want, got)
			}
		}
	})
	for _, idempotent := range []bool{false, true} {
		name := ConcurrentDecrements
		if idempotent {
			name = ConcurrentIdempotentDecrements
		}
		t.Run(name, func(t *testing.T) { concurrentDecrements(t, open(t), idempotent).report(t, o, name) })
	}
	for _, idempotent := range []bool{false, true} {
		name := "decrement at zero is rejected"
		if idempotent {
			name += " (idempotent)"
		}
		t.Run(name, func(t *testing.T) {
			ctx, s := fresh(t, 0)
			sess := budgetSession(t, s)
			got, err := sess.Decrement(ctx, workloads.Request{OpID: "zero-1", Idempotent: idempotent})
			if err != nil {
				t.Fatalf("Decrement: %v", err)
			}
			if got.Applied || got.Replayed || (got.Balance != 0 && got.Balance != -1) {
				t.Errorf("Decrement at 0 = %+v, want rejected with balance 0 (or -1: not reported)", got)
			}
			checkBalance(t, s, 0)
		})
	}
	t.Run("decrement reports the balance after it", func(t *testing.T) {
		ctx, s := fresh(t, 3)
		sess := budgetSession(t, s)
		for i, want := range []int64{2, 1, 0} {
			got, err := sess.Decrement(ctx, workloads.Request{OpID: fmt.Sprintf("after-%d", i)})
			if err != nil {
				t.Fatalf("Decrement %d: %v", i, err)
			}
			if !got.Applied || got.Replayed || (got.Balance != want && got.Balance != -1) {
				t.Errorf("Decrement %d = %+v, want applied with balance %d (or -1)", i, got, want)
			}
		}
		checkBalance(t, s, 0)
	})
	t.Run("idempotent replay returns the original outcome", func(t *testing.T) {
		ctx, s := fresh(t, 5)
		first, second := budgetSession(t, s), budgetSession(t, s)
		req := workloads.Request{OpID: "replay-1", Idempotent: true}
		orig, err := first.Decrement(ctx, req)
		if err != nil {
			t.Fatalf("first Decrement: %v", err)
		}
		if !orig.Applied || orig.Replayed {
			t.Fatalf("first Decrement = %+v, want applied, not replayed", orig)
		}
		// Another op moves the balance, so a replay that re-read the balance instead of
		// returning the recorded outcome would show.
		if _, err := first.Decrement(ctx, workloads.Request{OpID: "replay-other", Idempotent: true}); err != nil {
			t.Fatalf("other Decrement: %v", err)
		}
		// The retry of an operation may run on a new connection: replay must not depend
		// on the session.
		for i, sess := range []budget.Session{first, second} {
			got, err := sess.Decrement(ctx, req)
			if err != nil {
				t.Fatalf("replay %d: %v", i, err)
			}
			want := orig
			want.Replayed = true
			if got != want {
				t.Errorf("replay %d = %+v, want %+v", i, got, want)
			}
		}
		checkBalance(t, s, 3)
	})
	t.Run("without Idempotent the op id is not consulted", func(t *testing.T) {
		ctx, s := fresh(t, 5)
		sess := budgetSession(t, s)
		req := workloads.Request{OpID: "naive-1"}
		for i := 0; i < 2; i++ {
			decrementApplied(ctx, t, sess, req, fmt.Sprintf("Decrement %d", i))
		}
		checkBalance(t, s, 3)
	})
	t.Run("reset forgets op ids", func(t *testing.T) {
		ctx := testContext(t)
		s := open(t)
		sess := budgetSession(t, s)
		req := workloads.Request{OpID: "reset-1", Idempotent: true}
		for i := 0; i < 2; i++ {
			if err := s.Reset(ctx, 5); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			decrementApplied(ctx, t, sess, req, fmt.Sprintf("Decrement after reset %d", i))
			checkBalance(t, s, 4)
		}
	})
	t.Run("conn is a loopback address after a call", func(t *testing.T) {
		ctx, s := fresh(t, 1)
		sess := budgetSession(t, s)
		if _, err := sess.Decrement(ctx, workloads.Request{OpID: "conn-1"}); err != nil {
			t.Fatalf("Decrement: %v", err)
		}
		checkLoopbackConn(t, sess.Conn())
	})
}

func budgetSession(t *testing.T, s budget.Store) budget.Session {
	t.Helper()
	return openSession(t, s.Session)
}

// decrementApplied decrements once and fails t unless the decrement applied and was not
// a replay; what names the call in the messages.
func decrementApplied(ctx context.Context, t *testing.T, sess budget.Session, req workloads.Request, what string) {
	t.Helper()
	got, err := sess.Decrement(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if !got.Applied || got.Replayed {
		t.Errorf("%s = %+v, want applied, not replayed", what, got)
	}
}

func checkBalance(t *testing.T, s budget.Store, want int64) {
	t.Helper()
	got, err := s.Balance(testContext(t))
	if err != nil {
		t.Fatalf("Balance: %v", err)
	}
	if got != want {
		t.Errorf("Balance = %d, want %d", got, want)
	}
}

// concurrentDecrements races 16 sessions over a budget of 100 with 160 attempts: without
// faults exactly 100 apply, 60 are rejected at 0, each applied decrement saw a distinct
// balance, and the final balance is 0. It fails t on errors and returns the violations.
func concurrentDecrements(t *testing.T, s budget.Store, idempotent bool) violations {
	const (
		workers  = 16
		perWork  = 10
		total    = workers * perWork
		startBal = 100
	)
	ctx := testContext(t)
	if err := s.Reset(ctx, startBal); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	sessions := make([]budget.Session, workers)
	for i := range sessions {
		sessions[i] = budgetSession(t, s)
	}
	outcomes := make([][]budget.Outcome, workers)
	errs := race(workers, func(w int) error {
		for i := 0; i < perWork; i++ {
			req := workloads.Request{OpID: fmt.Sprintf("%d-%d", w, i), Idempotent: idempotent}
			o, err := sessions[w].Decrement(ctx, req)
			if err != nil {
				return fmt.Errorf("worker %d op %d: %w", w, i, err)
			}
			outcomes[w] = append(outcomes[w], o)
		}
		return nil
	})
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Decrement without faults failed: %v", err)
		}
	}

	var v violations
	var applied, rejected int
	var balances []int64
	reported := true
	for _, wo := range outcomes {
		for _, o := range wo {
			if o.Replayed {
				v.add("outcome %+v replayed: every op id was fresh", o)
			}
			if o.Applied {
				applied++
				if o.Balance == -1 {
					reported = false
				} else {
					balances = append(balances, o.Balance)
				}
				continue
			}
			rejected++
			if o.Balance != 0 && o.Balance != -1 {
				v.add("rejected outcome %+v: balance must be 0 (or -1: not reported)", o)
			}
		}
	}
	if applied != startBal || rejected != total-startBal {
		v.add("applied %d, rejected %d; want %d and %d", applied, rejected, startBal, total-startBal)
	}
	if reported {
		// Decrements are serialised by the store, so their reported balances are exactly
		// 99, 98, ..., 0 in some order: a balance reported twice means two decrements
		// read the same balance and both wrote, one over the other.
		sort.Slice(balances, func(i, j int) bool { return balances[i] < balances[j] })
		dups, example := 0, int64(0)
		for i := 1; i < len(balances); i++ {
			if balances[i] == balances[i-1] {
				dups++
				example = balances[i]
			}
		}
		if dups > 0 {
			v.add("%d applied decrements reported a balance another one also reported (balance %d, for one): lost updates", dups, example)
		} else if len(balances) == startBal && (balances[0] != 0 || balances[startBal-1] != startBal-1) {
			v.add("applied balances run from %d to %d, want 0 to %d", balances[0], balances[startBal-1], startBal-1)
		}
	}
	if final, err := s.Balance(ctx); err != nil {
		t.Fatalf("Balance: %v", err)
	} else if final != 0 {
		v.add("final balance %d, want 0: %d decrements were acknowledged as applied to a budget of %d", final, applied, startBal)
	}

	conns := map[string]int{}
	for w, sess := range sessions {
		c := sess.Conn()
		checkLoopbackConn(t, c)
		if prev, dup := conns[c]; dup {
			t.Errorf("sessions %d and %d share connection %s: each session must own its connection", prev, w, c)
		}
		conns[c] = w
	}
	return v
}
