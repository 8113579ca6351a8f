package workloads

import (
	"context"
	"encoding/json"
	"math/rand/v2"

	"github.com/indoubt/indoubt/histories"
)

// Call is one operation a generator asks for.
type Call struct {
	F     string
	Key   string
	Value any
}

// Reply is what a worker observed for one attempt that returned without error.
type Reply struct {
	// Value is recorded as the completion's value.
	Value any
	// Conflicts counts compare-and-set rounds lost inside the store's mechanism.
	Conflicts int
	// Replayed is true when the idempotent path returned a recorded outcome.
	Replayed bool
	// Failed is true when the operation certainly did not take effect by its own
	// semantics, with no error: a compare-and-set whose expected value did not match.
	// It is recorded as fail without an error text, and never retried.
	Failed bool
}

// Worker runs one worker's operations on its own Session, one at a time.
type Worker interface {
	Session
	// Next returns the worker's next operation.
	Next(rng *rand.Rand) Call
	// Do runs one attempt of call. Errors follow the error contract (see Classify).
	Do(ctx context.Context, call Call, req Request) (Reply, error)
}

// Workload is a workload bound to a store for one run. The runner owns the workers,
// the history, retries and timing; the workload owns what is run and what it means.
type Workload interface {
	// Name is the workload's name.
	Name() Name
	// Model names the checker model that judges its histories.
	Model() string
	// Mechanism describes how the store applies the operation, for reports.
	Mechanism() string
	// Params are recorded in the history header for the checker.
	Params() map[string]json.RawMessage
	// Setup resets the store to the workload's initial state.
	Setup(ctx context.Context) error
	// Worker opens worker id's session.
	Worker(ctx context.Context, id int) (Worker, error)
	// Final reads the final state after every worker stopped; the runner records each
	// read in the history as an operation of its own process.
	Final(ctx context.Context) ([]Call, []Reply, error)
	// Summary is the workload's final state, the `final` section of results.json,
	// computed from the history (final reads included).
	Summary(ops []histories.Op) Final
}
