// Package paytest is the test every payments example runs against its store: both
// versions, without faults, under commit-cut and under commit-drop, through indoubttest.
package paytest

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/examples/payments"
	"github.com/indoubt/indoubt/indoubttest"
)

// Credits is the account's starting balance: more than the charges, so that none is
// rejected and every extra charge shows in the final balance.
const Credits = 1000

// Store is what the suite needs of one store's example.
type Store struct {
	// Server gives the test a database of its own behind the proxy (pgtest.Postgres...).
	Server func(testing.TB) *indoubttest.Server
	// Open sets the account to Credits through srv.DirectDSN and returns the service
	// (naive or idempotent) on srv.DSN, and one on srv.DirectDSN for the final read.
	Open func(tb testing.TB, srv *indoubttest.Server, idempotent bool) (svc, direct payments.Service)
	// Sequential runs the 100 charges one at a time, for a store whose test names no
	// connection (Op.Conn): the proxy's faults then join the charges by time alone,
	// which needs one charge in flight at a time (with four, a fault that fires while
	// several are in flight joins none, and the report can name none of them).
	Sequential bool
}

// Drive runs workers goroutines of charges charges each through svc, recording each on
// rec with its op id as the idempotency key, then records the final balance read
// through direct.
func Drive(tb testing.TB, rec *indoubttest.Recorder, svc, direct payments.Service, workers, charges int) {
	var wg sync.WaitGroup
	for range workers {
		w := rec.Worker()
		wg.Go(func() {
			for range charges {
				op := w.Invoke("decrement", nil)
				ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), opKey{}, op), 10*time.Second)
				r, err := svc.Charge(payments.OnRetry(ctx, op.Retried), op.ID())
				cancel()
				switch {
				case r.Replayed:
					op.Done(indoubttest.Replayed(r.Balance), err)
				case r.Applied:
					op.Done(indoubttest.Applied(r.Balance), err)
				default:
					op.Done(indoubttest.Rejected(), err)
				}
			}
		})
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := direct.Balance(ctx)
	if err != nil {
		tb.Fatalf("final balance: %v", err)
	}
	rec.Read("read", indoubttest.Balance(b))
}

type opKey struct{}

// OpOf returns the operation of a charge Drive runs with ctx, or nil: a store's test
// names the connections its driver uses on it (Op.Conn), so that the proxy's faults
// join the attempts they hit by connection.
func OpOf(ctx context.Context) *indoubttest.Op {
	op, _ := ctx.Value(opKey{}).(*indoubttest.Op)
	return op
}

// Case is one run of the suite.
type Case struct {
	Name       string
	Idempotent bool
	Faults     []string
	// WantFail: the check must fail; Want lists phrases its message (or log) must hold.
	WantFail bool
	Want     []string
}

// Cases are the must-holds for a payments example.
var Cases = []Case{
	{Name: "naive/no-faults"},
	{Name: "idempotent/no-faults", Idempotent: true},
	{Name: "naive/commit-cut", Faults: []string{"commit-cut:0.2"}, WantFail: true,
		Want: []string{"budget check failed\nverdict: invalid: ", "ground truth: ", "the proxy cut "}},
	{Name: "idempotent/commit-cut", Idempotent: true, Faults: []string{"commit-cut:0.2"},
		Want: []string{"changed nothing the second time (replays)"}},
	{Name: "naive/commit-drop", Faults: []string{"commit-drop:0.2"},
		Want: []string{"a drop never applied, so any retry of it is safe"}},
	{Name: "idempotent/commit-drop", Idempotent: true, Faults: []string{"commit-drop:0.2"}},
}

// Run runs every case against st, in parallel: each has a database and a proxy of its
// own (st.Server), and the faults of one proxy join only its own charges. A case spends
// most of its time waiting on the driver's reconnections after a fault, not on the CPU.
func Run(t *testing.T, st Store) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			RunCase(t, st, c)
		})
	}
}

// RunCase runs one case: 4 workers of 25 charges (one of 100 for a Sequential store). It evaluates the history rather than
// checking it, so that a case that must fail (the naive version under commit-cut) is
// asserted to, with what its report says, and the test passes.
func RunCase(t *testing.T, st Store, c Case) {
	srv := st.Server(t)
	svc, direct := st.Open(t, srv, c.Idempotent)
	if len(c.Faults) > 0 {
		srv.Arm(c.Faults...)
	}
	rec := indoubttest.NewRecorder(t, srv)
	workers, charges := 4, 25
	if st.Sequential {
		workers, charges = 1, 100
	}
	Drive(t, rec, svc, direct, workers, charges)
	srv.Disarm()
	r := indoubttest.Evaluate(t, rec, indoubttest.Budget(Credits))
	switch {
	case c.WantFail && r.Verdict != checker.Invalid:
		t.Errorf("the check gave %v; want it to fail:\n%s", r.Verdict, r.Text)
	case !c.WantFail && r.Verdict != checker.Valid:
		t.Errorf("the check gave %v; want it to pass:\n%s", r.Verdict, r.Text)
	}
	for _, w := range c.Want {
		if !strings.Contains(r.Text, w) {
			t.Errorf("the check's report lacks %q:\n%s", w, r.Text)
		}
	}
}
