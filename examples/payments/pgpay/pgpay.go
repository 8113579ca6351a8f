// Package pgpay is the payments service on PostgreSQL (pgx v5): Naive, which retries any
// error, and Idempotent, which records the charge's key in the transaction that takes
// the credit.
package pgpay

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/examples/payments"
)

// Schema creates the account (id 1) and the table of charges by key.
const Schema = `
CREATE TABLE IF NOT EXISTS account (id int PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0));
CREATE TABLE IF NOT EXISTS charge (key text PRIMARY KEY, applied bool NOT NULL, balance bigint NOT NULL);
`

// Setup creates the schema and sets the account to credits.
func Setup(ctx context.Context, pool *pgxpool.Pool, credits int64) error {
	if _, err := pool.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	_, err := pool.Exec(ctx, `INSERT INTO account VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET balance = $1`, credits)
	return err
}

// Naive charges in a transaction and retries any error.
type Naive struct{ Pool *pgxpool.Pool }

// Idempotent charges in a transaction that also records the key, and answers a retry
// from that record.
type Idempotent struct{ Pool *pgxpool.Pool }

var (
	_ payments.Service = (*Naive)(nil)
	_ payments.Service = (*Idempotent)(nil)
)

const take = `UPDATE account SET balance = balance - 1 WHERE id = 1 AND balance > 0 RETURNING balance`

// Charge takes one credit; key is ignored.
func (s *Naive) Charge(ctx context.Context, key string) (payments.Receipt, error) {
	return payments.Retry(ctx, func(ctx context.Context) (payments.Receipt, error) {
		var r payments.Receipt
		err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			var err error
			r, err = takeCredit(ctx, tx)
			return err
		})
		return r, err
	})
}

// Charge takes one credit unless a charge with key is recorded, whose receipt it then
// returns.
func (s *Idempotent) Charge(ctx context.Context, key string) (payments.Receipt, error) {
	return payments.Retry(ctx, func(ctx context.Context) (payments.Receipt, error) {
		var r payments.Receipt
		err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			err := tx.QueryRow(ctx, `SELECT applied, balance FROM charge WHERE key = $1`, key).Scan(&r.Applied, &r.Balance)
			if err == nil {
				r.Replayed = true // charged before: the reply was lost
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if r, err = takeCredit(ctx, tx); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `INSERT INTO charge (key, applied, balance) VALUES ($1, $2, $3)`, key, r.Applied, r.Balance)
			return err
		})
		return r, err
	})
}

func takeCredit(ctx context.Context, tx pgx.Tx) (payments.Receipt, error) {
	var r payments.Receipt
	err := tx.QueryRow(ctx, take).Scan(&r.Balance)
	if errors.Is(err, pgx.ErrNoRows) {
		return payments.Receipt{Applied: false, Balance: 0}, nil
	}
	r.Applied = err == nil
	return r, err
}

// Balance reads the credits left.
func (s *Naive) Balance(ctx context.Context) (int64, error) { return balance(ctx, s.Pool) }

// Balance reads the credits left.
func (s *Idempotent) Balance(ctx context.Context) (int64, error) { return balance(ctx, s.Pool) }

func balance(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var b int64
	err := pool.QueryRow(ctx, `SELECT balance FROM account WHERE id = 1`).Scan(&b)
	return b, err
}
