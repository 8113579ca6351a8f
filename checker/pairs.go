package checker

import (
	"fmt"
	"slices"

	"github.com/indoubt/indoubt/histories"
)

// pairedOp is one operation of a history whose checker needs no real-time order beyond
// "did it complete before that read began": its invocation and its completion (nil while
// open), with their positions among the client events.
type pairedOp struct {
	inv      histories.Op
	ret      *histories.Op
	invPos   int
	retPos   int // -1 while open
	outcome  histories.Type
	endIndex int64 // history index of the completion, or of the invocation when open
}

// open reports whether the operation never completed (the run ended first): its outcome
// is as unknown as an info's.
func (p *pairedOp) open() bool { return p.ret == nil }

// events returns the history indices of the operation's events.
func (p *pairedOp) events() []int64 {
	if p.ret == nil {
		return []int64{p.inv.Index}
	}
	return []int64{p.inv.Index, p.ret.Index}
}

// pairOps pairs the client events of ops into operations (histories.Pairer), in
// invocation order, with their positions among the client events. fs lists the
// functions the model knows; any other is an error that names the event, as are the
// events Pairer refuses.
func pairOps(model string, ops []histories.Op, fs ...string) ([]*pairedOp, error) {
	var p histories.Pairer[*pairedOp]
	var all []*pairedOp
	pos := 0
	for i := range ops {
		op := &ops[i]
		if !op.IsClient() {
			continue
		}
		at := pos
		pos++
		if op.Type == histories.Invoke {
			if !slices.Contains(fs, op.F) {
				return nil, fmt.Errorf("history index %d: %s history has unknown function %q (want one of %v)", op.Index, model, op.F, fs)
			}
			o := &pairedOp{inv: *op, invPos: at, retPos: -1, outcome: histories.Info, endIndex: op.Index}
			if err := p.Invoke(*op, o); err != nil {
				return nil, err
			}
			all = append(all, o)
			continue
		}
		o, err := p.Complete(*op)
		if err != nil {
			return nil, err
		}
		o.ret, o.retPos, o.outcome, o.endIndex = op, at, op.Type, op.Index
	}
	return all, nil
}

// finalReads returns the ok reads among all that began after every other operation had
// completed (or, for one never completed, had been invoked): the reads that see the
// final state. An operation left open is as unknown as an info one.
func finalReads(all []*pairedOp, read string) []*pairedOp {
	lastEnd := -1
	for _, o := range all {
		if o.inv.F == read {
			continue
		}
		lastEnd = max(lastEnd, o.invPos, o.retPos)
	}
	var out []*pairedOp
	for _, o := range all {
		if o.inv.F == read && o.outcome == histories.OK && o.invPos > lastEnd {
			out = append(out, o)
		}
	}
	return out
}
