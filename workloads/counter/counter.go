// Package counter is the hot-row counter of the CockroachDB contention experiment: every
// worker increments one counter in its own transaction, by one of three mechanisms and
// under an isolation level that is verified, not assumed. The counter must reconcile
// exactly: its value after the run minus its value before must equal the acknowledged
// increments, give or take the increments whose outcome is unknown.
//
// History values: an increment's invoke has no value; its ok completion carries what the
// transaction read and wrote, {"read":41,"wrote":42}, or {"wrote":42} when the server
// computed the new value itself (UPDATE ... SET hits = hits + 1 RETURNING hits), so that
// a lost update shows as two acknowledged increments that wrote the same value. A read
// is f "read" with ok value {"value":N}; the final read is one of them. The header's
// params hold "before", the counter's value when the run started.
package counter

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// Workload binds the counter to a Store. Set its fields before the run; it is then safe
// for the runner's concurrent workers.
type Workload struct {
	Store Store
	// ReadShare is the fraction of operations that read the counter instead of
	// incrementing it; 0 (the experiment's setting) means increments only.
	ReadShare float64

	before   int64
	restarts map[string]int64 // server restart counters at Setup, when the store has them
	after    map[string]int64 // and at Final

	// restartErr is why the restart counters could not be read, if they could not.
	restartErr string
}

var _ workloads.Workload = (*Workload)(nil)

// New returns the counter workload on store, increments only.
func New(store Store) *Workload { return &Workload{Store: store} }

// Name is workloads.Counter.
func (w *Workload) Name() workloads.Name { return workloads.Counter }

// Model is "counter": the exact checker.CheckCounter judges its histories.
func (w *Workload) Model() string { return string(workloads.Counter) }

// Mechanism is the store's mechanism and isolation level.
func (w *Workload) Mechanism() string { return w.Store.Mechanism() }

// BeforeParam is the history header parameter holding the counter's value before the
// run.
const BeforeParam = "before"

// Params records the value before the run for the checker.
func (w *Workload) Params() map[string]json.RawMessage {
	return map[string]json.RawMessage{BeforeParam: histories.Value(w.before)}
}

// Setup resets the counter, reads it back as the value before the run, and snapshots
// the server's restart counters when the store has them.
func (w *Workload) Setup(ctx context.Context) error {
	if err := w.Store.Reset(ctx); err != nil {
		return err
	}
	v, err := w.Store.Value(ctx)
	if err != nil {
		return fmt.Errorf("read the counter before the run: %w", err)
	}
	w.before = v
	w.restarts, w.after, w.restartErr = nil, nil, ""
	if rc, ok := w.Store.(RestartCounters); ok {
		m, err := rc.RestartCounters(ctx)
		if err != nil {
			w.restartErr = err.Error()
		} else {
			w.restarts = m
		}
	}
	return nil
}

// Worker opens a session.
func (w *Workload) Worker(ctx context.Context, id int) (workloads.Worker, error) {
	s, err := w.Store.Session(ctx)
	if err != nil {
		return nil, err
	}
	return &worker{Session: s, w: w}, nil
}

// ReadValue is the value of an ok read.
type ReadValue struct {
	Value int64 `json:"value"`
}

// Final reads the counter after the run and snapshots the restart counters again.
func (w *Workload) Final(ctx context.Context) ([]workloads.Call, []workloads.Reply, error) {
	v, err := w.Store.Value(ctx)
	if err != nil {
		return nil, nil, err
	}
	if rc, ok := w.Store.(RestartCounters); ok && w.restarts != nil {
		m, err := rc.RestartCounters(ctx)
		if err != nil {
			w.restartErr = err.Error()
		} else {
			w.after = m
		}
	}
	return []workloads.Call{{F: "read"}}, []workloads.Reply{{Value: ReadValue{Value: v}}}, nil
}

type worker struct {
	Session
	w *Workload
}

func (k *worker) Next(rng *rand.Rand) workloads.Call {
	if k.w.ReadShare > 0 && rng.Float64() < k.w.ReadShare {
		return workloads.Call{F: "read"}
	}
	return workloads.Call{F: "increment"}
}

func (k *worker) Do(ctx context.Context, call workloads.Call, req workloads.Request) (workloads.Reply, error) {
	switch call.F {
	case "increment":
		out, err := k.Increment(ctx, req)
		if err != nil {
			return workloads.Reply{}, err
		}
		return workloads.Reply{Value: out, Replayed: out.Replayed}, nil
	case "read":
		v, err := k.Read(ctx)
		if err != nil {
			return workloads.Reply{}, err
		}
		return workloads.Reply{Value: ReadValue{Value: v}}, nil
	}
	return workloads.Reply{}, fmt.Errorf("counter: unknown operation %q", call.F)
}

// Final is the `final` section of results.json for the counter: the exact
// reconciliation of the counter against the acknowledged increments.
type Final struct {
	Before int64 `json:"before"`
	// After is the final read; nil when it is missing from the history.
	After *int64 `json:"after"`
	// Acknowledged counts increments that completed ok; Failed those that certainly did
	// not apply (fail, including those the run's deadline cut off); Unknown those whose
	// outcome is unknown (info, or never completed).
	Acknowledged int64 `json:"acknowledged"`
	Failed       int64 `json:"failed"`
	Unknown      int64 `json:"unknown"`
	// Lost is how many acknowledged increments the counter is missing:
	// acknowledged - (after - before) when positive. An unknown increment can only add.
	Lost int64 `json:"lost"`
	// Extra is how far the counter is above the acknowledged increments.
	Extra int64 `json:"extra"`
	// SameValueWrites counts acknowledged increments that wrote a value another
	// acknowledged increment also wrote: each is an update lost with the operations
	// that show it (the checker names them).
	SameValueWrites int64 `json:"same_value_writes"`
	// Replayed counts idempotent retries that found their op id recorded.
	Replayed int64 `json:"replayed,omitempty"`
	// Cause says why the counter disagrees with the acknowledged increments, with the
	// evidence, or that no cause is established; empty when it agrees.
	Cause string `json:"cause,omitempty"`
	// Evidence of ambiguous commits: attempts that ended with the server's own word
	// that the outcome is unknown (workloads.ReasonServerUnknown: SQLSTATE 40003,
	// statement_completion_unknown, on the stores that run the counter), and commits the
	// fault proxy cut after the server applied them (ground truth). Only these attribute
	// Extra to ambiguous commits.
	EvidenceServerUnknown int64 `json:"evidence_40003"`
	EvidenceCuts          int64 `json:"evidence_cuts_applied"`
	// ServerRestarts is the growth of the server's transaction restart counters during
	// the run, by name (CockroachDB: txn.restarts.*); never their totals.
	ServerRestarts map[string]int64 `json:"server_restarts,omitempty"`
	// ServerRestartsError says why the restart counters could not be read.
	ServerRestartsError string `json:"server_restarts_error,omitempty"`
}

// Summary reconciles the counter from the history (final read included).
// serverUnknown counts the failed attempts whose error said the outcome is unknown in
// the server's own word (workloads.ReasonServerUnknown: SQLSTATE 40003,
// statement_completion_unknown, on PostgreSQL and CockroachDB), as the history records
// each attempt's class and reason.
func serverUnknown(failed []histories.FailedAttempt) int64 {
	var n int64
	for _, a := range failed {
		if a.Class == workloads.ClassUnknown.String() && a.Reason == string(workloads.ReasonServerUnknown) {
			n++
		}
	}
	return n
}

func (w *Workload) Summary(ops []histories.Op) workloads.Final {
	f := Final{Before: w.before}
	open := map[int]string{}
	wrote := map[int64]int64{}
	var withValue int64
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		if op.Type == histories.Invoke {
			open[op.Process] = op.F
			continue
		}
		fn := open[op.Process]
		delete(open, op.Process)
		if fn == "increment" {
			f.EvidenceServerUnknown += serverUnknown(op.Failed)
		}
		switch {
		case fn == "increment" && op.Type == histories.OK:
			f.Acknowledged++
			var o Outcome
			if json.Unmarshal(op.Value, &o) == nil {
				wrote[o.Wrote]++
				withValue++
				if o.Replayed {
					f.Replayed++
				}
			}
		case fn == "increment" && op.Type == histories.Fail:
			f.Failed++
		case fn == "increment" && op.Type == histories.Info:
			f.Unknown++
		case fn == "read" && op.Type == histories.OK:
			var r ReadValue
			if json.Unmarshal(op.Value, &r) == nil {
				v := r.Value
				f.After = &v
			}
		}
	}
	for _, fn := range open {
		if fn == "increment" {
			f.Unknown++
		}
	}
	f.SameValueWrites = withValue - int64(len(wrote))
	if w.restarts != nil && w.after != nil {
		f.ServerRestarts = map[string]int64{}
		for k, v := range w.after {
			f.ServerRestarts[k] = v - w.restarts[k]
		}
	}
	f.ServerRestartsError = w.restartErr
	return f
}

var _ workloads.Final = Final{}

// Figures shows the acknowledged increments, the counter after the run and the
// reconciliation.
func (f Final) Figures() workloads.Figures {
	return workloads.Figures{Applied: &f.Acknowledged, Value: f.After, Reconciliation: &workloads.Reconciliation{
		Before: f.Before, After: f.After, Acknowledged: f.Acknowledged, Lost: f.Lost, Extra: f.Extra, Cause: f.Cause,
		ServerRestarts: f.ServerRestarts, ServerRestartsError: f.ServerRestartsError,
	}}
}
