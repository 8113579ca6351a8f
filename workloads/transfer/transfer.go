// Package transfer is the distributed-transaction workloads: transfer (move 1 from one
// row to another) and two-rows (read two rows in one transaction, the Schism paper's
// workload), each with its rows on one server (local placement) or on two servers
// committed with two-phase commit (distributed).
//
// Every row starts at Initial; row r lives on server r mod Store.Servers(). Each side of
// a transfer updates its row and, in the same local transaction, inserts a marker (the
// transfer's op id, the row) into its server's applied table, so that after the run the
// markers say which participants applied each transfer.
//
// History values (model checker.TransferModel; the header's params are the bank
// model's: every row as an account at Initial, and a floor no row reaches):
//
//	transfer  invoke {"from":"3","to":"8","amount":1}; ok, fail or info
//	total     invoke; ok with the sum of every row, read one server after another
//	rows      invoke ["3","8"]; ok with {"3":100,"8":100} (two-rows)
//	read      final: ok with every row, {"0":100,"1":99,...}
//	applied   final, one per server (key "server-N"): ok with the markers found there,
//	          {"2-17":["3"],...}: op id to the rows its transfer applied on
//	prepared  final: ok with what is still prepared after recovery, ["gid@server",...]
//
// The checker decides from those alone (checker.CheckTransfer): the total conserved, no
// transfer half applied, none acknowledged and lost, none failed and applied, nothing
// left prepared. A read of the total that visits the servers one after another, without a
// global snapshot, can see a transfer committed on one server and not yet on the other:
// a fractured read. It is counted, and it does not make the run invalid: two-phase commit
// over independent PostgreSQL servers promises atomic commitment, not a snapshot across
// servers. (Jepsen would call the same read a violation of snapshot isolation, had the
// system claimed it.)
package transfer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
)

// Initial is every row's counter before the run.
const Initial = 100

// Floor is the bank floor of a transfer history: a transfer may take a row below zero,
// and no row reaches this.
const Floor = math.MinInt64 / 4

// Placement says where the two rows of one transaction live.
type Placement string

// The placements.
const (
	// Local puts both rows on one server: a plain local transaction.
	Local Placement = "local"
	// Distributed puts the rows on two servers: two-phase commit through the
	// coordinator.
	Distributed Placement = "distributed"
)

// ParsePlacement returns the placement named s.
func ParsePlacement(s string) (Placement, error) {
	return choice.Parse("placement", Placement(s), Local, Distributed)
}

// The functions of a transfer history.
const (
	FTransfer = "transfer"
	FTotal    = "total"
	FRows     = "rows"
	FRead     = "read"
	FApplied  = "applied"
	FPrepared = "prepared"
)

// ReasonCrashed is the reason of an error after which the coordinator had crashed: the
// transaction was abandoned where it stood (outcome unknown), or never began.
const ReasonCrashed workloads.Reason = "coordinator-crashed"

// Store is a table of rows spread over several servers, row r on server r mod Servers(),
// with transactions over one server (local) or two (distributed: two-phase commit). Its
// errors follow the error contract of package workloads: nil when the transaction
// committed, ErrUnknown when it may have (a coordinator that crashed mid-protocol, a
// lost COMMIT), any other error when it certainly did not. It is safe for concurrent use.
type Store interface {
	// Servers is how many servers hold the rows.
	Servers() int
	// Reset finishes whatever an earlier run left prepared, and creates rows rows, every
	// one at Initial, with an empty table of markers on every server.
	Reset(ctx context.Context, rows int) error
	// Transfer moves 1 from row from to row to in one transaction named by opID, and
	// inserts the marker (opID, row) beside each side's update.
	Transfer(ctx context.Context, opID string, from, to int) error
	// ReadRows reads rows a and b in one transaction named by opID.
	ReadRows(ctx context.Context, opID string, a, b int) (va, vb int64, err error)
	// ReadTotal sums every row, one server after another: no snapshot across servers.
	ReadTotal(ctx context.Context) (int64, error)
	// Rows reads every row's counter; Markers reads the markers on one server, op id to
	// the rows its transfer applied on there; Prepared lists what is prepared on any
	// server, as "gid@server".
	Rows(ctx context.Context) (map[int]int64, error)
	Markers(ctx context.Context, server int) (map[string][]int, error)
	Prepared(ctx context.Context) ([]string, error)
}

// Workload is the transfer or two-rows workload over a Store.
type Workload struct {
	Store     Store
	Kind      workloads.Name // workloads.Transfer or workloads.TwoRows
	Placement Placement
	// Rows is the table's size; Reads is the share of a transfer run's operations that
	// read the total across servers.
	Rows  int
	Reads float64
}

var _ workloads.Workload = (*Workload)(nil)

// New returns the workload kind (transfer or two-rows) on store, with rows rows placed
// by placement; reads is the share of transfer operations that read the total. It errs
// when the table cannot place two rows as asked (too few rows, or fewer than two
// servers for a distributed placement).
func New(store Store, kind workloads.Name, placement Placement, rows int, reads float64) (*Workload, error) {
	if kind != workloads.Transfer && kind != workloads.TwoRows {
		return nil, fmt.Errorf("transfer: workload %q is not transfer or two-rows", kind)
	}
	n := store.Servers()
	if n < 1 || (placement == Distributed && n < 2) {
		return nil, fmt.Errorf("transfer: %s placement over %d servers", placement, n)
	}
	if rows/n < 2 {
		return nil, fmt.Errorf("transfer: %d rows over %d servers leave fewer than 2 on each", rows, n)
	}
	return &Workload{Store: store, Kind: kind, Placement: placement, Rows: rows, Reads: reads}, nil
}

// Name is the workload's kind: transfer or two-rows.
func (w *Workload) Name() workloads.Name { return w.Kind }

// Model is the checker's transfer model.
func (w *Workload) Model() string { return checker.TransferModel }

// Mechanism says where the rows are and how a transaction commits.
func (w *Workload) Mechanism() string {
	if w.Placement == Local {
		return fmt.Sprintf("local transactions, rows over %d servers", w.Store.Servers())
	}
	return fmt.Sprintf("two-phase commit over %d servers", w.Store.Servers())
}

// Params are the bank model's: every row an account at Initial, and Floor.
func (w *Workload) Params() map[string]json.RawMessage {
	p := checker.BankParams{Accounts: checker.Balances{}, Floor: Floor}
	for r := range w.Rows {
		p.Accounts[Account(r)] = Initial
	}
	return p.HeaderParams()
}

// Account is row's name in the history.
func Account(row int) string { return strconv.Itoa(row) }

// Setup resets the table.
func (w *Workload) Setup(ctx context.Context) error { return w.Store.Reset(ctx, w.Rows) }

// Worker returns a worker; the store's pools serve every worker.
func (w *Workload) Worker(context.Context, int) (workloads.Worker, error) {
	return &worker{w: w}, nil
}

// Final reads every row, each server's markers and what is still prepared; the caller
// runs recovery first.
func (w *Workload) Final(ctx context.Context) ([]workloads.Call, []workloads.Reply, error) {
	rows, err := w.Store.Rows(ctx)
	if err != nil {
		return nil, nil, err
	}
	bal := checker.Balances{}
	for r, v := range rows {
		bal[Account(r)] = v
	}
	calls := []workloads.Call{{F: FRead}}
	replies := []workloads.Reply{{Value: bal}}
	for s := range w.Store.Servers() {
		m, err := w.Store.Markers(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		marks := map[string][]string{}
		for id, rs := range m {
			for _, r := range rs {
				marks[id] = append(marks[id], Account(r))
			}
		}
		calls = append(calls, workloads.Call{F: FApplied, Key: "server-" + strconv.Itoa(s)})
		replies = append(replies, workloads.Reply{Value: marks})
	}
	prepared, err := w.Store.Prepared(ctx)
	if err != nil {
		return nil, nil, err
	}
	if prepared == nil {
		prepared = []string{}
	}
	calls = append(calls, workloads.Call{F: FPrepared})
	replies = append(replies, workloads.Reply{Value: prepared})
	return calls, replies, nil
}

// worker issues one transaction (or read of the total) at a time.
type worker struct {
	w *Workload
}

func (*worker) Conn() string { return "" } // a transaction uses one connection per server
func (*worker) Close() error { return nil }

// Next picks two distinct rows: on one server (local) or on two (distributed), and for
// a share Reads of a transfer run's operations, a read of the total instead.
func (k *worker) Next(rng *rand.Rand) workloads.Call {
	w := k.w
	if w.Kind == workloads.Transfer && w.Reads > 0 && rng.Float64() < w.Reads {
		return workloads.Call{F: FTotal}
	}
	a, b := w.pick(rng)
	if w.Kind == workloads.TwoRows {
		return workloads.Call{F: FRows, Value: []string{Account(a), Account(b)}}
	}
	return workloads.Call{F: FTransfer, Value: checker.Transfer{From: Account(a), To: Account(b), Amount: 1}}
}

// pick returns two distinct rows, from and to.
func (w *Workload) pick(rng *rand.Rand) (int, int) {
	n := w.Store.Servers()
	perServer := w.Rows / n
	row := func(server int) int { return rng.IntN(perServer)*n + server }
	s1 := rng.IntN(n)
	if w.Placement == Local {
		a, b := row(s1), row(s1)
		for b == a {
			b = row(s1)
		}
		return a, b
	}
	s2 := rng.IntN(n - 1)
	if s2 >= s1 {
		s2++
	}
	return row(s1), row(s2)
}

// txTimeout bounds one transaction. The end of the run stops new transactions, never
// one under way: a cancelled PREPARE or COMMIT PREPARED would be a fault the run did
// not ask for.
const txTimeout = 30 * time.Second

func (k *worker) Do(ctx context.Context, call workloads.Call, req workloads.Request) (workloads.Reply, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txTimeout)
	defer cancel()
	s := k.w.Store
	switch call.F {
	case FTotal:
		t, err := s.ReadTotal(ctx)
		return workloads.Reply{Value: t}, err
	case FTransfer:
		t := call.Value.(checker.Transfer)
		from, to, err := rowsOf(t.From, t.To)
		if err != nil {
			return workloads.Reply{}, err
		}
		return workloads.Reply{}, s.Transfer(ctx, req.OpID, from, to)
	case FRows:
		acc := call.Value.([]string)
		a, b, err := rowsOf(acc[0], acc[1])
		if err != nil {
			return workloads.Reply{}, err
		}
		va, vb, err := s.ReadRows(ctx, req.OpID, a, b)
		if err != nil {
			return workloads.Reply{}, err
		}
		return workloads.Reply{Value: checker.Balances{acc[0]: va, acc[1]: vb}}, nil
	}
	return workloads.Reply{}, fmt.Errorf("transfer: unknown operation %q", call.F)
}

func rowsOf(a, b string) (int, int, error) {
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, fmt.Errorf("transfer: rows %q, %q: %w", a, b, err)
	}
	return x, y, nil
}
