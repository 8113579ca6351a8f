package budget

import (
	"context"
	"errors"

	"github.com/indoubt/indoubt/workloads"
)

// Store is what the budget workload needs of a database: one account whose balance is
// decremented by 1 only while it is positive, atomically, by the store's idiomatic
// mechanism (a conditional UPDATE, a Lua script, findOneAndUpdate with the condition in
// the filter, an LWT compare-and-set loop).
type Store interface {
	// Mechanism names the atomic mechanism, for the report ("conditional UPDATE").
	Mechanism() string
	// Reset sets the balance to budget and forgets recorded op ids.
	Reset(ctx context.Context, budget int64) error
	// Session opens one worker's connection.
	Session(ctx context.Context) (Session, error)
	// Balance reads the balance after the run. When the account is not there at all
	// (a server that lost its state: restarted with nothing on disk, a table gone after
	// a power loss) the error wraps ErrNoAccount.
	Balance(ctx context.Context) (int64, error)
}

// ErrNoAccount is the error Store.Balance wraps when the account does not exist: the
// balance set by Reset, and every decrement acknowledged since, is gone.
var ErrNoAccount = errors.New("the account does not exist")

// Session is one worker's connection.
type Session interface {
	workloads.Session
	// Decrement takes 1 from the balance if it is positive. Errors follow the contract
	// of package workloads (ErrUnknown, ErrConflict, or definite).
	Decrement(ctx context.Context, req workloads.Request) (Outcome, error)
}

// Outcome is what a decrement observed.
type Outcome struct {
	// Applied is true when this operation took 1 from the balance; false when it found
	// the balance at 0 (rejected).
	Applied bool `json:"applied"`
	// Balance is the balance after the operation when the store reports it, else -1.
	Balance int64 `json:"balance"`
	// Conflicts counts compare-and-set attempts inside the mechanism that lost a race
	// and were retried by it (LWT loops); 0 for single-statement mechanisms.
	Conflicts int `json:"conflicts,omitempty"`
	// Replayed is true when the idempotent path found the op id already recorded and
	// returned the original outcome instead of applying again.
	Replayed bool `json:"replayed,omitempty"`
}
