package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

var (
	_ budget.Store   = (*Client)(nil)
	_ budget.Session = (*budgetSession)(nil)
)

// DecrementSQL is the stand's conditional UPDATE; the benchmark script runs the same
// statement in pgbench.
const DecrementSQL = `UPDATE indoubt_account SET balance = balance - 1 WHERE id = 1 AND balance > 0`

// budgetSchema creates the account and, for the idempotent path, the table of op ids
// and a procedure that records the op id and applies the decrement in one statement.
// The procedure inserts the op id first: a concurrent attempt with the same id then
// waits on the unique index and, once it sees the row, replays its outcome instead of
// applying again. It is a procedure, called with CALL, rather than a function called by
// SELECT, so that the statement says it writes: the commit faults (and any reader of
// the SQL) can tell it from a read.
const budgetSchema = `
CREATE TABLE IF NOT EXISTS indoubt_account (id int PRIMARY KEY, balance bigint NOT NULL);
CREATE TABLE IF NOT EXISTS indoubt_budget_ops (op_id text PRIMARY KEY, applied boolean, balance bigint);
CREATE OR REPLACE PROCEDURE indoubt_budget_take(p_op text, INOUT applied boolean DEFAULT NULL, INOUT balance bigint DEFAULT NULL, INOUT replayed boolean DEFAULT NULL)
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO indoubt_budget_ops(op_id) VALUES (p_op) ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    SELECT o.applied, o.balance INTO applied, balance FROM indoubt_budget_ops o WHERE o.op_id = p_op;
    replayed := true;
    RETURN;
  END IF;
  replayed := false;
  UPDATE indoubt_account a SET balance = a.balance - 1 WHERE a.id = 1 AND a.balance > 0 RETURNING a.balance INTO balance;
  applied := FOUND;
  IF NOT applied THEN balance := 0; END IF;
  UPDATE indoubt_budget_ops o SET applied = indoubt_budget_take.applied, balance = indoubt_budget_take.balance WHERE o.op_id = p_op;
END $$;`

// Mechanism names the decrement mechanism for reports.
func (c *Client) Mechanism() string {
	if c.mech == Transaction {
		return "conditional UPDATE in BEGIN/COMMIT"
	}
	return "conditional UPDATE"
}

// Reset creates the schema if needed, sets the balance and forgets recorded op ids.
func (c *Client) Reset(ctx context.Context, amount int64) error {
	if err := c.Exec(ctx, budgetSchema); err != nil {
		return fmt.Errorf("postgres: create budget schema: %w", err)
	}
	if err := c.Exec(ctx, `TRUNCATE indoubt_budget_ops`); err != nil {
		return fmt.Errorf("postgres: reset op ids: %w", err)
	}
	err := c.Exec(ctx, `INSERT INTO indoubt_account(id, balance) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance`, amount)
	if err != nil {
		return fmt.Errorf("postgres: reset balance: %w", err)
	}
	return nil
}

// Balance reads the balance.
func (c *Client) Balance(ctx context.Context) (int64, error) {
	var b int64
	err := c.pool.QueryRow(ctx, `SELECT balance FROM indoubt_account WHERE id = 1`).Scan(&b)
	var pgErr *pgconn.PgError
	if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		// No row, or no table (undefined_table): the server lost the account.
		return 0, fmt.Errorf("postgres: read balance: %w: %v", budget.ErrNoAccount, err)
	}
	if err != nil {
		return 0, fmt.Errorf("postgres: read balance: %w", Classify(err))
	}
	return b, nil
}

// Session acquires one connection for a worker.
func (c *Client) Session(ctx context.Context) (budget.Session, error) {
	s := &budgetSession{session: session{pool: c.pool}, mech: c.mech}
	if _, err := s.acquire(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

type budgetSession struct {
	session
	mech Mechanism
	// prepared is the connection DecrementSQL was prepared on. pgx sends a statement
	// without arguments by the simple protocol (Parse and plan on every call); prepared
	// under its own text, Exec sends it as Bind/Execute/Sync, as pgbench -M prepared
	// does: the same statement and commit, less of the server's time per call.
	prepared *pgx.Conn
}

// prepare prepares DecrementSQL on conn once. Nothing is executed, so a failure, a cut
// connection included, is definite.
func (s *budgetSession) prepare(ctx context.Context, conn *pgx.Conn) error {
	if s.prepared == conn {
		return nil
	}
	if _, err := conn.Prepare(ctx, DecrementSQL, DecrementSQL); err != nil {
		err = fmt.Errorf("prepare decrement: %w", err)
		if c := Classify(err); !errors.Is(c, workloads.ErrUnknown) {
			return c
		}
		return workloads.Definite(err, workloads.NetReason(err))
	}
	s.prepared = conn
	return nil
}

// Decrement takes 1 if the balance is positive.
func (s *budgetSession) Decrement(ctx context.Context, req workloads.Request) (budget.Outcome, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return budget.Outcome{}, err
	}
	if !req.Idempotent {
		if err := s.prepare(ctx, conn); err != nil {
			return budget.Outcome{}, err
		}
	}
	var out budget.Outcome
	if s.mech == Transaction {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var e error
			out, e = decrementOn(ctx, tx, req)
			return e
		})
	} else {
		out, err = decrementOn(ctx, conn, req)
	}
	if err != nil {
		return budget.Outcome{}, Classify(err)
	}
	return out, nil
}

// execer is what both *pgx.Conn and pgx.Tx offer.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func decrementOn(ctx context.Context, q execer, req workloads.Request) (budget.Outcome, error) {
	if req.Idempotent {
		var applied, replayed bool
		var bal int64
		if err := q.QueryRow(ctx, `CALL indoubt_budget_take($1)`, req.OpID).Scan(&applied, &bal, &replayed); err != nil {
			return budget.Outcome{}, err
		}
		return budget.Outcome{Applied: applied, Balance: bal, Replayed: replayed}, nil
	}
	tag, err := q.Exec(ctx, DecrementSQL)
	if err != nil {
		return budget.Outcome{}, err
	}
	if tag.RowsAffected() == 1 {
		return budget.Outcome{Applied: true, Balance: -1}, nil
	}
	return budget.Outcome{Applied: false, Balance: 0}, nil
}
