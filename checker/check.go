package checker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// Options tune Check. The zero value checks with the model and parameters the history's
// header names, without a time limit.
type Options struct {
	// Model overrides the header's model: budget, register, cas-register, counter,
	// exactly-once, bank, transfer, models (one of Models).
	Model string
	// Budget overrides the header's params.budget (budget model).
	Budget *int64
	// Initial overrides the header's params.initial (register models; nil = absent), and
	// for the counter model its params.before, the value before the run.
	Initial *int64
	// FailMeans is what a failed cas means to the register models (see FailMeaning);
	// empty means FailCompareFailed, the reading of indoubt's own histories.
	FailMeans FailMeaning
	// Timeout bounds a search checker; when it runs out the verdict is Unknown.
	Timeout time.Duration
	// MaxMemory bounds the live heap of the process while a search checker runs, in
	// bytes (0: no bound); when the heap reaches three quarters of it the search stops and
	// the verdict is Unknown, its summary saying the memory bound ran out. The heap is
	// as the garbage collector last measured it: a caller that wants the process's
	// memory to stay near the bound also sets runtime/debug.SetMemoryLimit to it.
	MaxMemory int64
	// VisualizePath, when set, receives porcupine's HTML visualization (register models).
	VisualizePath string
	// Txn configures the transactional models, list-append and rw-register: the
	// consistency models to check for and what may be assumed. Its Timeout defaults to
	// Timeout above.
	Txn TxnOptions
	// Final, when set, is the final state of a history that has no final read, as the
	// value of the model's ok read (budget {"balance":n}, counter {"value":n},
	// exactly-once an ExactlyOnceState, bank Balances or, with a log, BankLog; models an
	// object of part name to that part's). Check appends it as a read that begins after
	// every event of the history.
	Final json.RawMessage

	// bounds are the bounds of a check CheckStream began, which the search inherits.
	bounds *searchBounds
}

// checkEvery is how many events the exact checkers handle between looks at their
// context: often enough to stop within moments, rarely enough to cost nothing.
const checkEvery = 4096

// Models lists the models Check knows.
var Models = []string{"budget", RegisterModel, CASRegisterModel, "counter", ExactlyOnceModel, BankModel, TransferModel, ListAppendModel, RWRegisterModel, BudgetsModel, ExactlyOnceResponseModel, ModelsModel}

// Check chooses the checker for the history's model and runs it. The error means the
// history cannot be checked (no model, missing parameters, not a history of that model);
// an invalid history is a Result. When ctx ends first (SIGINT, a caller's deadline) the
// check stops within moments and the Result is Unknown, its Summary saying it was
// interrupted. It is CheckStream over ops: one path checks a history in memory and a
// history read one event at a time.
func Check(ctx context.Context, h *histories.Header, ops []histories.Op, opt Options) (Result, error) {
	i := 0
	next := func() (histories.Op, error) {
		if i == len(ops) {
			return histories.Op{}, io.EOF
		}
		i++
		return ops[i-1], nil
	}
	return check(ctx, h, next, ops, opt)
}

// modelOf is the model a check holds the history to: Options.Model, else the header's.
func modelOf(h *histories.Header, opt Options) string {
	if opt.Model == "" && h != nil {
		return h.Model
	}
	return opt.Model
}

// check is the one entry point behind Check, CheckStream and CheckReader. It chooses the
// model's checker and feeds it the events of next (all holds them already when the
// caller has them in memory, else nil); with Options.Final, the final read follows the
// last event (withFinal). The counting models (budget, counter) and the transactional
// ones take the events as they come; the others read the whole history first (a
// register's search within its bounds). Every model's result then gets what every
// check applies after its checker (finish): the acknowledged writes the process faults
// lost, and the rule that a check of nothing is unknown.
func check(ctx context.Context, h *histories.Header, next func() (histories.Op, error), all []histories.Op, opt Options) (Result, error) {
	model := modelOf(h, opt)
	switch model {
	case RegisterModel, CASRegisterModel, ListAppendModel, RWRegisterModel:
		if opt.Final != nil {
			return Result{}, fmt.Errorf("a final state applies to the budget, counter, exactly-once and bank models, not %s", model)
		}
	}
	if opt.Final != nil {
		next, all = withFinal(next, opt.Final), nil
	}
	switch model {
	case "budget":
		b, err := budgetParam(h, opt)
		if err != nil {
			return Result{}, err
		}
		if amounts, err := budgetHasAmounts(h); err != nil || amounts {
			if err != nil {
				return Result{}, err
			}
			return checkBudgetAmountsStream(ctx, next, all, b, opt.Timeout)
		}
		c, err := newBudgetChecker(b)
		if err != nil {
			return Result{}, err
		}
		return stream(ctx, next, model, b, c.Add, func() (Result, error) { return c.Result(), nil })
	case "counter":
		before, err := counterParam(h, opt)
		if err != nil {
			return Result{}, err
		}
		c := newCounterChecker(before)
		defer c.close()
		return stream(ctx, next, model, before, c.add, c.result)
	case ListAppendModel, RWRegisterModel:
		return checkTxnStream(ctx, model, h, next, opt)
	}
	ops := all
	add := func(op histories.Op) error {
		ops = append(ops, op)
		return nil
	}
	if model == RegisterModel || model == CASRegisterModel {
		// A search: its bounds begin now, and bound the reading of the history too.
		b := newSearchBounds(ctx, opt.Timeout, opt.MaxMemory)
		defer b.close()
		opt.bounds = b
		if all == nil {
			done, err := feedWithin(ctx, b.stopped, next, add)
			if err != nil {
				return Result{}, err
			}
			if !done && ctx.Err() == nil {
				return Result{Verdict: Unknown, Checker: model, Anomalies: []Anomaly{}, Details: map[string]json.RawMessage{"bound": histories.Value(b.boundName())},
					Summary: fmt.Sprintf("%s while the history was read (%d events): nothing was decided", b.ranOut(), len(ops))}, nil
			}
			if !done {
				return interrupted(model, ctx.Err()), nil
			}
		}
	} else if all == nil {
		done, err := feed(ctx, next, add)
		if err != nil {
			return Result{}, err
		}
		if !done {
			return interrupted(model, ctx.Err()), nil
		}
	}
	if model == "" {
		return Result{}, fmt.Errorf("the history names no model: give --model (%v)", Models)
	}
	res, err := checkModel(ctx, model, h, ops, opt)
	if res.Verdict == 0 {
		return res, err
	}
	// A verdict with an error is a verdict with a warning (porcupine's page could not be
	// written whole): the lost writes and the rule for nothing checked still apply, so
	// that the verdict does not depend on whether a page was drawn.
	var c completions
	for _, op := range ops {
		c.add(op)
	}
	return finish(res, lostWritesOf(model, ops), &c), err
}

// finish applies to a model's result what every check applies after the model's
// checker: the acknowledged writes the process faults lost (lost), and the rule that a
// check in which no operation completed (checked) is unknown, not valid.
func finish(res Result, lost []LostWrite, checked *completions) Result {
	return checked.unlessNothing(withLostWrites(res, lost))
}

// withFinal returns next followed, after its last event, by an ok read of value final
// by a process of its own (WithFinalRead, for a history read one event at a time).
func withFinal(next func() (histories.Op, error), final json.RawMessage) func() (histories.Op, error) {
	var index, t int64
	proc := 0
	var tail []histories.Op
	ended := false
	return func() (histories.Op, error) {
		if !ended {
			op, err := next()
			if !errors.Is(err, io.EOF) {
				if err == nil {
					index, t, proc = max(index, op.Index+1), max(t, op.Time+1), max(proc, op.Process+1)
				}
				return op, err
			}
			ended = true
			tail = finalRead(index, t, proc, final)
		}
		if len(tail) == 0 {
			return histories.Op{}, io.EOF
		}
		op := tail[0]
		tail = tail[1:]
		return op, nil
	}
}

// finalRead is the final read WithFinalRead appends: its invocation at index and time
// t by process proc, and its ok completion with value final.
func finalRead(index, t int64, proc int, final json.RawMessage) []histories.Op {
	return []histories.Op{
		{Index: index, Time: t, Process: proc, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)},
		{Index: index + 1, Time: t + 1, Process: proc, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: final},
	}
}

// checkModel runs the checker of a model that reads the whole history (check streams
// the others).
func checkModel(ctx context.Context, model string, h *histories.Header, ops []histories.Op, opt Options) (Result, error) {
	switch model {
	case ExactlyOnceModel:
		return CheckExactlyOnce(ctx, ops)
	case ExactlyOnceResponseModel:
		return CheckExactlyOnceResponse(ctx, ops)
	case BudgetsModel:
		return checkBudgetsModel(ctx, h, ops)
	case ModelsModel:
		opt.Final = nil // check appended it already
		return checkModelsModel(ctx, h, ops, opt)
	case BankModel:
		p, err := bankFromHeader(h)
		if err != nil {
			return Result{}, err
		}
		return CheckBank(ctx, ops, p)
	case TransferModel:
		p, err := bankFromHeader(h)
		if err != nil {
			return Result{}, err
		}
		return CheckTransfer(ctx, ops, p)
	case RegisterModel, CASRegisterModel:
		initial := opt.Initial
		if initial == nil && h != nil {
			if raw, ok := h.Params["initial"]; ok && string(raw) != "null" {
				var v int64
				if err := json.Unmarshal(raw, &v); err != nil {
					return Result{}, fmt.Errorf("header params.initial %s: %v", raw, err)
				}
				initial = &v
			}
		}
		return CheckRegister(ctx, ops, RegisterOptions{Model: model, Initial: initial, FailMeans: opt.FailMeans, Timeout: opt.Timeout,
			MaxMemory: opt.MaxMemory, VisualizePath: opt.VisualizePath, bounds: opt.bounds})
	}
	return Result{}, fmt.Errorf("unknown model %q (want one of %v)", model, Models)
}

// lostWritesOf finds the acknowledged writes the history's process faults lost, for a
// model checked from the whole history (the counting models count theirs as they
// stream: stream).
func lostWritesOf(model string, ops []histories.Op) []LostWrite {
	switch model {
	case RegisterModel, CASRegisterModel:
		return lostRegisterWrites(ops)
	case ExactlyOnceModel:
		return lostEffects(ops)
	}
	return nil
}

// WithFinalRead returns ops followed by an ok read of value final (op id
// histories.FinalReadID(0), "final-0"), by a process of its own, that begins after
// every event of ops: the history Check holds to its model when Options.Final is given.
// ops itself is not changed.
func WithFinalRead(ops []histories.Op, final json.RawMessage) []histories.Op {
	var index, t int64
	proc := 0
	for _, op := range ops {
		index = max(index, op.Index+1)
		t = max(t, op.Time+1)
		proc = max(proc, op.Process+1)
	}
	out := make([]histories.Op, len(ops), len(ops)+2)
	copy(out, ops)
	return append(out, finalRead(index, t, proc, final)...)
}
