package counter

import (
	"context"

	"github.com/indoubt/indoubt/workloads"
)

// Store is what the counter workload needs of a database: one hot row holding a counter,
// incremented by 1 by the store's mechanism under the isolation level it was opened
// with, and read back.
type Store interface {
	// Mechanism names the increment mechanism and isolation level, for the report
	// ("read-write, serializable").
	Mechanism() string
	// Reset creates the row if needed and sets the counter to 0, forgetting recorded op
	// ids.
	Reset(ctx context.Context) error
	// Value reads the counter outside any worker's session: before and after the run.
	Value(ctx context.Context) (int64, error)
	// Session opens one worker's connection.
	Session(ctx context.Context) (Session, error)
}

// Session is one worker's connection. Every attempt of an operation runs on it.
type Session interface {
	workloads.Session
	// Increment adds 1 to the counter in one transaction and reports what the
	// transaction read and wrote. Errors follow the contract of package workloads
	// (ErrUnknown, ErrConflict, or definite); an isolation level other than the one
	// asked for is a definite error.
	Increment(ctx context.Context, req workloads.Request) (Outcome, error)
	// Read reads the counter.
	Read(ctx context.Context) (int64, error)
}

// Outcome is what one committed increment observed.
type Outcome struct {
	// Read is the value the transaction read before writing, when the mechanism reads
	// it (read-write, for-update); nil when the server computed the new value itself.
	Read *int64 `json:"read,omitempty"`
	// Wrote is the value the transaction wrote.
	Wrote int64 `json:"wrote"`
	// Replayed is true when the idempotent path found the op id already recorded and
	// returned the original outcome instead of incrementing again.
	Replayed bool `json:"replayed,omitempty"`
}

// RestartCounters is implemented by stores whose server counts transaction restarts by
// reason (CockroachDB's txn.restarts.*). The workload snapshots the counters when it
// sets up and when it reads the final value, and reports the difference: the counters
// are cumulative since the server started, so a single snapshot measures every earlier
// run as well.
type RestartCounters interface {
	RestartCounters(ctx context.Context) (map[string]int64, error)
}
