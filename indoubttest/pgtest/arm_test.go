package pgtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// Arm's match= counts only the commits whose transaction matches, as indoubt proxy
// --match does; Disarm ends it, and the default choice of commits is back.
func TestArmMatch(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	ctx := context.Background()
	proxied, _ := pools(t, srv, `CREATE TABLE orders (k text); CREATE TABLE audit (k text)`)
	tx := func(p *pgxpool.Pool, table string) error {
		return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+table+` VALUES ('x')`)
			return err
		})
	}
	srv.Arm("commit-cut:1,max=2,match=INSERT INTO orders")
	var cut []string
	for _, table := range []string{"audit", "orders", "audit", "orders", "audit", "orders"} {
		if err := tx(proxied, table); err != nil {
			cut = append(cut, table)
		}
		if _, err := proxied.Exec(ctx, `INSERT INTO audit VALUES ('autocommit')`); err != nil {
			cut = append(cut, "audit (autocommit)")
		}
	}
	if len(cut) != 2 || cut[0] != "orders" || cut[1] != "orders" {
		t.Fatalf("cut %v: want the first two transactions that insert into orders, nothing else", cut)
	}
	srv.Disarm()
	srv.Arm("commit-cut:1,max=1")
	if err := tx(proxied, "audit"); err == nil {
		t.Fatalf("after Disarm the match still held: the audit transaction was not cut")
	}
	srv.Disarm()
	if n := len(srv.Events()); n != 3 {
		t.Fatalf("%d events, want 3", n)
	}
}

// A fault window within a test: no fault before it opens, none decided after it
// closes, and some inside it, by the window's own events in the history. A cut decided
// for a commit in flight when the window closes still fires when its reply comes back
// (Knob.Disarm), so a fault may be stamped after the close; the operation it cut must
// then have been invoked before it. The one worker has one operation in flight at a time.
func TestArmWindow(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	ctx := context.Background()
	proxied, direct := pools(t, srv, `CREATE TABLE orders (k text)`)
	rec := indoubttest.NewRecorder(t, srv)
	w := rec.Worker()
	srv.Arm("commit-cut:0.5@300ms-700ms")
	for end := time.Now().Add(1200 * time.Millisecond); time.Now().Before(end); {
		op := w.Invoke("apply", nil)
		_, err := proxied.Exec(withOp(ctx, op), `INSERT INTO orders VALUES ($1)`, op.ID())
		op.Done(nil, err)
	}
	srv.Disarm()
	rec.Read("read", finalCounts(t, direct, `SELECT k, count(*) FROM orders GROUP BY k`))
	r := indoubttest.Evaluate(t, rec, indoubttest.ExactlyOnce())
	_, ops, err := histories.ReadFile(r.RunDir+"/history.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	var start, stop int64 = -1, -1
	var faults []int64
	invoked := map[int64]int64{} // a fault's time -> the invocation of the operation in flight
	var inFlight int64 = -1
	for _, op := range ops {
		switch {
		case op.IsClient() && op.Type == histories.Invoke:
			inFlight = op.Time
		case op.IsClient():
			inFlight = -1
		case op.F == "start":
			start = op.Time
		case op.F == "stop":
			stop = op.Time
		case op.F == "commit-cut":
			faults = append(faults, op.Time)
			invoked[op.Time] = inFlight
		}
	}
	if start < 0 || stop < start {
		t.Fatalf("window start %d, stop %d: want both, in order", start, stop)
	}
	if len(faults) == 0 {
		t.Fatalf("no fault in a window of %v at probability 0.5", time.Duration(stop-start))
	}
	for _, at := range faults {
		switch inv := invoked[at]; {
		case at < start:
			t.Errorf("a fault at %v, before the window opened at %v", time.Duration(at), time.Duration(start))
		case inv < 0:
			t.Errorf("a fault at %v with no operation in flight", time.Duration(at))
		case at > stop && inv > stop:
			t.Errorf("a fault at %v cut an operation invoked at %v, after the window closed at %v", time.Duration(at), time.Duration(inv), time.Duration(stop))
		}
	}
}
