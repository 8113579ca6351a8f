package cql

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

var _ budget.Store = (*Client)(nil)

// headOp is the clustering key of the row every account partition starts with, so that a
// read of (head, op id) returns the static balance even when the op id is not recorded.
const headOp = ""

// Mechanism names the LWT loop for the report.
func (c *Client) Mechanism() string { return "LWT compare-and-set loop (UPDATE ... IF balance = ?)" }

// Reset creates the schema if needed and starts a new account partition holding budget,
// with no op ids. The previous generation's account partition is deleted.
func (c *Client) Reset(ctx context.Context, amount int64) error {
	if err := c.ensureSchema(ctx); err != nil {
		return fmt.Errorf("cql reset: %w", err)
	}
	account := "account-" + generation()
	applied, err := c.admin.Query("INSERT INTO "+c.table("budget")+" (account, op, balance) VALUES (?, ?, ?) IF NOT EXISTS",
		account, headOp, amount).WithContext(ctx).MapScanCAS(map[string]any{})
	if err != nil {
		return fmt.Errorf("cql reset: %w", Classify(err))
	}
	if !applied {
		return fmt.Errorf("cql reset: account partition %s already exists", account)
	}
	c.mu.Lock()
	old := c.account
	c.account = account
	c.mu.Unlock()
	if old != "" {
		// Nobody reads the old generation again; dropping it only saves space, so a
		// failure here is not the caller's problem.
		_ = c.admin.Query("DELETE FROM "+c.table("budget")+" WHERE account = ?", old).WithContext(ctx).Exec()
	}
	return nil
}

func (c *Client) currentAccount() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.account == "" {
		return "", errors.New("cql budget: Reset was not called")
	}
	return c.account, nil
}

// Balance reads the balance at SERIAL consistency.
func (c *Client) Balance(ctx context.Context) (int64, error) {
	account, err := c.currentAccount()
	if err != nil {
		return 0, err
	}
	// A session of its own, as the register's final reads: the administrative session
	// sat idle through any restart of the node, and gocql (v1.7.0) was seen leaving such
	// a session with no host for good ("no hosts available in the pool" 30 s after the
	// node served again) while busy sessions reconnected within a second.
	s, err := c.newSession(ctx)
	if err != nil {
		return 0, fmt.Errorf("cql balance: %w", Classify(err))
	}
	defer s.Close()
	var b int64
	err = s.exec(ctx, func() error {
		return s.gs.Query("SELECT balance FROM "+c.table("budget")+" WHERE account = ? LIMIT 1", account).
			WithContext(ctx).Consistency(gocql.Consistency(c.cfg.SerialConsistency)).Scan(&b)
	})
	if errors.Is(err, gocql.ErrNotFound) {
		return 0, fmt.Errorf("cql balance: %w", budget.ErrNoAccount)
	}
	if err != nil {
		return 0, fmt.Errorf("cql balance: %w", classifyRead(err))
	}
	return b, nil
}

// Session opens one worker's gocql session.
func (c *Client) Session(ctx context.Context) (budget.Session, error) {
	s, err := c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &budgetSession{session: s}, nil
}

type budgetSession struct{ *session }

// Decrement runs the LWT loop. Without Idempotent: read the balance at SERIAL, then
// UPDATE ... SET balance = b-1 IF balance = b until it applies (each lost race returns the
// current balance, the next try starts from it) or the balance is 0 (rejected).
//
// With Idempotent the read also fetches the op id's row, and each try is a conditional
// batch on the one partition: the balance update and the insert of the op id's row (with
// the balance after it), applied together or not at all. Because every applied decrement
// lowers the balance, IF balance = b also proves the op id was not recorded since the
// read; after a lost race the loop reads again, and finding the row returns the recorded
// outcome with Replayed.
func (s *budgetSession) Decrement(ctx context.Context, req workloads.Request) (budget.Outcome, error) {
	account, err := s.c.currentAccount()
	if err != nil {
		return budget.Outcome{Balance: -1}, workloads.Definite(err, "no-reset")
	}
	if req.Idempotent {
		if req.OpID == headOp {
			return budget.Outcome{Balance: -1}, workloads.Definite(errors.New("cql decrement: idempotent request without an op id"), "no-op-id")
		}
		return s.decrementIdempotent(ctx, account, req.OpID)
	}
	tbl := s.c.table("budget")
	serial := gocql.Consistency(s.c.cfg.SerialConsistency)
	var bal int64
	err = s.exec(ctx, func() error {
		return s.gs.Query("SELECT balance FROM "+tbl+" WHERE account = ? LIMIT 1", account).
			WithContext(ctx).Consistency(serial).Scan(&bal)
	})
	if err != nil {
		// Nothing was written yet: the read's failure is the operation's, and definite.
		return budget.Outcome{Balance: -1}, fmt.Errorf("cql decrement: read: %w", classifyRead(err))
	}
	conflicts := 0
	for {
		if bal <= 0 {
			return budget.Outcome{Balance: bal, Conflicts: conflicts}, nil
		}
		var cur int64
		var applied bool
		err := s.exec(ctx, func() error {
			var err error
			applied, err = s.gs.Query("UPDATE "+tbl+" SET balance = ? WHERE account = ? IF balance = ?", bal-1, account, bal).
				WithContext(ctx).ScanCAS(&cur)
			return err
		})
		if out, done, err := casEnd(bal, conflicts, applied, err); done {
			return out, err
		}
		conflicts++
		bal = cur
	}
}

func (s *budgetSession) decrementIdempotent(ctx context.Context, account, opID string) (budget.Outcome, error) {
	tbl := s.c.table("budget")
	serial := gocql.Consistency(s.c.cfg.SerialConsistency)
	conflicts := 0
	for {
		var (
			bal, after int64
			recorded   bool
		)
		err := s.exec(ctx, func() error {
			it := s.gs.Query("SELECT op, balance, after FROM "+tbl+" WHERE account = ? AND op IN (?, ?)", account, headOp, opID).
				WithContext(ctx).Consistency(serial).Iter()
			var op string
			var b int64
			var a *int64
			found := false
			for it.Scan(&op, &b, &a) {
				found = true
				bal = b
				if op == opID && op != headOp && a != nil {
					recorded, after = true, *a
				}
			}
			if err := it.Close(); err != nil {
				return err
			}
			if !found {
				return errors.New("account partition has no head row")
			}
			return nil
		})
		if err != nil {
			// Earlier tries of this call all lost their race, so nothing of this call
			// was written: the read's failure is definite.
			return budget.Outcome{Balance: -1, Conflicts: conflicts}, fmt.Errorf("cql decrement: read: %w", classifyRead(err))
		}
		if recorded {
			return budget.Outcome{Applied: true, Balance: after, Conflicts: conflicts, Replayed: true}, nil
		}
		if bal <= 0 {
			return budget.Outcome{Balance: bal, Conflicts: conflicts}, nil
		}
		var applied bool
		err = s.exec(ctx, func() error {
			b := s.gs.NewBatch(gocql.LoggedBatch).WithContext(ctx)
			b.Query("UPDATE "+tbl+" SET balance = ? WHERE account = ? IF balance = ?", bal-1, account, bal)
			b.Query("INSERT INTO "+tbl+" (account, op, after) VALUES (?, ?, ?)", account, opID, bal-1)
			var err error
			var it *gocql.Iter
			applied, it, err = s.gs.MapExecuteBatchCAS(b, map[string]any{})
			if it != nil {
				if cerr := it.Close(); err == nil {
					err = cerr
				}
			}
			return err
		})
		if out, done, err := casEnd(bal, conflicts, applied, err); done {
			return out, err
		}
		conflicts++
	}
}

// casEnd says whether a decrement's conditional write from bal ended the call, and how:
// an error (classified: the write may have applied), or applied. A write that was not
// applied lost its race and ends nothing: the caller counts a conflict and tries again.
func casEnd(bal int64, conflicts int, applied bool, err error) (budget.Outcome, bool, error) {
	if err != nil {
		return budget.Outcome{Balance: -1, Conflicts: conflicts}, true, fmt.Errorf("cql decrement: %w", Classify(err))
	}
	if applied {
		return budget.Outcome{Applied: true, Balance: bal - 1, Conflicts: conflicts}, true, nil
	}
	return budget.Outcome{}, false, nil
}
