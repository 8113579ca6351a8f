package indoubttest_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// A decrement of 3 units is invoked with Amount(3); a value that holds one member per
// model of Models is a map of part name to value.
func ExampleAmount() {
	fmt.Println(indoubttest.Amount(3))
	b, _ := json.Marshal(map[string]any{"stock": indoubttest.Balance(7), "reservations": checker.ExactlyOnceState{"0-1": 1}})
	fmt.Println(string(b))
	// Output:
	// {"amount":3}
	// {"reservations":{"0-1":1},"stock":{"balance":7}}
}

// Reservations that take n units of stock and must be made exactly once, judged by
// two models on one history. reserve stands for the code under test. It needs the
// *testing.T of a test and a PostgreSQL, so it is compiled here, not run.
func ExampleModels() {
	var t *testing.T // the test's
	reserve := func(key string, n int64) error { return nil }
	srv := pgtest.Postgres(t)
	srv.Arm("commit-cut:0.2")
	rec := indoubttest.NewRecorder(t, srv)
	w := rec.Worker()
	for i := range 10 {
		n := int64(1 + i%5)
		op := w.Invoke("reserve", indoubttest.Amount(n))
		op.Done(indoubttest.Applied(-1), reserve(op.ID(), n)) // your code keys it by op.ID()
	}
	srv.Disarm()
	// Read the final state around the proxy: the stock left, and each reservation's count.
	rec.Read("read", map[string]any{
		"stock":        indoubttest.Balance(70),
		"reservations": checker.ExactlyOnceState{"0-1": 1 /* ... */},
	})
	indoubttest.Check(t, rec, indoubttest.Models(
		indoubttest.Part{Name: "stock", Model: indoubttest.Budget(100),
			Functions: map[string]string{"reserve": "decrement", "read": "read"}},
		indoubttest.Part{Name: "reservations", Model: indoubttest.ExactlyOnce(),
			Functions: map[string]string{"reserve": "apply", "read": "read"}}))
}
