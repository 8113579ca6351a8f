package checker

import (
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// budgetInput is the input of a budget operation in porcupine.
type budgetInput struct {
	read bool
}

// budgetOutput is the output of a budget operation in porcupine: kind is
// budgetApplied, budgetRejected, budgetUnknown or budgetRead (with balance).
type budgetOutput struct {
	kind    budgetKind
	balance int64
}

// budgetModel returns the budget object as a porcupine model, for operations made by
// budgetOperations: one account starting at budget; a decrement is applied iff the
// balance is positive and takes 1, is rejected iff it is 0; a read returns it; an
// unknown decrement took 1 (if it could) or had no effect. It decides the same
// histories as CheckBudget, by search.
func budgetModel(budget int64) porcupine.Model {
	return intervalModel(budget, "balance", func(s interval, input, output any) (bool, any) {
		return budgetStep(s, input.(budgetInput), output.(budgetOutput))
	}, func(input, output any) string {
		in, out := input.(budgetInput), output.(budgetOutput)
		if in.read {
			return fmt.Sprintf("read() -> %d", out.balance)
		}
		switch out.kind {
		case budgetApplied:
			return "decrement() -> applied"
		case budgetRejected:
			return "decrement() -> rejected"
		}
		return "decrement() -> unknown"
	})
}

func budgetStep(s interval, in budgetInput, out budgetOutput) (bool, any) {
	if in.read {
		if out.balance < s.lo || out.balance > s.hi {
			return false, s
		}
		return true, interval{out.balance, out.balance}
	}
	switch out.kind {
	case budgetApplied:
		// Only the positive balances can take 1.
		if s.hi == 0 {
			return false, s
		}
		return true, interval{max(s.lo, 1) - 1, s.hi - 1}
	case budgetRejected:
		if s.lo != 0 {
			return false, s
		}
		return true, interval{0, 0}
	case budgetUnknown:
		return true, interval{max(s.lo-1, 0), s.hi}
	}
	return false, s
}

// budgetOperations converts a budget history to porcupine operations for budgetModel,
// timed by event position so that real-time order is the history's order. Failed
// decrements and reads that observed nothing are left out; an unknown decrement (info,
// or never completed) returns after every other event. It errs like CheckBudget on a
// history that is not a budget history. Metadata holds the history indices of the
// operation's events ([]int64).
func budgetOperations(ops []histories.Op) ([]porcupine.Operation, error) {
	var p budgetPairer
	var done []*budgetOp
	for _, op := range ops {
		o, complete, err := p.add(op)
		if err != nil {
			return nil, err
		}
		if complete {
			done = append(done, o)
		}
	}
	done = append(done, p.close()...)
	end := p.pos
	clients := clientIDs{}
	var out []porcupine.Operation
	for _, o := range done {
		ret := o.ret
		var res budgetOutput
		switch o.kind {
		case budgetFailed, budgetNoRead:
			continue
		case budgetUnknown:
			ret = end
			res.kind = budgetUnknown
		default:
			res = budgetOutput{kind: o.kind, balance: o.balance}
		}
		out = append(out, porcupine.Operation{
			ClientId: clients.of(o.process),
			Input:    budgetInput{read: o.read},
			Call:     o.inv,
			Output:   res,
			Return:   ret,
			Metadata: o.events(),
		})
	}
	return out, nil
}
