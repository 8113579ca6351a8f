package twopc

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// A transfer run also records a bank history (history.jsonl): every transfer as an
// invocation and its completion, and after recovery one read of every row. The bank
// checker judges it from the history alone (conservation, and the final balances
// against the acknowledged transfers plus some choice of the unknown ones): a second
// opinion beside the markers' reconciliation, which sees the servers' tables. Rows have
// no floor here: a transfer may take a row below zero.

// bankFloor is a floor no row reaches.
const bankFloor = math.MinInt64 / 4

// history records a transfer run's bank history; nil records nothing.
type history struct {
	w      *histories.Writer
	path   string
	start  time.Time
	params checker.BankParams
	mu     sync.Mutex
	err    error
}

func account(row int) string { return strconv.Itoa(row) }

func newHistory(dir string, cfg Config, rows int, start time.Time) (*history, error) {
	p := checker.BankParams{Accounts: checker.Balances{}, Floor: bankFloor}
	for r := range rows {
		p.Accounts[account(r)] = transfer.Initial
	}
	path := filepath.Join(dir, "history.jsonl")
	w, err := histories.Create(path, histories.Header{
		Workload: string(workloads.Transfer), Model: checker.BankModel, Store: "postgres",
		Seed: cfg.Seed, Params: p.HeaderParams(),
	})
	if err != nil {
		return nil, err
	}
	return &history{w: w, path: path, start: start, params: p}, nil
}

func (h *history) write(op histories.Op) {
	if h == nil {
		return
	}
	op.Time = time.Since(h.start).Nanoseconds()
	if _, err := h.w.Write(op); err != nil {
		h.mu.Lock()
		if h.err == nil {
			h.err = err
		}
		h.mu.Unlock()
	}
}

// transfer records the invocation of a transfer.
func (h *history) invoke(process int, gid string, from, to int) {
	h.write(histories.Op{Process: process, Type: histories.Invoke, F: "transfer", OpID: gid,
		Value: histories.Value(checker.Transfer{From: account(from), To: account(to), Amount: 1})})
}

// complete records its completion.
func (h *history) complete(process int, gid string, out transfer.Outcome, err error) {
	op := histories.Op{Process: process, F: "transfer", OpID: gid}
	switch out {
	case transfer.OK:
		op.Type = histories.OK
	case transfer.Fail:
		op.Type = histories.Fail
	default:
		op.Type = histories.Info
	}
	if err != nil {
		op.Error = err.Error()
	}
	h.write(op)
}

// check records the final read of every row, closes the history, reads it back and
// runs the bank checker on it.
func (h *history) check(ctx context.Context, process int, final checker.Balances) (checker.Result, error) {
	h.write(histories.Op{Process: process, Type: histories.Invoke, F: "read", OpID: "final"})
	h.write(histories.Op{Process: process, Type: histories.OK, F: "read", OpID: "final", Value: histories.Value(final)})
	if err := h.w.Close(); err != nil {
		return checker.Result{}, err
	}
	if h.err != nil {
		return checker.Result{}, fmt.Errorf("history: %w", h.err)
	}
	_, ops, err := histories.ReadFile(h.path, false)
	if err != nil {
		return checker.Result{}, err
	}
	return checker.CheckBank(ctx, ops, h.params)
}
