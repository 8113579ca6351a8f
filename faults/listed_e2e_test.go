package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults/toxics"
)

// TestListedFaultsFireWhereListed runs autocommit decrements on a real PostgreSQL
// through a proxy with one fault listed at a commit point, with nothing armed at random, under
// two seeds: the fault fires exactly once, at the point listed, whatever the seed; the
// event names that point both ways; and the balance agrees with its truth.
func TestListedFaultsFireWhereListed(t *testing.T) {
	srv := pg.Get(t)
	direct := connect(t, srv.DSN)
	const ops = 8
	for _, tt := range []struct {
		pin toxics.Pin
		// hit says whether the event is the one the entry lists.
		hit func(e toxics.Event) bool
	}{
		{toxics.Pin{Kind: toxics.CommitCut, Point: 4}, func(e toxics.Event) bool { return e.Point == 4 }},
		{toxics.Pin{Kind: toxics.CommitDrop, Point: 6}, func(e toxics.Event) bool { return e.Point == 6 }},
		{toxics.Pin{Kind: toxics.CommitCut, Conn: 0, Txn: 3}, func(e toxics.Event) bool { return e.ConnIndex == 0 && e.Txn != nil && e.Txn.Seq == 3 }},
		{toxics.Pin{Kind: toxics.CommitDrop, Conn: 0, Txn: 5}, func(e toxics.Event) bool { return e.ConnIndex == 0 && e.Txn != nil && e.Txn.Seq == 5 }},
	} {
		var failedAt []int
		for _, seed := range []int64{1, 7} {
			t.Run(fmt.Sprintf("%s seed %d", tt.pin, seed), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				table := freshAccount(t, direct, 100)
				px, evs := startProxy(t, srv, seed)
				if err := px.Faults().Listed.Add(tt.pin); err != nil {
					t.Fatal(err)
				}
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
				got := evs.All()
				if len(got) != 1 {
					t.Fatalf("events %+v, want exactly one", got)
				}
				e := got[0]
				if e.Kind != tt.pin.Kind || !tt.hit(e) {
					t.Fatalf("event %+v, want a %v at the point %s lists", e, tt.pin.Kind, tt.pin)
				}
				if e.Point == 0 || e.Txn == nil {
					t.Errorf("event %+v names its point one way only", e)
				}
				want := 100 - ops
				if tt.pin.Kind == toxics.CommitDrop {
					want++
				}
				if b := balance(t, direct, table); b != want {
					t.Errorf("balance %d after %d decrements and a %v, want %d", b, ops, tt.pin.Kind, want)
				}
				if px.Faults().Listed.Fired() != 1 {
					t.Errorf("listed fires %d, want 1", px.Faults().Listed.Fired())
				}
				failedAt = append(failedAt, failed)
			})
		}
		if len(failedAt) == 2 && failedAt[0] != failedAt[1] {
			t.Errorf("%s: operation %d failed under seed 1 and %d under seed 7: a listed fault is the same under every seed", tt.pin, failedAt[0], failedAt[1])
		}
		if tt.pin == (toxics.Pin{Kind: toxics.CommitCut, Point: 4}) && len(failedAt) > 0 && failedAt[0] != 4 {
			t.Errorf("%s: operation %d failed, want the 4th (one autocommit decrement is one counted point)", tt.pin, failedAt[0])
		}
	}
}
