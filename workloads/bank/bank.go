// Package bank is Jepsen's bank workload: a few accounts, transactions that move an
// amount from one account to another, and transactions that read every account. Each
// transfer reads both balances and writes what it computed from them, so that a
// transaction that wrote over another's update (a lost update, which snapshot
// isolation forbids) breaks the total every read sees. A transfer that would take an
// account below zero is refused.
//
// History values (model checker.BankModel; the header's params are the accounts with
// their initial balances, checker.BankParams):
//
//	transfer  invoke {"from":"2","to":"5","amount":3}; ok, fail (refused for lack of
//	          funds, with no error; a conflict or an error that certainly did not
//	          commit, with it) or info (unknown)
//	read      invoke; ok with every account's balance {"0":10,"1":7,...}; the final read
//	          is one of them, by the harness after every worker stopped
//
// The checker (checker.CheckBank) holds every ok read to the initial total and to the
// floor of 0, and the final read to the acknowledged transfers applied once each.
package bank

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// Defaults of a Workload: Jepsen's bank test's shape, eight accounts and transfers of
// at most five.
const (
	DefaultAccounts    = 8
	DefaultInitial     = 10
	DefaultMaxTransfer = 5
	// DefaultReadShare is the share of operations that read every account.
	DefaultReadShare = 0.5
)

// Store is what the bank needs of a database: accounts 0 to n-1 with their balances.
type Store interface {
	// Mechanism describes how a transfer is written, for reports.
	Mechanism() string
	// Reset creates accounts 0 to n-1, each holding initial, and nothing else.
	Reset(ctx context.Context, n int, initial int64) error
	// Balances reads every account in one transaction, outside any worker's session.
	Balances(ctx context.Context) (map[int]int64, error)
	// Session opens one worker's connection.
	Session(ctx context.Context) (Session, error)
}

// Session is one worker's connection.
type Session interface {
	workloads.Session
	// Transfer moves amount from account from to account to in one transaction that
	// reads both balances and writes the values computed from them. It reports false,
	// with nothing written, when the source held less than amount. Errors follow the
	// contract of package workloads.
	Transfer(ctx context.Context, req workloads.Request, from, to int, amount int64) (bool, error)
	// Read reads every account in one transaction.
	Read(ctx context.Context) (map[int]int64, error)
}

// Workload is the bank bound to a Store.
type Workload struct {
	Store Store
	// Accounts, Initial, MaxTransfer and ReadShare: the defaults when zero.
	Accounts    int
	Initial     int64
	MaxTransfer int64
	ReadShare   float64
}

var _ workloads.Workload = (*Workload)(nil)

// New returns the bank on store with the defaults.
func New(store Store) *Workload {
	return &Workload{Store: store, Accounts: DefaultAccounts, Initial: DefaultInitial, MaxTransfer: DefaultMaxTransfer, ReadShare: DefaultReadShare}
}

func (w *Workload) Name() workloads.Name { return workloads.Bank }
func (w *Workload) Model() string        { return checker.BankModel }
func (w *Workload) Mechanism() string    { return w.Store.Mechanism() }

func (w *Workload) initial() checker.Balances {
	b := checker.Balances{}
	for a := range w.Accounts {
		b[strconv.Itoa(a)] = w.Initial
	}
	return b
}

// Params are the accounts with their initial balances, and the floor 0.
func (w *Workload) Params() map[string]json.RawMessage {
	return checker.BankParams{Accounts: w.initial()}.HeaderParams()
}

// Setup creates the accounts.
func (w *Workload) Setup(ctx context.Context) error {
	if w.Accounts < 2 || w.Initial < 0 || w.MaxTransfer < 1 {
		return fmt.Errorf("bank: %d accounts of %d, transfers up to %d: want 2 accounts or more, a balance of 0 or more, transfers of 1 or more", w.Accounts, w.Initial, w.MaxTransfer)
	}
	return w.Store.Reset(ctx, w.Accounts, w.Initial)
}

// Worker opens a session.
func (w *Workload) Worker(ctx context.Context, id int) (workloads.Worker, error) {
	s, err := w.Store.Session(ctx)
	if err != nil {
		return nil, err
	}
	return &worker{Session: s, w: w}, nil
}

// Final reads every account after the run.
func (w *Workload) Final(ctx context.Context) ([]workloads.Call, []workloads.Reply, error) {
	b, err := w.Store.Balances(ctx)
	if err != nil {
		return nil, nil, err
	}
	return []workloads.Call{{F: "read"}}, []workloads.Reply{{Value: balances(b)}}, nil
}

func balances(b map[int]int64) checker.Balances {
	out := checker.Balances{}
	for a, v := range b {
		out[strconv.Itoa(a)] = v
	}
	return out
}

type worker struct {
	Session
	w *Workload
}

func (k *worker) Next(rng *rand.Rand) workloads.Call {
	if rng.Float64() < k.w.ReadShare {
		return workloads.Call{F: "read"}
	}
	from := rng.IntN(k.w.Accounts)
	to := rng.IntN(k.w.Accounts - 1)
	if to >= from {
		to++
	}
	amt := 1 + rng.Int64N(k.w.MaxTransfer)
	return workloads.Call{F: "transfer", Value: checker.Transfer{From: strconv.Itoa(from), To: strconv.Itoa(to), Amount: amt}}
}

func (k *worker) Do(ctx context.Context, call workloads.Call, req workloads.Request) (workloads.Reply, error) {
	switch call.F {
	case "transfer":
		t, ok := call.Value.(checker.Transfer)
		if !ok {
			return workloads.Reply{}, fmt.Errorf("bank: transfer of %T", call.Value)
		}
		from, err1 := strconv.Atoi(t.From)
		to, err2 := strconv.Atoi(t.To)
		if err := errors.Join(err1, err2); err != nil {
			return workloads.Reply{}, fmt.Errorf("bank: transfer %+v: %w", t, err)
		}
		ok, err := k.Transfer(ctx, req, from, to, t.Amount)
		if err != nil {
			return workloads.Reply{}, err
		}
		// Refused for lack of funds: certainly not applied, recorded as fail with no
		// error and never retried.
		return workloads.Reply{Failed: !ok}, nil
	case "read":
		b, err := k.Read(ctx)
		if err != nil {
			return workloads.Reply{}, err
		}
		return workloads.Reply{Value: balances(b)}, nil
	}
	return workloads.Reply{}, fmt.Errorf("bank: unknown operation %q", call.F)
}

// Final is the `final` section of results.json for the bank.
type Final struct {
	// Accounts and Initial are the bank's shape; Total the sum of the initial balances.
	Accounts int   `json:"accounts"`
	Total    int64 `json:"total"`
	// Acknowledged counts transfers that completed ok, Refused those refused for lack
	// of funds, Failed other definite failures (conflicts included), Unknown those whose
	// outcome is unknown.
	Acknowledged int64 `json:"acknowledged"`
	Refused      int64 `json:"refused"`
	Failed       int64 `json:"failed"`
	Unknown      int64 `json:"unknown"`
	// Reads counts the ok reads; Unconserved those whose balances do not sum to Total.
	Reads       int64 `json:"reads"`
	Unconserved int64 `json:"unconserved"`
	// After is the final read's balances; nil when it is missing.
	After checker.Balances `json:"after,omitempty"`
}

// Figures shows the acknowledged transfers and those refused for lack of funds.
func (f Final) Figures() workloads.Figures {
	return workloads.Figures{Applied: &f.Acknowledged, Rejected: &f.Refused}
}

// Summary counts the transfers and reads of the history (final read included).
func (w *Workload) Summary(ops []histories.Op) workloads.Final {
	f := Final{Accounts: w.Accounts, Total: int64(w.Accounts) * w.Initial}
	open := map[int]string{}
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		if op.Type == histories.Invoke {
			open[op.Process] = op.F
			continue
		}
		fn := open[op.Process]
		delete(open, op.Process)
		switch {
		case fn == "transfer" && op.Type == histories.OK:
			f.Acknowledged++
		case fn == "transfer" && op.Type == histories.Fail && op.Error == "":
			f.Refused++
		case fn == "transfer" && op.Type == histories.Fail:
			f.Failed++
		case fn == "transfer":
			f.Unknown++
		case fn == "read" && op.Type == histories.OK:
			var b checker.Balances
			if json.Unmarshal(op.Value, &b) != nil {
				continue
			}
			f.Reads++
			var sum int64
			for _, v := range b {
				sum += v
			}
			if sum != f.Total {
				f.Unconserved++
			}
			f.After = b
		}
	}
	for _, fn := range open {
		if fn == "transfer" {
			f.Unknown++
		}
	}
	return f
}
