package indoubttest_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/indoubt/indoubt/indoubttest"
)

// charge stands for the code under test: it takes one credit, with key as its
// idempotency key.
func charge(key string) (balance int64, err error) { return 9, nil }

// A worker records each operation of the code under test; the op id is the idempotency
// key, and Done maps the error by the store's rules.
func ExampleWorker_Invoke() {
	var t *testing.T // the test's
	rec := indoubttest.NewRecorder(t, nil)
	w := rec.Worker()
	op := w.Invoke("decrement", nil)
	balance, err := charge(op.ID())
	op.Done(indoubttest.Applied(balance), err)
}

// Check holds the history to a model; a failure names the cause and the run directory.
func ExampleCheck() {
	var t *testing.T // the test's
	rec := indoubttest.NewRecorder(t, nil)
	// ... workers record their operations ...
	rec.Read("read", indoubttest.Balance(990))
	indoubttest.Check(t, rec, indoubttest.Budget(1000).As("charge"))
}

// Op ids are "process-sequence": unique in the test, stable across retries.
func ExampleOp_ID() {
	rec := indoubttest.NewRecorder(quiet{}, nil)
	w := rec.Worker()
	a := w.Invoke("decrement", nil)
	a.Done(nil, errors.New("conn closed")) // unknown: the worker moves to a fresh process
	b := w.Invoke("decrement", nil)
	fmt.Println(a.ID(), b.ID())
	// Output: 0-1 1-2
}

// quiet is enough of a testing.TB for the example above, which reports nothing.
type quiet struct{ testing.TB }

func (quiet) Helper() {}
