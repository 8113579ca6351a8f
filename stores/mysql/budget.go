package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

var (
	_ budget.Store   = (*Client)(nil)
	_ budget.Session = (*budgetSession)(nil)
)

// DecrementSQL is the budget's conditional UPDATE.
const DecrementSQL = `UPDATE indoubt_account SET balance = balance - 1 WHERE id = 1 AND balance > 0`

var budgetSchema = []string{
	`CREATE TABLE IF NOT EXISTS indoubt_account (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS indoubt_budget_ops (op_id VARCHAR(128) PRIMARY KEY, applied BOOL, balance BIGINT) ENGINE=InnoDB`,
}

// Mechanism names the decrement mechanism for reports.
func (c *Client) Mechanism() string {
	if c.mech == Transaction {
		return "conditional UPDATE in START TRANSACTION/COMMIT"
	}
	return "conditional UPDATE"
}

// Reset creates the schema if needed, sets the balance and forgets recorded op ids.
func (c *Client) Reset(ctx context.Context, amount int64) error {
	for _, s := range budgetSchema {
		if err := c.Exec(ctx, s); err != nil {
			return fmt.Errorf("mysql: create budget schema: %w", err)
		}
	}
	if err := c.Exec(ctx, `TRUNCATE TABLE indoubt_budget_ops`); err != nil {
		return fmt.Errorf("mysql: reset op ids: %w", err)
	}
	err := c.Exec(ctx, `INSERT INTO indoubt_account (id, balance) VALUES (1, ?) ON DUPLICATE KEY UPDATE balance = VALUES(balance)`, amount)
	if err != nil {
		return fmt.Errorf("mysql: reset balance: %w", err)
	}
	return nil
}

// Balance reads the balance.
func (c *Client) Balance(ctx context.Context) (int64, error) {
	var b int64
	err := c.db.QueryRowContext(ctx, `SELECT balance FROM indoubt_account WHERE id = 1`).Scan(&b)
	var me *mysql.MySQLError
	if errors.Is(err, sql.ErrNoRows) || errors.As(err, &me) && me.Number == 1146 {
		// No row, or no table (ER_NO_SUCH_TABLE): the server lost the account.
		return 0, fmt.Errorf("mysql: read balance: %w: %v", budget.ErrNoAccount, err)
	}
	if err != nil {
		return 0, fmt.Errorf("mysql: read balance: %w", Classify(err))
	}
	return b, nil
}

// Session dials one connection for a worker.
func (c *Client) Session(ctx context.Context) (budget.Session, error) {
	s := &budgetSession{session: session{db: c.db}, mech: c.mech}
	if _, err := s.acquire(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

type budgetSession struct {
	session
	mech Mechanism
	// stmt is DecrementSQL prepared on the session's connection (COM_STMT_PREPARE once,
	// then COM_STMT_EXECUTE per decrement); on is the connection it was prepared on.
	stmt *sql.Stmt
	on   *sql.Conn
}

// prepare prepares DecrementSQL on conn once. Nothing is executed, so a failure, a cut
// connection included, is definite.
func (s *budgetSession) prepare(ctx context.Context, conn *sql.Conn) (*sql.Stmt, error) {
	if s.on == conn && s.stmt != nil {
		return s.stmt, nil
	}
	st, err := conn.PrepareContext(ctx, DecrementSQL)
	if err != nil {
		err = s.fail(fmt.Errorf("prepare decrement: %w", err))
		if errors.Is(err, workloads.ErrUnknown) {
			return nil, workloads.Definite(err, workloads.ReasonOf(err))
		}
		return nil, err
	}
	s.stmt, s.on = st, conn
	return st, nil
}

// Decrement takes 1 if the balance is positive.
func (s *budgetSession) Decrement(ctx context.Context, req workloads.Request) (budget.Outcome, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return budget.Outcome{}, err
	}
	if req.Idempotent {
		out, err := s.takeOnce(ctx, conn, req.OpID)
		if err != nil {
			return budget.Outcome{}, s.fail(err)
		}
		return out, nil
	}
	st, err := s.prepare(ctx, conn)
	if err != nil {
		return budget.Outcome{}, err
	}
	var res sql.Result
	if s.mech == Transaction {
		err = inTx(ctx, conn, func(tx *sql.Tx) error {
			var e error
			res, e = tx.StmtContext(ctx, st).ExecContext(ctx)
			return e
		})
	} else {
		res, err = st.ExecContext(ctx)
	}
	if err != nil {
		return budget.Outcome{}, s.fail(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return budget.Outcome{}, s.fail(err)
	}
	if n == 1 {
		return budget.Outcome{Applied: true, Balance: -1}, nil
	}
	return budget.Outcome{Applied: false, Balance: 0}, nil
}

// takeOnce records the op id and applies the decrement in one transaction. The op id
// goes in first: a concurrent attempt with the same id waits on its key and, once the
// first commits, finds it and replays its outcome instead of applying again.
func (s *budgetSession) takeOnce(ctx context.Context, conn *sql.Conn, op string) (budget.Outcome, error) {
	var out budget.Outcome
	err := inTx(ctx, conn, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO indoubt_budget_ops (op_id) VALUES (?)`, op)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			var applied sql.NullBool
			var bal sql.NullInt64
			err := tx.QueryRowContext(ctx, `SELECT applied, balance FROM indoubt_budget_ops WHERE op_id = ? LOCK IN SHARE MODE`, op).Scan(&applied, &bal)
			if err != nil {
				return err
			}
			out = budget.Outcome{Applied: applied.Bool, Balance: bal.Int64, Replayed: true}
			return nil
		}
		res, err = tx.ExecContext(ctx, DecrementSQL)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		out.Applied = n == 1
		if out.Applied {
			if err := tx.QueryRowContext(ctx, `SELECT balance FROM indoubt_account WHERE id = 1`).Scan(&out.Balance); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `UPDATE indoubt_budget_ops SET applied = ?, balance = ? WHERE op_id = ?`, out.Applied, out.Balance, op)
		return err
	})
	return out, err
}

// inTx runs f in a transaction on conn and commits it; any error rolls it back (a
// rollback that fails on a broken connection changes nothing: the server rolls back
// what it never saw committed).
func inTx(ctx context.Context, conn *sql.Conn, f func(*sql.Tx) error) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}
