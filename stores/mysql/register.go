package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

// RegisterStore is the register workload's view of a Client.
type RegisterStore struct{ *Client }

var (
	_ register.Store   = RegisterStore{}
	_ register.Session = (*registerSession)(nil)
)

// Register returns the register workload's view of c.
func (c *Client) Register() RegisterStore { return RegisterStore{c} }

// registerSchema: one row per key, and the op ids of the idempotent path, recorded in
// the same transaction as the effect.
var registerSchema = []string{
	`CREATE TABLE IF NOT EXISTS indoubt_register (k VARCHAR(128) PRIMARY KEY, value BIGINT NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS indoubt_register_ops (op_id VARCHAR(128) PRIMARY KEY, ok BOOL) ENGINE=InnoDB`,
}

// RegisterMechanism describes the register operations.
func (RegisterStore) RegisterMechanism() string {
	return "SELECT / INSERT ... ON DUPLICATE KEY UPDATE / conditional UPDATE"
}

// Reset creates the schema and removes every register and recorded op id.
func (s RegisterStore) Reset(ctx context.Context) error {
	for _, q := range registerSchema {
		if err := s.Exec(ctx, q); err != nil {
			return fmt.Errorf("mysql: create register schema: %w", err)
		}
	}
	for _, q := range []string{`TRUNCATE TABLE indoubt_register`, `TRUNCATE TABLE indoubt_register_ops`} {
		if err := s.Exec(ctx, q); err != nil {
			return fmt.Errorf("mysql: reset registers: %w", err)
		}
	}
	return nil
}

// Session dials one connection for a worker.
func (s RegisterStore) Session(ctx context.Context) (register.Session, error) {
	rs := &registerSession{session: session{db: s.db}}
	if _, err := rs.acquire(ctx); err != nil {
		return nil, err
	}
	return rs, nil
}

type registerSession struct{ session }

const (
	registerUpsert = `INSERT INTO indoubt_register (k, value) VALUES (?, ?) ON DUPLICATE KEY UPDATE value = VALUES(value)`
	// The connection reports matched rows (clientFoundRows), so a CAS whose from and to
	// are equal still counts its row.
	registerCAS = `UPDATE indoubt_register SET value = ? WHERE k = ? AND value = ?`
)

func (s *registerSession) Read(ctx context.Context, key string) (int64, bool, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return 0, false, err
	}
	var v int64
	err = conn.QueryRowContext(ctx, `SELECT value FROM indoubt_register WHERE k = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, s.fail(err)
	}
	return v, true, nil
}

func (s *registerSession) Write(ctx context.Context, req workloads.Request, key string, value int64) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	if !req.Idempotent {
		_, err = conn.ExecContext(ctx, registerUpsert, key, value)
		return s.fail(err)
	}
	err = inTx(ctx, conn, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO indoubt_register_ops (op_id, ok) VALUES (?, true)`, req.OpID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			// Recorded before: the write was applied then.
			return err
		}
		_, err = tx.ExecContext(ctx, registerUpsert, key, value)
		return err
	})
	return s.fail(err)
}

func (s *registerSession) CAS(ctx context.Context, req workloads.Request, key string, from, to int64) (bool, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return false, err
	}
	if !req.Idempotent {
		res, err := conn.ExecContext(ctx, registerCAS, to, key, from)
		if err != nil {
			return false, s.fail(err)
		}
		n, err := res.RowsAffected()
		return n == 1, s.fail(err)
	}
	var ok bool
	err = inTx(ctx, conn, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO indoubt_register_ops (op_id) VALUES (?)`, req.OpID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			var was sql.NullBool
			err := tx.QueryRowContext(ctx, `SELECT ok FROM indoubt_register_ops WHERE op_id = ? LOCK IN SHARE MODE`, req.OpID).Scan(&was)
			ok = was.Bool
			return err
		}
		if res, err = tx.ExecContext(ctx, registerCAS, to, key, from); err != nil {
			return err
		}
		if n, err = res.RowsAffected(); err != nil {
			return err
		}
		ok = n == 1
		_, err = tx.ExecContext(ctx, `UPDATE indoubt_register_ops SET ok = ? WHERE op_id = ?`, ok, req.OpID)
		return err
	})
	return ok, s.fail(err)
}
