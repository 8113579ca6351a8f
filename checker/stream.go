package checker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/indoubt/indoubt/histories"
)

// CheckStream is Check for a history read one event at a time: next returns the events
// in order and io.EOF at the end. The budget and counter checkers take the events as
// they come, so memory grows with the operations a checker keeps (budget: those still
// open; counter: those in flight, the slots near the highest value seen, and the
// unknown increments), not with the history's bytes. What both must keep for every
// operation until the end (the counter's slots below that window, the times of the
// acknowledged effects the lost writes are counted from) is written out to a
// temporary file, removed as soon as it is created, and read back once at the end
// (or kept in memory when no file can be written); so do the transactional checkers,
// and Options.Final is read after the last event. The other models read the whole
// history first. Check is CheckStream over a history in memory. An error of
// next other than io.EOF is returned as it is, and the check ends there, except after
// ctx has ended: then it is taken for the interruption (a reader that stops when ctx
// does), and the Result is Unknown, interrupted. ctx is looked at every few thousand
// events, while the history is read and while it is checked.
func CheckStream(ctx context.Context, h *histories.Header, next func() (histories.Op, error), opt Options) (Result, error) {
	return check(ctx, h, next, nil, opt)
}

// CheckReader is CheckStream for the indoubt JSONL history rd reads, with rd's header:
// the same Result and error as CheckStream(ctx, rd.Header(), rd.Next, opt). The values
// of a transactional history are read as rd reads its lines, once each (txnScan is
// rd's Values while the check reads). An error of rd is returned as it is, as
// CheckStream returns one of next; rd.Err says whether the error was rd's.
func CheckReader(ctx context.Context, rd *histories.Reader, opt Options) (Result, error) {
	h := rd.Header()
	if model := modelOf(h, opt); (model == ListAppendModel || model == RWRegisterModel) && opt.Final == nil {
		return checkTxnReader(ctx, model, rd, opt)
	}
	return CheckStream(ctx, h, rd.Next, opt)
}

// stream checks a history of a counting model (budget, counter) as it is read: each
// event goes to add, and to what every check keeps beside its model's (the lost
// writes of the process faults, what was checked); result builds the model's Result
// once the history has been read (its error: what the model's checker wrote out
// could not be read back). initial is the budget or the counter's value before.
func stream(ctx context.Context, next func() (histories.Op, error), model string, initial int64, add func(histories.Op) error, result func() (Result, error)) (Result, error) {
	lost := newCountingLoss(model)
	defer lost.close()
	var checked completions
	done, err := feed(ctx, next, func(op histories.Op) error {
		lost.add(op)
		checked.add(op)
		return add(op)
	})
	if err != nil {
		return Result{}, err
	}
	if !done {
		return interrupted(model, ctx.Err()), nil
	}
	res, err := result()
	if err != nil {
		return Result{}, err
	}
	lw, err := lost.lost(initial)
	if err != nil {
		return Result{}, err
	}
	return finish(res, lw, &checked), nil
}

// feed hands each event from next to add until io.EOF, looking at ctx every checkEvery
// events and at the end. done is false when ctx stopped it; an error of next or add
// ends it there.
func feed(ctx context.Context, next func() (histories.Op, error), add func(histories.Op) error) (done bool, err error) {
	return feedWithin(ctx, nil, next, add)
}

// feedWithin is feed that also stops when stopped (when not nil) says so.
func feedWithin(ctx context.Context, stopped func() bool, next func() (histories.Op, error), add func(histories.Op) error) (done bool, err error) {
	for i := 0; ; i++ {
		if i%checkEvery == 0 && (ctx.Err() != nil || stopped != nil && stopped()) {
			return false, nil
		}
		op, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && ctx.Err() != nil {
			return false, nil // the reader stopped because ctx did
		}
		if err != nil {
			return false, err
		}
		if err := add(op); err != nil {
			return false, err
		}
	}
	return ctx.Err() == nil && (stopped == nil || !stopped()), nil
}

// budgetParam is the initial balance: opt.Budget, or the header's.
func budgetParam(h *histories.Header, opt Options) (int64, error) {
	return givenOrHeader(opt.Budget, h, budgetFromHeader, "--budget")
}

// counterParam is the counter's value before the run: opt.Initial, or the header's.
func counterParam(h *histories.Header, opt Options) (int64, error) {
	return givenOrHeader(opt.Initial, h, counterFromHeader, "--initial")
}

// givenOrHeader returns *given, or else what fromHeader reads from h; its error says
// which flag would give the value instead.
func givenOrHeader(given *int64, h *histories.Header, fromHeader func(*histories.Header) (int64, error), flag string) (int64, error) {
	if given != nil {
		return *given, nil
	}
	v, err := fromHeader(h)
	if err != nil {
		return 0, fmt.Errorf("%v (or give %s)", err, flag)
	}
	return v, nil
}

// headerInt returns the JSON integer params[key] of a history's header (a history of
// workload), what names the value in the error when there is no header. It errs when
// h is nil or when the parameter is missing or malformed.
func headerInt(h *histories.Header, workload, key, what string) (int64, error) {
	if h == nil {
		return 0, fmt.Errorf("%s history: no header to read %s from", workload, what)
	}
	raw, ok := h.Params[key]
	if !ok {
		return 0, fmt.Errorf("%s history: header has no params.%s", workload, key)
	}
	var v int64
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, fmt.Errorf("%s history: params.%s %s: %w", workload, key, raw, err)
	}
	return v, nil
}
