package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/bank"
)

var (
	_ bank.Store   = (*Bank)(nil)
	_ bank.Session = (*bankSession)(nil)
)

const (
	bankReadSQL  = `SELECT id, balance FROM indoubt_bank ORDER BY id`
	bankOneSQL   = `SELECT balance FROM indoubt_bank WHERE id = ?`
	bankWriteSQL = `UPDATE indoubt_bank SET balance = ? WHERE id = ?`
)

// Bank is the bank workload's store on a Client: one row per account,
//
//	START TRANSACTION
//	SELECT balance FROM indoubt_bank WHERE id = FROM   (and TO)
//	UPDATE indoubt_bank SET balance = READ - AMOUNT WHERE id = FROM
//	UPDATE indoubt_bank SET balance = READ + AMOUNT WHERE id = TO
//	COMMIT
//
// at the configured level, set on each connection and read back. The writes are the
// values computed from the reads, so a transaction that writes over an update it did
// not read (InnoDB's REPEATABLE READ lets it: Hermitage's P4) changes the total. A
// read of every account is one SELECT in its own transaction at the same level.
type Bank struct {
	c   *Client
	iso Isolation
}

// NewBank returns the bank on c at level iso (Serializable when empty).
func NewBank(c *Client, iso Isolation) (*Bank, error) {
	if iso == "" {
		iso = Serializable
	}
	if _, err := choice.Parse("isolation", iso, Isolations...); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	return &Bank{c: c, iso: iso}, nil
}

// Mechanism describes a transfer.
func (b *Bank) Mechanism() string {
	return "SELECT both balances, UPDATE each to the value computed from them, at " + b.iso.sql()
}

// Reset creates the accounts.
func (b *Bank) Reset(ctx context.Context, n int, initial int64) error {
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS indoubt_bank (id INT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`,
		`DELETE FROM indoubt_bank`,
	} {
		if err := b.c.Exec(ctx, q); err != nil {
			return fmt.Errorf("mysql: reset bank: %w", err)
		}
	}
	for a := range n {
		if err := b.c.Exec(ctx, `INSERT INTO indoubt_bank (id, balance) VALUES (?, ?)`, a, initial); err != nil {
			return fmt.Errorf("mysql: create account %d: %w", a, err)
		}
	}
	return nil
}

// Balances reads every account in one statement.
func (b *Bank) Balances(ctx context.Context) (map[int]int64, error) {
	rows, err := b.c.db.QueryContext(ctx, bankReadSQL)
	if err != nil {
		return nil, fmt.Errorf("mysql: read accounts: %w", Classify(err))
	}
	m, err := scanAccounts(rows)
	if err != nil {
		return nil, fmt.Errorf("mysql: read accounts: %w", Classify(err))
	}
	return m, nil
}

func scanAccounts(rows *sql.Rows) (map[int]int64, error) {
	defer rows.Close()
	m := map[int]int64{}
	for rows.Next() {
		var id int
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return nil, err
		}
		m[id] = v
	}
	return m, rows.Err()
}

// Session dials a worker's connection and sets its level.
func (b *Bank) Session(ctx context.Context) (bank.Session, error) {
	s := &bankSession{counterSession: counterSession{session: session{db: b.c.db}, k: &Counter{iso: b.iso}}}
	if _, err := s.level(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// bankSession keeps its connection at the bank's level as the counter's sessions do.
type bankSession struct{ counterSession }

func (s *bankSession) Transfer(ctx context.Context, req workloads.Request, from, to int, amount int64) (bool, error) {
	if err := workloads.Start(ctx); err != nil {
		return false, err
	}
	conn, err := s.level(ctx)
	if err != nil {
		return false, err
	}
	ok := false
	err = inTx(ctx, conn, func(tx *sql.Tx) error {
		var a, b int64
		if err := tx.QueryRowContext(ctx, bankOneSQL, from).Scan(&a); err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, bankOneSQL, to).Scan(&b); err != nil {
			return err
		}
		if a < amount {
			return nil // refused: nothing written, the empty transaction commits
		}
		if _, err := tx.ExecContext(ctx, bankWriteSQL, a-amount, from); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, bankWriteSQL, b+amount, to); err != nil {
			return err
		}
		ok = true
		return nil
	})
	if err != nil {
		return false, s.fail(err)
	}
	return ok, nil
}

func (s *bankSession) Read(ctx context.Context) (map[int]int64, error) {
	conn, err := s.level(ctx)
	if err != nil {
		return nil, err
	}
	var m map[int]int64
	err = inTx(ctx, conn, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, bankReadSQL)
		if err != nil {
			return err
		}
		m, err = scanAccounts(rows)
		return err
	})
	if err != nil {
		return nil, s.fail(err)
	}
	return m, nil
}
