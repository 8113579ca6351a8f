package pgtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// An order service that must answer a retry with the order it created the first time:
// the correct version reads the order id its idempotency record holds; the known-bad
// one answers a retry it recognises with a fresh order id. Both take the order once, so
// only the responses tell them apart: ExactlyOnceResponse holds each acknowledged
// response to the order the store keeps for its key.
func TestRetryReturnsTheOriginalResponse(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	for _, c := range []struct {
		name   string
		replay string // how a retry that finds its key answers
		want   checker.Verdict
	}{
		{"the stored order", `SELECT order_id FROM orders WHERE key = $1`, checker.Valid},
		{"a fresh order id (known bad)", `SELECT nextval('order_ids') WHERE $1::text IS NOT NULL`, checker.Invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := pgtest.Postgres(t)
			proxied, direct := pools(t, srv, `CREATE SEQUENCE order_ids;
				CREATE TABLE orders (key text PRIMARY KEY, order_id bigint NOT NULL DEFAULT nextval('order_ids'))`)
			place := func(ctx context.Context, key string) (any, error) {
				var id int64
				err := pgx.BeginFunc(ctx, proxied, func(tx pgx.Tx) error {
					var found bool
					if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM orders WHERE key = $1)`, key).Scan(&found); err != nil {
						return err
					}
					if found {
						return tx.QueryRow(ctx, c.replay, key).Scan(&id)
					}
					return tx.QueryRow(ctx, `INSERT INTO orders (key) VALUES ($1) RETURNING order_id`, key).Scan(&id)
				})
				return indoubttest.Response(id), err
			}
			srv.Arm("commit-cut:0.3")
			rec := indoubttest.NewRecorder(t, srv)
			applyAll(rec, 2, 10, place)
			srv.Disarm()
			stored := indoubttest.Responses{}
			rows, err := direct.Query(context.Background(), `SELECT key, order_id FROM orders`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var key string
				var id int64
				if err := rows.Scan(&key, &id); err != nil {
					t.Fatal(err)
				}
				stored[key] = append(stored[key], id)
			}
			if err := errors.Join(rows.Err()); err != nil {
				t.Fatal(err)
			}
			rec.Read("read", stored)
			r := indoubttest.Evaluate(t, rec, indoubttest.ExactlyOnceResponse())
			if r.Faults == 0 {
				t.Fatal("no fault fired at commit-cut:0.3 over 20 orders")
			}
			if r.Verdict != c.want || (c.want == checker.Invalid) != r.Found("response-mismatch") || r.Found("duplicate") {
				t.Fatalf("verdict %v, anomalies %+v: want %v, a response-mismatch only for the known-bad version:\n%s", r.Verdict, r.Anomalies, c.want, r.Text)
			}
		})
	}
}
