package histories

import (
	"cmp"
	"fmt"
	"slices"
)

// Operation is one operation of a history: its invocation and its completion, as
// porcupine's call and return. Complete is nil for an operation the history never
// completed, which is as unknown as one that ended in info.
type Operation struct {
	Invoke   Op
	Complete *Op
}

// Type is how the operation ended: ok, fail or info, and Info when it never completed.
func (o Operation) Type() Type {
	if o.Complete == nil {
		return Info
	}
	return o.Complete.Type
}

// Value is the completion's value; nil when the operation never completed.
func (o Operation) Value() []byte {
	if o.Complete == nil {
		return nil
	}
	return o.Complete.Value
}

// End is the time of the completion, and for an operation never completed the largest
// time there is: it may take effect at any point after its invocation.
func (o Operation) End() int64 {
	if o.Complete == nil {
		return 1<<63 - 1
	}
	return o.Complete.Time
}

// Pairer pairs the invocations of a history with their completions as the events
// arrive, by Jepsen's rule: a process has at most one operation open, and the next
// completion of that process completes it. Each open operation carries a value of the
// caller's (T: a checker's record of it), handed back when it completes, so that a
// checker reading millions of events keeps nothing else per operation. The zero value
// is ready to use; a Pairer is not safe for concurrent use.
//
// Invoke and Complete return an error, naming the event's index, for what no history
// can hold: an invocation by a process whose operation is still open, a completion with
// no open invocation, a completion that is not ok, fail or info, and a completion that
// names another function or key than its invocation (an empty f or key in the
// completion means its invocation's, as in Jepsen's histories).
type Pairer[T any] struct {
	open map[int]pending[T]
}

type pending[T any] struct {
	f, key string
	index  int64
	v      T
}

// Invoke opens the operation inv invokes, keeping v with it.
func (p *Pairer[T]) Invoke(inv Op, v T) error {
	if p.open == nil {
		p.open = make(map[int]pending[T])
	}
	if prev, busy := p.open[inv.Process]; busy {
		return fmt.Errorf("history index %d: process %d invokes while its operation invoked at index %d is open", inv.Index, inv.Process, prev.index)
	}
	p.open[inv.Process] = pending[T]{f: inv.F, key: inv.Key, index: inv.Index, v: v}
	return nil
}

// Complete closes the operation of comp's process and returns the value its
// invocation kept.
func (p *Pairer[T]) Complete(comp Op) (T, error) {
	o, ok := p.open[comp.Process]
	var zero T
	switch {
	case !ok:
		return zero, fmt.Errorf("history index %d: %s completion of process %d without an open invocation", comp.Index, comp.Type, comp.Process)
	case comp.Type < OK || comp.Type > Info:
		return zero, fmt.Errorf("history index %d: event type %s is not a completion", comp.Index, comp.Type)
	case comp.F != "" && comp.F != o.f:
		return zero, fmt.Errorf("history index %d: completion %q of process %d does not match its invocation %q at index %d", comp.Index, comp.F, comp.Process, o.f, o.index)
	case comp.Key != "" && comp.Key != o.key:
		return zero, fmt.Errorf("history index %d: completion of key %q by process %d does not match its invocation's key %q at index %d", comp.Index, comp.Key, comp.Process, o.key, o.index)
	}
	delete(p.open, comp.Process)
	return o.v, nil
}

// Add is Invoke or Complete, as op's type says; a nemesis event is skipped (done and
// err both zero). For a completion, done is true and v is the invocation's value.
func (p *Pairer[T]) Add(op Op, onInvoke T) (v T, done bool, err error) {
	switch {
	case !op.IsClient():
		return v, false, nil
	case op.Type == Invoke:
		return v, false, p.Invoke(op, onInvoke)
	}
	v, err = p.Complete(op)
	return v, err == nil, err
}

// Open returns the values of the operations still open, in invocation order, and
// forgets them: at the end of a history they never completed.
func (p *Pairer[T]) Open() []T {
	left := make([]pending[T], 0, len(p.open))
	for _, o := range p.open {
		left = append(left, o)
	}
	slices.SortFunc(left, func(a, b pending[T]) int { return cmp.Compare(a.index, b.index) })
	out := make([]T, len(left))
	for i, o := range left {
		out[i] = o.v
	}
	p.open = nil
	return out
}

// Pair pairs the client events of a history (nemesis events are skipped) into its
// operations, in invocation order, under Pairer's rule and with its errors. An
// operation that never completed has a nil Complete; the others' Complete points into
// ops.
func Pair(ops []Op) ([]Operation, error) {
	var p Pairer[int]
	var out []Operation
	for i := range ops {
		op := &ops[i]
		if !op.IsClient() {
			continue
		}
		if op.Type == Invoke {
			if err := p.Invoke(*op, len(out)); err != nil {
				return nil, err
			}
			out = append(out, Operation{Invoke: *op})
			continue
		}
		at, err := p.Complete(*op)
		if err != nil {
			return nil, err
		}
		out[at].Complete = op
	}
	return out, nil
}
