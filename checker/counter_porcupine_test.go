package checker

import (
	"fmt"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// counterInput is the input of a counter operation in porcupine.
type counterInput struct {
	read bool
}

// counterOutput is the output of a counter operation in porcupine: an acknowledged
// increment's written value (and read value, if it says), a read's value, or unknown.
type counterOutput struct {
	unknown bool
	value   int64
	readVal *int64
}

// counterModel returns the counter as a porcupine model, for operations made by
// counterOperations: a counter starting at before; an acknowledged increment that wrote
// w needs the counter at w - 1 (and, if it reports what it read, to have read w - 1) and
// leaves it at w; a read returns it; an unknown increment added 1 or did nothing. It
// decides the same histories as CheckCounter, by search.
func counterModel(before int64) porcupine.Model {
	return intervalModel(before, "counter", func(s interval, input, output any) (bool, any) {
		return counterStep(s, input.(counterInput), output.(counterOutput))
	}, func(input, output any) string {
		in, out := input.(counterInput), output.(counterOutput)
		switch {
		case in.read:
			return fmt.Sprintf("read() -> %d", out.value)
		case out.unknown:
			return "increment() -> unknown"
		case out.readVal != nil:
			return fmt.Sprintf("increment() -> read %d, wrote %d", *out.readVal, out.value)
		}
		return fmt.Sprintf("increment() -> wrote %d", out.value)
	})
}

func counterStep(s interval, in counterInput, out counterOutput) (bool, any) {
	switch {
	case in.read:
		if out.value < s.lo || out.value > s.hi {
			return false, s
		}
		return true, interval{out.value, out.value}
	case out.unknown:
		return true, interval{s.lo, s.hi + 1}
	}
	if out.readVal != nil && *out.readVal != out.value-1 {
		return false, s
	}
	if out.value-1 < s.lo || out.value-1 > s.hi {
		return false, s
	}
	return true, interval{out.value, out.value}
}

// counterOperations converts a counter history to porcupine operations for
// counterModel, timed by event position so that real-time order is the history's order.
// Failed increments and reads that observed nothing are left out; an unknown increment
// (info, or never completed) returns after every other event. It errs like CheckCounter
// on a history that is not a counter history. Metadata holds the history indices of the
// operation's events ([]int64).
func counterOperations(ops []histories.Op) ([]porcupine.Operation, error) {
	all, end, err := counterOps(ops)
	if err != nil {
		return nil, err
	}
	clients := clientIDs{}
	var out []porcupine.Operation
	for i := range all.len() {
		o := all.at(i)
		ret := o.ret
		var res counterOutput
		switch o.kind {
		case counterFailed, counterNoRead:
			continue
		case counterUnknown:
			ret = end
			res.unknown = true
		default:
			res = counterOutput{value: o.value}
			if o.hasReadVal {
				res.readVal = &o.readVal
			}
		}
		out = append(out, porcupine.Operation{
			ClientId: clients.of(o.process), Input: counterInput{read: o.read}, Call: o.inv, Output: res, Return: ret, Metadata: o.events(),
		})
	}
	return out, nil
}
