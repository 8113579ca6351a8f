package main

import (
	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// jepsenOptions are the reading options of a Jepsen history for a's model: for the
// transactional models, an op without :f (or :f nil) is a transaction, and a process
// may have several transactions open, paired with its completions in order, as Elle
// reads them; Elle's own test histories leave :f out and build such processes.
func (a checkArgs) jepsenOptions() histories.JepsenOptions {
	opt := histories.JepsenOptions{SkipBadLines: a.skipBad}
	switch a.opt.Model {
	case checker.ListAppendModel, checker.RWRegisterModel:
		opt.F = checker.TxnFunction
		opt.SeveralOpen = true
	}
	return opt
}
