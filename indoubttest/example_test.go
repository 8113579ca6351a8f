package indoubttest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// charge stands for the code under test: it takes one credit, with key as its
// idempotency key, and calls retried with the error of each attempt it retries.
func charge(ctx context.Context, dsn, key string, retried func(error)) (balance int64, err error) {
	return 9, nil
}

// The values a model reads are made by constructors, and recorded as JSON.
func ExampleApplied() {
	fmt.Println(indoubttest.Applied(9))
	fmt.Println(indoubttest.Replayed(9))
	fmt.Println(indoubttest.Rejected())
	fmt.Println(indoubttest.Balance(990))
	// Output:
	// {"applied":true,"balance":9}
	// {"applied":true,"balance":9,"replayed":true}
	// {"applied":false,"balance":0}
	// {"balance":990}
}

// A complete test: a database of the test's own behind the proxy, commit faults, one
// worker per goroutine recording each charge with its op id as the idempotency key,
// the final balance read around the proxy, and the check. It needs the *testing.T of a
// test and a PostgreSQL, so it is compiled here, not run.
func ExampleCheck() {
	var t *testing.T // the test's
	srv := pgtest.Postgres(t)
	srv.Arm("commit-cut:0.2")
	rec := indoubttest.NewRecorder(t, srv)
	w := rec.Worker()
	for range 25 {
		op := w.Invoke("decrement", nil)
		balance, err := charge(context.Background(), srv.DSN, op.ID(), op.Retried)
		op.Done(indoubttest.Applied(balance), err)
	}
	srv.Disarm()
	rec.Read("read", indoubttest.Balance(975)) // read through srv.DirectDSN
	indoubttest.Check(t, rec, indoubttest.Budget(1000))
}

// Pinning a known-bad version: the test passes while the naive retry is still caught
// charging twice. Compiled, not run: it needs a test's *testing.T.
func ExampleEvaluate() {
	var t *testing.T // the test's
	srv := pgtest.Postgres(t)
	srv.Arm("commit-cut:0.3")
	rec := indoubttest.NewRecorder(t, srv)
	// ... the naive version records its charges ...
	rec.Read("read", indoubttest.Balance(960))
	r := indoubttest.Evaluate(t, rec, indoubttest.Budget(1000))
	if r.Verdict != checker.Invalid || !r.Found("impossible-read") {
		t.Errorf("the naive retry is no longer caught: %s", r.Text)
	}
}

// Several fault seeds in one test; INDOUBT_SEED=N runs seed N alone, as the message of
// a failure says. Compiled, not run: it needs a test's *testing.T.
func ExampleSeeds() {
	var t *testing.T // the test's
	indoubttest.Seeds(t, 3, func(t *testing.T, seed int64) {
		srv := pgtest.Postgres(t) // its proxy decides with seed
		srv.Arm("commit-cut:0.2")
		// ... record and Check as in the example of Check ...
	})
}

// Faults aimed at one statement, in a window of the test: from 1 s to 3 s after Arm,
// cut every commit of a transaction that inserts an order, at most twice. Compiled,
// not run: it needs a test's *testing.T.
func ExampleServer_Arm() {
	var t *testing.T // the test's
	srv := pgtest.Postgres(t)
	srv.Arm("commit-cut:1,max=2,match=INSERT INTO orders@1s-3s")
	// ... the workers run ...
	srv.Disarm()
	fmt.Println(len(srv.Events()), "cuts")
}

// A budget per SKU: each key is an account of its own.
func ExampleBudgets() {
	var t *testing.T // the test's
	rec := indoubttest.NewRecorder(t, nil)
	w := rec.Worker()
	op := w.InvokeOn("sku-2", "decrement", nil)
	op.Done(indoubttest.Applied(4), nil)
	rec.ReadOn("sku-1", "read", indoubttest.Balance(10))
	rec.ReadOn("sku-2", "read", indoubttest.Balance(4))
	indoubttest.Check(t, rec, indoubttest.Budgets(map[string]int64{"sku-1": 10, "sku-2": 5}))
}

// Done takes the worst of an operation's attempts: after an attempt whose connection
// was lost, a definite error does not prove that nothing applied.
func ExampleOp_Done() {
	var t *testing.T // the test's
	rec := indoubttest.NewRecorder(t, nil)
	op := rec.Worker().Invoke("decrement", nil)
	op.Retried(errors.New("conn closed"))       // the first attempt: unknown
	op.Done(nil, errors.New("no credits left")) // recorded as unknown (info), not failed
}
