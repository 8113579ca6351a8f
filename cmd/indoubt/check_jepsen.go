package main

import (
	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// jepsenOptions are the reading options of a Jepsen history for a's model: for the
// transactional models, an op without :f (or :f nil) is a transaction, as Elle reads
// it; Elle's own test histories leave :f out.
func (a checkArgs) jepsenOptions() histories.JepsenOptions {
	opt := histories.JepsenOptions{SkipBadLines: a.skipBad}
	switch a.opt.Model {
	case checker.ListAppendModel, checker.RWRegisterModel:
		opt.F = checker.TxnFunction
	}
	return opt
}
