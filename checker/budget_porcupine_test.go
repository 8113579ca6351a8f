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

// budgetState is the set of balances the account may have, as an interval: the model
// is the nondeterministic budget object (an unknown decrement took 1 or did nothing)
// turned deterministic by tracking every state it may be in. From one balance, every
// step keeps that set an interval, so two numbers hold it.
type budgetState struct {
	lo, hi int64
}

// budgetModel returns the budget object as a porcupine model, for operations made by
// budgetOperations: one account starting at budget; a decrement is applied iff the
// balance is positive and takes 1, is rejected iff it is 0; a read returns it; an
// unknown decrement took 1 (if it could) or had no effect. It decides the same
// histories as CheckBudget, by search.
func budgetModel(budget int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return budgetState{budget, budget} },
		Step: func(state, input, output any) (bool, any) {
			return budgetStep(state.(budgetState), input.(budgetInput), output.(budgetOutput))
		},
		Hash: func(state any) uint64 {
			s := state.(budgetState)
			return uint64(s.lo)*0x9e3779b97f4a7c15 ^ uint64(s.hi)
		},
		DescribeOperation: func(input, output any) string {
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
		},
		DescribeState: func(state any) string {
			s := state.(budgetState)
			if s.lo == s.hi {
				return fmt.Sprintf("balance %d", s.lo)
			}
			return fmt.Sprintf("balance %d..%d", s.lo, s.hi)
		},
	}
}

func budgetStep(s budgetState, in budgetInput, out budgetOutput) (bool, any) {
	if in.read {
		if out.balance < s.lo || out.balance > s.hi {
			return false, s
		}
		return true, budgetState{out.balance, out.balance}
	}
	switch out.kind {
	case budgetApplied:
		// Only the positive balances can take 1.
		if s.hi == 0 {
			return false, s
		}
		return true, budgetState{max(s.lo, 1) - 1, s.hi - 1}
	case budgetRejected:
		if s.lo != 0 {
			return false, s
		}
		return true, budgetState{0, 0}
	case budgetUnknown:
		return true, budgetState{max(s.lo-1, 0), s.hi}
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
	clients := make(map[int]int)
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
		id, ok := clients[o.process]
		if !ok {
			id = len(clients)
			clients[o.process] = id
		}
		out = append(out, porcupine.Operation{
			ClientId: id,
			Input:    budgetInput{read: o.read},
			Call:     o.inv,
			Output:   res,
			Return:   ret,
			Metadata: budgetEvents(o),
		})
	}
	return out, nil
}
