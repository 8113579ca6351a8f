// Package txn holds the transactional workloads, list-append and rw-register: every
// operation is one transaction of several micro-ops over a small, rotating key space,
// checked for isolation by the Elle-class checkers (checker.CheckListAppend,
// checker.CheckRWRegister) from what its reads returned.
//
// list-append transactions append values to lists and read whole lists; since a read
// returns every value appended before it, reads give each key's version order, and the
// checker infers write-write, write-read and read-write dependencies exactly.
// rw-register transactions write and read single values, and the checker infers what
// it can, with the assumptions the store says hold (Guarantee).
//
// History values (package histories, "Values"): every operation has f "txn"; its
// invocation holds the transaction with its reads null, its ok completion the same
// transaction with each read's result:
//
//	invoke  [["append",3,17],["r",4,null],["r",3,null]]
//	ok      [["append",3,17],["r",4,[2,9]],["r",3,[5,17]]]
//
// Every value appended or written is unique across the run. A transaction whose commit
// was lost in doubt completes as info (it may have committed or not; later reads
// decide); one that certainly did not commit as fail. After the workers stop, the final
// reads read every key the run touched, in read-only transactions of a process of
// their own. The header's params hold the generator's options and what the history is
// checked for: "consistency_models" (the store's promise unless the run named others)
// and, for rw-register, the assumptions the store's guarantee supports.
package txn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// FTxn is the function of every operation of the transactional workloads.
const FTxn = "txn"

// finalChunk is how many keys one final read transaction reads.
const finalChunk = 32

// Workload is list-append or rw-register bound to a store for one run. It is safe for
// the runner's concurrent workers once New returned it.
type Workload struct {
	name   workloads.Name
	store  Store
	opt    Options
	guar   Guarantee
	models []string
	gen    *gen
	// readsOn names where read-only transactions run when not on the primary
	// ("standby"), for the final state.
	readsOn string
}

var _ workloads.Workload = (*Workload)(nil)

// New returns workload name (workloads.ListAppend or workloads.RWRegister) on store
// with opt. It errs on another name or an option out of range (*OptionError).
func New(name workloads.Name, store Store, opt Options) (*Workload, error) {
	if name != workloads.ListAppend && name != workloads.RWRegister {
		return nil, fmt.Errorf("txn: %q is not a transactional workload (want list-append or rw-register)", name)
	}
	o, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	g := store.Guarantee()
	models := o.ConsistencyModels
	if len(models) == 0 {
		models = g.Models
	}
	return &Workload{name: name, store: store, opt: o, guar: g, models: models, gen: newGen(o, g.SingleKey)}, nil
}

// ShareGenerator makes w draw its transactions from other's generator: the same key
// space and the same values. The workloads of the clients beside each node of a
// topology share the run's, so that every value stays unique across all of them (the
// checker needs appended values unique per key). Call it before the run.
func (w *Workload) ShareGenerator(other *Workload) { w.gen = other.gen }

// ReadsOn records where the store runs read-only transactions when that is not the
// primary ("standby"); the final state says so. Call it before the run.
func (w *Workload) ReadsOn(where string) { w.readsOn = where }

// Name is workloads.ListAppend or workloads.RWRegister.
func (w *Workload) Name() workloads.Name { return w.name }

// Model is the checker model of the same name.
func (w *Workload) Model() string { return string(w.name) }

// Mechanism is how the store runs a transaction.
func (w *Workload) Mechanism() string { return w.guar.Mechanism }

// Guarantee is the store's.
func (w *Workload) Guarantee() Guarantee { return w.guar }

// Options are the generator's options with their defaults filled in.
func (w *Workload) Options() Options { return w.opt }

// ConsistencyModels are the models the history is checked for.
func (w *Workload) ConsistencyModels() []string { return w.models }

// Params records the generator's options, the models to check for and, for
// rw-register, the assumptions the store supports.
func (w *Workload) Params() map[string]json.RawMessage {
	p := map[string]json.RawMessage{
		"keys":               histories.Value(w.opt.Keys),
		"max_ops":            histories.Value(w.opt.MaxOps),
		"read_fraction":      histories.Value(w.opt.ReadFraction),
		"distribution":       histories.Value(w.opt.Distribution),
		"pattern":            histories.Value(w.opt.Pattern),
		"max_writes_per_key": histories.Value(w.opt.MaxWritesPerKey),
		"consistency_models": histories.Value(w.models),
		"single_key":         histories.Value(w.guar.SingleKey),
	}
	if w.name == workloads.RWRegister {
		p["linearizable_keys"] = histories.Value(w.guar.LinearizableKeys)
		p["sequential_keys"] = histories.Value(w.guar.SequentialKeys)
		p["wfr_keys"] = histories.Value(w.guar.WFRKeys)
	}
	return p
}

// Setup empties every key.
func (w *Workload) Setup(ctx context.Context) error { return w.store.Reset(ctx) }

// Worker opens a session.
func (w *Workload) Worker(ctx context.Context, id int) (workloads.Worker, error) {
	s, err := w.store.Session(ctx)
	if err != nil {
		return nil, err
	}
	return &worker{Session: s, w: w}, nil
}

// writeFunc is the model's write: append or w.
func (w *Workload) writeFunc() Func {
	if w.name == workloads.RWRegister {
		return Write
	}
	return Append
}

// Final reads every key the run touched, finalChunk keys a transaction, on the primary.
func (w *Workload) Final(ctx context.Context) ([]workloads.Call, []workloads.Reply, error) {
	open := w.store.Session
	if p, ok := w.store.(PrimaryStore); ok {
		open = p.PrimarySession
	}
	s, err := open(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var calls []workloads.Call
	var replies []workloads.Reply
	n := w.gen.keysUsed()
	for lo := int64(0); lo < n; lo += finalChunk {
		var t Txn
		for k := lo; k < min(n, lo+finalChunk); k++ {
			t = append(t, Mop{F: Read, Key: k})
		}
		if w.guar.SingleKey {
			// One key a transaction: the store is atomic per key only.
			for _, m := range t {
				c, r, err := w.finalRead(ctx, s, Txn{m})
				if err != nil {
					return nil, nil, err
				}
				calls, replies = append(calls, c), append(replies, r)
			}
			continue
		}
		c, r, err := w.finalRead(ctx, s, t)
		if err != nil {
			return nil, nil, err
		}
		calls, replies = append(calls, c), append(replies, r)
	}
	return calls, replies, nil
}

// finalRead runs one final read transaction, trying a conflict again a few times: a
// final read has nothing to conflict with but the server's own bookkeeping.
func (w *Workload) finalRead(ctx context.Context, s Session, t Txn) (workloads.Call, workloads.Reply, error) {
	var err error
	for range 5 {
		var done Txn
		done, _, err = s.Txn(ctx, workloads.Request{}, t.Clone())
		if err == nil {
			return workloads.Call{F: FTxn, Value: t}, workloads.Reply{Value: done}, nil
		}
		if workloads.Classify(err) != workloads.ClassConflict {
			break
		}
	}
	return workloads.Call{}, workloads.Reply{}, fmt.Errorf("final read of keys %d to %d: %w", t[0].Key, t[len(t)-1].Key, err)
}

type worker struct {
	Session
	w    *Workload
	pick *picker
}

func (wk *worker) Next(rng *rand.Rand) workloads.Call {
	if wk.pick == nil || wk.pick.rng != rng {
		wk.pick = wk.w.gen.picker(rng)
	}
	return workloads.Call{F: FTxn, Value: wk.w.gen.txn(wk.pick, wk.w.writeFunc())}
}

func (wk *worker) Do(ctx context.Context, call workloads.Call, req workloads.Request) (workloads.Reply, error) {
	t, ok := call.Value.(Txn)
	if !ok {
		return workloads.Reply{}, fmt.Errorf("txn: operation value is %T, want txn.Txn", call.Value)
	}
	if req.Idempotent {
		// A transaction of reads and blind writes has no op id to record with its
		// effect: nothing is sent.
		return workloads.Reply{}, workloads.Definite(errors.New("txn: the transactional workloads have no idempotent path"), "no-idempotent")
	}
	done, conflicts, err := wk.Txn(ctx, req, t.Clone())
	if err != nil {
		return workloads.Reply{Conflicts: conflicts}, err
	}
	return workloads.Reply{Value: done, Conflicts: conflicts}, nil
}

// Final is the `final` section of results.json for the transactional workloads: the
// transactions by outcome, apart from the final reads.
type Final struct {
	Model string `json:"model"`
	// Committed, Failed and Unknown count the workers' transactions by completion.
	Committed int64 `json:"committed"`
	Failed    int64 `json:"failed"`
	Unknown   int64 `json:"unknown"`
	// ReadOnly counts the committed transactions that only read, and ReadsOn names
	// where they ran when that was not the primary ("standby").
	ReadOnly int64  `json:"read_only"`
	ReadsOn  string `json:"reads_on,omitempty"`
	// MicroOps counts the micro-ops of the committed transactions; Keys the keys the
	// final reads read.
	MicroOps int64 `json:"micro_ops"`
	Keys     int64 `json:"keys"`
	// Models are the consistency models the history was checked for.
	Models []string `json:"consistency_models"`
}

var _ workloads.Final = Final{}

// Summary counts the transactions by outcome.
func (w *Workload) Summary(ops []histories.Op) workloads.Final {
	f := Final{Model: string(w.name), ReadsOn: w.readsOn, Models: w.models}
	for _, op := range ops {
		if !op.IsClient() || op.Type == histories.Invoke {
			continue
		}
		if histories.IsFinalReadID(op.OpID) {
			var t Txn
			if op.Type == histories.OK && json.Unmarshal(op.Value, &t) == nil {
				f.Keys += int64(len(t))
			}
			continue
		}
		switch op.Type {
		case histories.OK:
			f.Committed++
			var t Txn
			if json.Unmarshal(op.Value, &t) == nil {
				f.MicroOps += int64(len(t))
				if t.ReadOnly() {
					f.ReadOnly++
				}
			}
		case histories.Fail:
			f.Failed++
		case histories.Info:
			f.Unknown++
		}
	}
	return f
}

// Figures shows the committed transactions as applied.
func (f Final) Figures() workloads.Figures {
	c := f.Committed
	return workloads.Figures{Applied: &c}
}
