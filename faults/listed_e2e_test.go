package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults/toxics"
)

// TestListedFaultsFireWhereListed runs autocommit decrements on a real PostgreSQL
// through a proxy whose schedule lists one fault, with nothing armed at random, under
// two seeds: the fault fires exactly once, at the point listed, whatever the seed; the
// event names that point both ways; and the balance agrees with its truth.
func TestListedFaultsFireWhereListed(t *testing.T) {
	srv := pg.Get(t)
	direct := connect(t, srv.DSN)
	const ops = 8
	for _, tt := range []struct {
		spec string
		kind toxics.Kind
		// hit says whether the event is the one the entry lists.
		hit func(e toxics.Event) bool
	}{
		{"commit-cut@commit:4", toxics.CommitCut, func(e toxics.Event) bool { return e.Point == 4 }},
		{"commit-drop@commit:6", toxics.CommitDrop, func(e toxics.Event) bool { return e.Point == 6 }},
		{"commit-cut@conn:0/txn:3", toxics.CommitCut, func(e toxics.Event) bool { return e.ConnIndex == 0 && e.Txn != nil && e.Txn.Seq == 3 }},
		{"commit-drop@conn:0/txn:5", toxics.CommitDrop, func(e toxics.Event) bool { return e.ConnIndex == 0 && e.Txn != nil && e.Txn.Seq == 5 }},
	} {
		var failedAt []int
		for _, seed := range []int64{1, 7} {
			t.Run(fmt.Sprintf("%s seed %d", tt.spec, seed), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				sched, err := ParseSchedule([]string{tt.spec})
				if err != nil {
					t.Fatal(err)
				}
				table := freshAccount(t, direct, 100)
				px, evs := startProxy(t, srv, seed)
				sctx, stop := context.WithCancel(ctx)
				done := make(chan error, 1)
				opened := make(chan struct{}, 1)
				go func() {
					done <- sched.Run(sctx, px, time.Now(), func(w Window) {
						if w.Open {
							opened <- struct{}{}
						}
					})
				}()
				<-opened
				dsn := dsnVia(t, srv, px.Addr())
				c := connect(t, dsn)
				failed := -1
				for i := 0; i < ops; i++ {
					_, err := c.Exec(ctx, "update "+table+" set balance = balance - 1 where id = 1")
					if err == nil {
						continue
					}
					if !ambiguous(err) || failed >= 0 {
						t.Fatalf("operation %d: %v (%T); want one ambiguous error in all", i+1, err, err)
					}
					failed = i + 1
					c = connect(t, dsn)
				}
				stop()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				got := evs.All()
				if len(got) != 1 {
					t.Fatalf("events %+v, want exactly one", got)
				}
				e := got[0]
				if e.Kind != tt.kind || !tt.hit(e) {
					t.Fatalf("event %+v, want a %v at the point %s lists", e, tt.kind, tt.spec)
				}
				if e.Point == 0 || e.Txn == nil {
					t.Errorf("event %+v names its point one way only", e)
				}
				want := 100 - ops
				if tt.kind == toxics.CommitDrop {
					want++
				}
				if b := balance(t, direct, table); b != want {
					t.Errorf("balance %d after %d decrements and a %v, want %d", b, ops, tt.kind, want)
				}
				if px.Faults().Listed.Fired() != 1 {
					t.Errorf("listed fires %d, want 1", px.Faults().Listed.Fired())
				}
				failedAt = append(failedAt, failed)
			})
		}
		if len(failedAt) == 2 && failedAt[0] != failedAt[1] {
			t.Errorf("%s: operation %d failed under seed 1 and %d under seed 7: a listed fault is the same under every seed", tt.spec, failedAt[0], failedAt[1])
		}
		if tt.spec == "commit-cut@commit:4" && len(failedAt) > 0 && failedAt[0] != 4 {
			t.Errorf("%s: operation %d failed, want the 4th (one autocommit decrement is one counted point)", tt.spec, failedAt[0])
		}
	}
}
