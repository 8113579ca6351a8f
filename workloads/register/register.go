package register

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// Defaults: a small key space keeps each key's history short enough for the
// linearizability search, and small values make compare-and-set succeed often.
const (
	DefaultKeys   = 8
	DefaultValues = 5
)

// Workload is the cas-register workload over Keys independent registers. Each worker
// reads (half of its operations), writes or compare-and-sets a random key; values are
// drawn from 0..Values-1. Every register starts absent.
//
// History values: write's invocation holds the integer written; cas's [from, to]; an
// ok read holds the integer read or null for an absent register. A cas that found
// another value is a fail without error.
type Workload struct {
	Store  Store
	Keys   int
	Values int
}

var _ workloads.Workload = (*Workload)(nil)

// New returns the workload on store with the default key space.
func New(store Store) *Workload {
	return &Workload{Store: store, Keys: DefaultKeys, Values: DefaultValues}
}

// Name is workloads.Register.
func (w *Workload) Name() workloads.Name { return workloads.Register }

// Model is the checker's cas-register model.
func (w *Workload) Model() string { return "cas-register" }

// Mechanism is the store's own description when it offers one (RegisterMechanism),
// else a generic one.
func (w *Workload) Mechanism() string {
	if m, ok := w.Store.(interface{ RegisterMechanism() string }); ok {
		return m.RegisterMechanism()
	}
	return "read, write, compare-and-set"
}

// Params records the key space; registers start absent (initial null).
func (w *Workload) Params() map[string]json.RawMessage {
	return map[string]json.RawMessage{
		"keys":    histories.Value(w.Keys),
		"values":  histories.Value(w.Values),
		"initial": json.RawMessage("null"),
	}
}

// Setup removes every register.
func (w *Workload) Setup(ctx context.Context) error { return w.Store.Reset(ctx) }

// Worker opens a session.
func (w *Workload) Worker(ctx context.Context, id int) (workloads.Worker, error) {
	s, err := w.Store.Session(ctx)
	if err != nil {
		return nil, err
	}
	return &worker{Session: s, w: w}, nil
}

// Final reads every key once more, so the history ends with the state it left.
func (w *Workload) Final(ctx context.Context) ([]workloads.Call, []workloads.Reply, error) {
	s, err := w.Store.Session(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var calls []workloads.Call
	var replies []workloads.Reply
	for k := 0; k < w.Keys; k++ {
		key := keyName(k)
		v, found, err := s.Read(ctx, key)
		if err != nil {
			return nil, nil, fmt.Errorf("final read of %s: %w", key, err)
		}
		calls = append(calls, workloads.Call{F: "read", Key: key})
		replies = append(replies, workloads.Reply{Value: readValue(v, found)})
	}
	return calls, replies, nil
}

// Final is the `final` section of results.json for the register workload.
type Final struct {
	Keys       int            `json:"keys"`
	Reads      int64          `json:"reads"`
	Writes     int64          `json:"writes"`
	CASOK      int64          `json:"cas_ok"`
	CASFailed  int64          `json:"cas_failed"`
	Unknown    int64          `json:"unknown"`
	FinalState map[string]any `json:"final_state"`
}

// Summary counts operations by kind and takes the final reads.
func (w *Workload) Summary(ops []histories.Op) workloads.Final {
	f := Final{Keys: w.Keys, FinalState: map[string]any{}}
	for _, op := range ops {
		if !op.IsClient() || op.Type == histories.Invoke {
			continue
		}
		switch {
		case op.Type == histories.Info:
			f.Unknown++
		case op.F == "read" && op.Type == histories.OK:
			f.Reads++
			var v any
			json.Unmarshal(op.Value, &v)
			f.FinalState[op.Key] = v // the last read of a key wins: the final reads come last
		case op.F == "write" && op.Type == histories.OK:
			f.Writes++
		case op.F == "cas" && op.Type == histories.OK:
			f.CASOK++
		case op.F == "cas" && op.Type == histories.Fail:
			f.CASFailed++
		}
	}
	return f
}

var _ workloads.Final = Final{}

// Figures is empty: the register has no column of the stand's table.
func (f Final) Figures() workloads.Figures { return workloads.Figures{} }

func keyName(k int) string { return fmt.Sprintf("k%d", k) }

func readValue(v int64, found bool) any {
	if !found {
		return json.RawMessage("null")
	}
	return v
}

type worker struct {
	Session
	w *Workload
}

func (wk *worker) Next(rng *rand.Rand) workloads.Call {
	key := keyName(rng.IntN(wk.w.Keys))
	switch r := rng.IntN(4); {
	case r < 2:
		return workloads.Call{F: "read", Key: key}
	case r == 2:
		return workloads.Call{F: "write", Key: key, Value: rng.Int64N(int64(wk.w.Values))}
	default:
		return workloads.Call{F: "cas", Key: key, Value: []int64{rng.Int64N(int64(wk.w.Values)), rng.Int64N(int64(wk.w.Values))}}
	}
}

func (wk *worker) Do(ctx context.Context, call workloads.Call, req workloads.Request) (workloads.Reply, error) {
	switch call.F {
	case "read":
		v, found, err := wk.Read(ctx, call.Key)
		if err != nil {
			return workloads.Reply{}, err
		}
		return workloads.Reply{Value: readValue(v, found)}, nil
	case "write":
		v, _ := call.Value.(int64)
		return workloads.Reply{}, wk.Write(ctx, req, call.Key, v)
	case "cas":
		ft, _ := call.Value.([]int64)
		if len(ft) != 2 {
			return workloads.Reply{}, fmt.Errorf("register: cas needs [from, to]")
		}
		ok, err := wk.CAS(ctx, req, call.Key, ft[0], ft[1])
		if err != nil {
			return workloads.Reply{}, err
		}
		return workloads.Reply{Failed: !ok}, nil
	}
	return workloads.Reply{}, fmt.Errorf("register: unknown operation %q", call.F)
}
