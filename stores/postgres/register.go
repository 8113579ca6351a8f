package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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

// registerSchema: one row per key. The idempotent path records the op id and the
// outcome in the same statement as the effect, through procedures that insert the op id
// first, as indoubt_budget_take does for the budget.
const registerSchema = `
CREATE TABLE IF NOT EXISTS indoubt_register (key text PRIMARY KEY, value bigint NOT NULL);
CREATE TABLE IF NOT EXISTS indoubt_register_ops (op_id text PRIMARY KEY, ok boolean);
CREATE OR REPLACE PROCEDURE indoubt_register_write(p_op text, p_key text, p_value bigint, INOUT replayed boolean DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO indoubt_register_ops(op_id, ok) VALUES (p_op, true) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN replayed := true; RETURN; END IF;
  replayed := false;
  INSERT INTO indoubt_register(key, value) VALUES (p_key, p_value)
    ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value;
END $$;
CREATE OR REPLACE PROCEDURE indoubt_register_cas(p_op text, p_key text, p_from bigint, p_to bigint, INOUT ok boolean DEFAULT NULL, INOUT replayed boolean DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO indoubt_register_ops(op_id) VALUES (p_op) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    SELECT o.ok INTO ok FROM indoubt_register_ops o WHERE o.op_id = p_op;
    replayed := true;
    RETURN;
  END IF;
  replayed := false;
  UPDATE indoubt_register SET value = p_to WHERE key = p_key AND value = p_from;
  ok := FOUND;
  UPDATE indoubt_register_ops o SET ok = indoubt_register_cas.ok WHERE o.op_id = p_op;
END $$;`

// RegisterMechanism describes the register operations.
func (RegisterStore) RegisterMechanism() string {
	return "SELECT / upsert / conditional UPDATE"
}

// Reset creates the schema and removes every register and recorded op id.
func (s RegisterStore) Reset(ctx context.Context) error {
	if err := s.Exec(ctx, registerSchema); err != nil {
		return fmt.Errorf("postgres: create register schema: %w", err)
	}
	if err := s.Exec(ctx, `TRUNCATE indoubt_register, indoubt_register_ops`); err != nil {
		return fmt.Errorf("postgres: reset registers: %w", err)
	}
	return nil
}

// Session acquires one connection for a worker.
func (s RegisterStore) Session(ctx context.Context) (register.Session, error) {
	rs := &registerSession{session: session{pool: s.pool}}
	if _, err := rs.acquire(ctx); err != nil {
		return nil, err
	}
	return rs, nil
}

type registerSession struct{ session }

func (s *registerSession) Read(ctx context.Context, key string) (int64, bool, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return 0, false, err
	}
	var v int64
	err = conn.QueryRow(ctx, `SELECT value FROM indoubt_register WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, Classify(err)
	}
	return v, true, nil
}

func (s *registerSession) Write(ctx context.Context, req workloads.Request, key string, value int64) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	if req.Idempotent {
		var replayed bool
		err = conn.QueryRow(ctx, `CALL indoubt_register_write($1, $2, $3)`, req.OpID, key, value).Scan(&replayed)
	} else {
		_, err = conn.Exec(ctx, `INSERT INTO indoubt_register(key, value) VALUES ($1, $2)
			ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value`, key, value)
	}
	return Classify(err)
}

func (s *registerSession) CAS(ctx context.Context, req workloads.Request, key string, from, to int64) (bool, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return false, err
	}
	if req.Idempotent {
		var ok, replayed bool
		err = conn.QueryRow(ctx, `CALL indoubt_register_cas($1, $2, $3, $4)`, req.OpID, key, from, to).Scan(&ok, &replayed)
		return ok, Classify(err)
	}
	tag, err := conn.Exec(ctx, `UPDATE indoubt_register SET value = $3 WHERE key = $1 AND value = $2`, key, from, to)
	if err != nil {
		return false, Classify(err)
	}
	return tag.RowsAffected() == 1, nil
}
