package cql

import (
	"context"
	"errors"
	"fmt"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

var _ register.Store = (*Registers)(nil)

// Registers is the register store over a Client's cluster: one partition per register,
// its value a static column, its recorded op ids clustering rows. Get it from
// Client.Register.
type Registers struct{ c *Client }

// Register returns the register store over the same cluster and configuration.
func (c *Client) Register() *Registers { return &Registers{c} }

// Reset creates the schema if needed and starts a new generation of register partitions,
// so every key starts absent and no op id is recorded. The partitions of earlier
// generations are left in the table: CQL cannot delete partitions by prefix, and nothing
// reads them again.
func (r *Registers) Reset(ctx context.Context) error {
	if err := r.c.ensureSchema(ctx); err != nil {
		return fmt.Errorf("cql reset: %w", err)
	}
	r.c.mu.Lock()
	r.c.registers = "register-" + generation() + "/"
	r.c.mu.Unlock()
	return nil
}

func (r *Registers) partition(key string) (string, error) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	if r.c.registers == "" {
		return "", errors.New("cql register: Reset was not called")
	}
	return r.c.registers + key, nil
}

// Session opens one worker's gocql session.
func (r *Registers) Session(ctx context.Context) (register.Session, error) {
	s, err := r.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &registerSession{session: s, r: r}, nil
}

type registerSession struct {
	*session
	r *Registers
}

// Read reads the register at the serial consistency, which runs a Paxos round: it sees
// every LWT that completed before it and completes any left in progress.
func (s *registerSession) Read(ctx context.Context, key string) (int64, bool, error) {
	pk, err := s.r.partition(key)
	if err != nil {
		return 0, false, workloads.Definite(err, "no-reset")
	}
	var v *int64
	err = s.exec(ctx, func() error {
		return s.gs.Query("SELECT value FROM "+s.c.table("register")+" WHERE key = ? LIMIT 1", pk).
			WithContext(ctx).Consistency(gocql.Consistency(s.c.cfg.SerialConsistency)).Scan(&v)
	})
	if errors.Is(err, gocql.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("cql read: %w", classifyRead(err))
	}
	if v == nil {
		return 0, false, nil
	}
	return *v, true, nil
}

// Write sets the register through an LWT. Without Idempotent: UPDATE ... IF EXISTS, and
// for an absent register UPDATE ... IF value = null; a register created between the two
// makes the loop go round once more. With Idempotent: one INSERT of the op id's row and
// the value, IF NOT EXISTS, so a replay finds the row and writes nothing.
func (s *registerSession) Write(ctx context.Context, req workloads.Request, key string, value int64) error {
	pk, err := s.r.partition(key)
	if err != nil {
		return workloads.Definite(err, "no-reset")
	}
	tbl := s.c.table("register")
	if req.Idempotent {
		if req.OpID == "" {
			return workloads.Definite(errors.New("cql write: idempotent request without an op id"), "no-op-id")
		}
		// Not applied means the op id's row exists: the write was already done.
		err := s.exec(ctx, func() error {
			_, err := s.gs.Query("INSERT INTO "+tbl+" (key, op, value) VALUES (?, ?, ?) IF NOT EXISTS", pk, req.OpID, value).
				WithContext(ctx).MapScanCAS(map[string]any{})
			return err
		})
		if err != nil {
			return fmt.Errorf("cql write: %w", Classify(err))
		}
		return nil
	}
	for _, cond := range []string{"IF EXISTS", "IF value = null", "IF EXISTS"} {
		var applied bool
		err := s.exec(ctx, func() error {
			var err error
			applied, err = s.gs.Query("UPDATE "+tbl+" SET value = ? WHERE key = ? "+cond, value, pk).
				WithContext(ctx).MapScanCAS(map[string]any{})
			return err
		})
		if err != nil {
			return fmt.Errorf("cql write: %w", Classify(err))
		}
		if applied {
			return nil
		}
	}
	// Registers are never deleted, so the second IF EXISTS cannot miss.
	return workloads.Definite(errors.New("cql write: register neither exists nor is absent"), "write-lost")
}

// CAS sets the register to to if it holds from, with UPDATE ... IF value = from. With
// Idempotent the update and the insert of the op id's row (IF NOT EXISTS) form one
// conditional batch; when it does not apply and the op id's row is among the rows it
// returns, the CAS had applied before and CAS reports true again. A CAS that did not apply
// records nothing: its retry is evaluated afresh, which is linearizable, as the failed
// attempt changed nothing.
func (s *registerSession) CAS(ctx context.Context, req workloads.Request, key string, from, to int64) (bool, error) {
	pk, err := s.r.partition(key)
	if err != nil {
		return false, workloads.Definite(err, "no-reset")
	}
	tbl := s.c.table("register")
	if !req.Idempotent {
		var applied bool
		err := s.exec(ctx, func() error {
			var err error
			applied, err = s.gs.Query("UPDATE "+tbl+" SET value = ? WHERE key = ? IF value = ?", to, pk, from).
				WithContext(ctx).MapScanCAS(map[string]any{})
			return err
		})
		if err != nil {
			return false, fmt.Errorf("cql cas: %w", Classify(err))
		}
		return applied, nil
	}
	if req.OpID == "" {
		return false, workloads.Definite(errors.New("cql cas: idempotent request without an op id"), "no-op-id")
	}
	var applied, replayed bool
	err = s.exec(ctx, func() error {
		b := s.gs.NewBatch(gocql.LoggedBatch).WithContext(ctx)
		b.Query("UPDATE "+tbl+" SET value = ? WHERE key = ? IF value = ?", to, pk, from)
		b.Query("INSERT INTO "+tbl+" (key, op) VALUES (?, ?) IF NOT EXISTS", pk, req.OpID)
		row := map[string]any{}
		var it *gocql.Iter
		var err error
		applied, it, err = s.gs.MapExecuteBatchCAS(b, row)
		if err != nil {
			if it != nil {
				_ = it.Close()
			}
			return err
		}
		if !applied {
			replayed = row["op"] == req.OpID
			for it != nil && !replayed {
				row = map[string]any{}
				if !it.MapScan(row) {
					break
				}
				replayed = row["op"] == req.OpID
			}
		}
		if it != nil {
			return it.Close()
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("cql cas: %w", Classify(err))
	}
	return applied || replayed, nil
}
