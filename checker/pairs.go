package checker

import (
	"fmt"

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

// pairOps pairs the client events of ops into operations by process, in invocation
// order. fs lists the functions the model knows; any other is an error that names the
// event, as are a completion without an invocation and an invocation on a busy process.
func pairOps(model string, ops []histories.Op, fs ...string) ([]*pairedOp, error) {
	known := map[string]bool{}
	for _, f := range fs {
		known[f] = true
	}
	open := map[int]*pairedOp{}
	var all []*pairedOp
	pos := 0
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		p := pos
		pos++
		if op.Type == histories.Invoke {
			if prev, busy := open[op.Process]; busy {
				return nil, fmt.Errorf("history index %d: process %d invokes while its operation invoked at index %d is open", op.Index, op.Process, prev.inv.Index)
			}
			if !known[op.F] {
				return nil, fmt.Errorf("history index %d: %s history has unknown function %q (want one of %v)", op.Index, model, op.F, fs)
			}
			o := &pairedOp{inv: op, invPos: p, retPos: -1, outcome: histories.Info, endIndex: op.Index}
			open[op.Process] = o
			all = append(all, o)
			continue
		}
		o, ok := open[op.Process]
		if !ok {
			return nil, fmt.Errorf("history index %d: %s completion of process %d without an open invocation", op.Index, op.Type, op.Process)
		}
		if op.F != "" && op.F != o.inv.F {
			return nil, fmt.Errorf("history index %d: completion %q of process %d does not match its invocation %q at index %d", op.Index, op.F, op.Process, o.inv.F, o.inv.Index)
		}
		switch op.Type {
		case histories.OK, histories.Fail, histories.Info:
		default:
			return nil, fmt.Errorf("history index %d: event type %s is not a completion", op.Index, op.Type)
		}
		c := op
		o.ret, o.retPos, o.outcome, o.endIndex = &c, p, op.Type, op.Index
		delete(open, op.Process)
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
