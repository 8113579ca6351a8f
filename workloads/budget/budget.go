// Package budget is the stand's scenario: one account with a budget (default 1000),
// workers (default 16) each making attempts (default 100) to take 1. The balance must
// never go negative and must reconcile exactly: as many decrements applied as the
// budget, the rest rejected, final balance 0.
//
// History values: a decrement's invoke has no value; its ok completion has
// {"applied":true,"balance":N} (N = -1 when the store does not report it) or
// {"applied":false,"balance":0} for a rejection, which is an ok operation that observed
// balance 0, never a fail. The final read is f "read" with {"balance":N}.
package budget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// Defaults of the stand.
const (
	DefaultBudget   = 1000
	DefaultWorkers  = 16
	DefaultAttempts = 100
)

// Workload binds the budget scenario to a Store.
type Workload struct {
	Store  Store
	Budget int64
}

var _ workloads.Workload = (*Workload)(nil)

// New returns the workload with the given budget on store.
func New(store Store, amount int64) *Workload { return &Workload{Store: store, Budget: amount} }

// Name is workloads.Budget.
func (w *Workload) Name() workloads.Name { return workloads.Budget }

// Model is the checker's budget model.
func (w *Workload) Model() string { return string(workloads.Budget) }

// Mechanism is the store's: how it decrements (Store.Mechanism).
func (w *Workload) Mechanism() string { return w.Store.Mechanism() }

// Params records the budget for the checker.
func (w *Workload) Params() map[string]json.RawMessage {
	return map[string]json.RawMessage{"budget": histories.Value(w.Budget)}
}

// Setup resets the balance to the budget.
func (w *Workload) Setup(ctx context.Context) error { return w.Store.Reset(ctx, w.Budget) }

// Worker opens a session.
func (w *Workload) Worker(ctx context.Context, id int) (workloads.Worker, error) {
	s, err := w.Store.Session(ctx)
	if err != nil {
		return nil, err
	}
	return worker{s}, nil
}

// Final reads the balance. An account that is not there is recorded as a failed read
// with the value {"missing":true}: it returned no balance, and its absence is the
// evidence that the server lost its state (Final.Missing).
func (w *Workload) Final(ctx context.Context) ([]workloads.Call, []workloads.Reply, error) {
	b, err := w.Store.Balance(ctx)
	if errors.Is(err, ErrNoAccount) {
		return []workloads.Call{{F: "read"}}, []workloads.Reply{{Value: MissingValue{Missing: true}, Failed: true}}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return []workloads.Call{{F: "read"}}, []workloads.Reply{{Value: ReadValue{Balance: b}}}, nil
}

// ReadValue is the value of an ok read.
type ReadValue struct {
	Balance int64 `json:"balance"`
}

// MissingValue is the value of a failed read that found no account.
type MissingValue struct {
	Missing bool `json:"missing"`
}

// Final is the `final` section of results.json for the budget workload.
type Final struct {
	Budget   int64  `json:"budget"`
	Balance  *int64 `json:"balance"`
	Applied  int64  `json:"applied"`
	Rejected int64  `json:"rejected"`
	Failed   int64  `json:"failed"`
	Unknown  int64  `json:"unknown"`
	// Replayed counts applied decrements acknowledged by an idempotent retry that found
	// the op id recorded by an earlier attempt: the earlier attempt took the unit.
	Replayed int64 `json:"replayed,omitempty"`
	// Missing is true when the final read found no account at all: the server lost
	// its state, and with it every acknowledged decrement.
	Missing bool `json:"missing,omitempty"`
}

// Summary counts acknowledged outcomes and takes the last read balance.
func (w *Workload) Summary(ops []histories.Op) workloads.Final {
	f := Final{Budget: w.Budget}
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		switch {
		case op.F == "decrement" && op.Type == histories.OK:
			o, ok := plainOutcome(op.Value)
			if !ok && json.Unmarshal(op.Value, &o) != nil {
				o = Outcome{}
			}
			if o.Applied {
				f.Applied++
			} else {
				f.Rejected++
			}
			if o.Replayed && o.Applied {
				f.Replayed++
			}
		case op.F == "decrement" && op.Type == histories.Fail:
			f.Failed++
		case op.F == "decrement" && op.Type == histories.Info:
			f.Unknown++
		case op.F == "read" && op.Type == histories.OK:
			var r ReadValue
			if json.Unmarshal(op.Value, &r) == nil {
				b := r.Balance
				f.Balance, f.Missing = &b, false
			}
		case op.F == "read" && op.Type == histories.Fail:
			var m MissingValue
			if json.Unmarshal(op.Value, &m) == nil && m.Missing {
				f.Balance, f.Missing = nil, true
			}
		}
	}
	return f
}

var _ workloads.Final = Final{}

// Figures shows the applied and rejected decrements and the final balance.
func (f Final) Figures() workloads.Figures {
	return workloads.Figures{Applied: &f.Applied, Rejected: &f.Rejected, Value: f.Balance, PerApplied: "applied decrement"}
}

type worker struct{ Session }

func (worker) Next(*rand.Rand) workloads.Call { return workloads.Call{F: "decrement"} }

func (w worker) Do(ctx context.Context, call workloads.Call, req workloads.Request) (workloads.Reply, error) {
	if call.F != "decrement" {
		return workloads.Reply{}, fmt.Errorf("budget: unknown operation %q", call.F)
	}
	out, err := w.Decrement(ctx, req)
	if err != nil {
		return workloads.Reply{}, err
	}
	return workloads.Reply{Value: out, Conflicts: out.Conflicts, Replayed: out.Replayed}, nil
}
