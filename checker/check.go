package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// Options tune Check. The zero value checks with the model and parameters the history's
// header names, without a time limit.
type Options struct {
	// Model overrides the header's model: budget, register, cas-register, counter,
	// exactly-once, bank, transfer.
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
	// exactly-once an ExactlyOnceState, bank Balances). Check appends it as a read that
	// begins after every event of the history.
	Final json.RawMessage

	// bounds are the bounds of a check CheckStream began, which the search inherits.
	bounds *searchBounds
}

// checkEvery is how many events the exact checkers handle between looks at their
// context: often enough to stop within moments, rarely enough to cost nothing.
const checkEvery = 4096

// Models lists the models Check knows.
var Models = []string{"budget", RegisterModel, CASRegisterModel, "counter", ExactlyOnceModel, BankModel, TransferModel, ListAppendModel, RWRegisterModel, BudgetsModel, ExactlyOnceResponseModel}

// Check chooses the checker for the history's model and runs it. The error means the
// history cannot be checked (no model, missing parameters, not a history of that model);
// an invalid history is a Result. When ctx ends first (SIGINT, a caller's deadline) the
// check stops within moments and the Result is Unknown, its Summary saying it was
// interrupted.
func Check(ctx context.Context, h *histories.Header, ops []histories.Op, opt Options) (Result, error) {
	model := opt.Model
	if model == "" && h != nil {
		model = h.Model
	}
	switch model {
	case "":
		return Result{}, fmt.Errorf("the history names no model: give --model (%v)", Models)
	case RegisterModel, CASRegisterModel, ListAppendModel, RWRegisterModel:
		if opt.Final != nil {
			return Result{}, fmt.Errorf("a final state applies to the budget, counter, exactly-once and bank models, not %s", model)
		}
	}
	if opt.Final != nil {
		ops = WithFinalRead(ops, opt.Final)
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
	lost, lerr := lostWritesOf(model, h, ops, opt)
	if lerr != nil {
		return Result{}, lerr
	}
	return c.unlessNothing(withLostWrites(res, lost)), err
}

// checkModel runs the model's checker.
func checkModel(ctx context.Context, model string, h *histories.Header, ops []histories.Op, opt Options) (Result, error) {
	switch model {
	case ListAppendModel, RWRegisterModel:
		to, err := txnOptions(h, opt)
		if err != nil {
			return Result{}, err
		}
		return checkTxn(ctx, model, ops, to)
	case ExactlyOnceModel:
		return CheckExactlyOnce(ctx, ops)
	case ExactlyOnceResponseModel:
		return CheckExactlyOnceResponse(ctx, ops)
	case BudgetsModel:
		return checkBudgetsModel(ctx, h, ops)
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
	case "budget":
		b, err := budgetParam(h, opt)
		if err != nil {
			return Result{}, err
		}
		return CheckBudget(ctx, ops, b)
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
	case "counter":
		before, err := counterParam(h, opt)
		if err != nil {
			return Result{}, err
		}
		return CheckCounter(ctx, ops, before)
	}
	return Result{}, fmt.Errorf("unknown model %q (want one of %v)", model, Models)
}

// lostWritesOf finds the acknowledged writes the history's process faults lost, by
// model; the model's parameters have been read once already, by its checker. It errs
// when what it wrote out cannot be read back (countingLoss).
func lostWritesOf(model string, h *histories.Header, ops []histories.Op, opt Options) ([]LostWrite, error) {
	switch model {
	case "budget", "counter":
		initial, err := budgetParam(h, opt)
		if model == "counter" {
			initial, err = counterParam(h, opt)
		}
		if err != nil {
			return nil, nil
		}
		c := newCountingLoss(model)
		defer c.close()
		for _, op := range ops {
			c.add(op)
		}
		return c.lost(initial)
	case RegisterModel, CASRegisterModel:
		return lostRegisterWrites(ops), nil
	case ExactlyOnceModel:
		return lostEffects(ops), nil
	}
	return nil, nil
}

// WithFinalRead returns ops followed by an ok read of value final (op id
// histories.FinalReadID(0), "final-0"), by a
// process of its own, that begins after every event of ops: the history Check holds
// to its model when Options.Final is given. ops itself is not changed.
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
	return append(out,
		histories.Op{Index: index, Time: t, Process: proc, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)},
		histories.Op{Index: index + 1, Time: t + 1, Process: proc, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: final})
}
