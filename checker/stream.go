package checker

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/indoubt/indoubt/histories"
)

// CheckStream is Check for a history read one event at a time: next returns the events
// in order and io.EOF at the end. The budget and counter checkers take the events as
// they come, so memory grows with the operations a checker keeps (budget: those still
// open; counter: one small record each), not with the history's bytes; the other
// models, and a check with Options.Final, read the whole history first. An error of next other than io.EOF is returned
// as it is, and the check ends there.
func CheckStream(ctx context.Context, h *histories.Header, next func() (histories.Op, error), opt Options) (Result, error) {
	model := opt.Model
	if model == "" && h != nil {
		model = h.Model
	}
	if opt.Final != nil {
		// The final state is a read after every event: left to Check, which adds it.
		model = ""
	}
	switch model {
	case "budget":
		b, err := budgetParam(h, opt)
		if err != nil {
			return Result{}, err
		}
		c, err := newBudgetChecker(b)
		if err != nil {
			return Result{}, err
		}
		for i := 0; ; i++ {
			if i%checkEvery == 0 && ctx.Err() != nil {
				return interrupted("budget", ctx.Err()), nil
			}
			op, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return Result{}, err
			}
			if err := c.Add(op); err != nil {
				return Result{}, err
			}
		}
		if ctx.Err() != nil {
			return interrupted("budget", ctx.Err()), nil
		}
		return c.Result(), nil
	case "counter":
		before, err := counterParam(h, opt)
		if err != nil {
			return Result{}, err
		}
		var p counterPairer
		for i := 0; ; i++ {
			if i%checkEvery == 0 && ctx.Err() != nil {
				return interrupted("counter", ctx.Err()), nil
			}
			op, err := next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return Result{}, err
			}
			if err := p.add(op); err != nil {
				return Result{}, err
			}
		}
		if ctx.Err() != nil {
			return interrupted("counter", ctx.Err()), nil
		}
		all, _ := p.close()
		c := counterCheck{before: before}
		c.run(all)
		return c.build(), nil
	}
	var ops []histories.Op
	for {
		op, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Result{}, err
		}
		ops = append(ops, op)
	}
	return Check(ctx, h, ops, opt)
}

// budgetParam is the initial balance: opt.Budget, or the header's.
func budgetParam(h *histories.Header, opt Options) (int64, error) {
	if opt.Budget != nil {
		return *opt.Budget, nil
	}
	b, err := budgetFromHeader(h)
	if err != nil {
		return 0, fmt.Errorf("%v (or give --budget)", err)
	}
	return b, nil
}

// counterParam is the counter's value before the run: opt.Initial, or the header's.
func counterParam(h *histories.Header, opt Options) (int64, error) {
	if opt.Initial != nil {
		return *opt.Initial, nil
	}
	b, err := counterFromHeader(h)
	if err != nil {
		return 0, fmt.Errorf("%v (or give --initial)", err)
	}
	return b, nil
}
