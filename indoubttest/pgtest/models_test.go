package pgtest_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// The tests of this file hold the models a service needs (issue 41) to programs on a
// real PostgreSQL: reservations that take n units of stock and must be made exactly
// once, judged by two models on one history; transfers whose ids a log table keeps.

// errNoStock is a reservation refused because too little stock was left.
var errNoStock = errors.New("not enough stock")

const stockSchema = `CREATE TABLE stock (sku int PRIMARY KEY, qty bigint NOT NULL);
	INSERT INTO stock VALUES (1, 1000);
	CREATE TABLE reservations (op_id text NOT NULL, qty bigint NOT NULL);`

// naiveReserve takes n units and records the reservation in one transaction, with no
// idempotency key: a retry after a cut COMMIT takes the stock and reserves again.
func naiveReserve(pool *pgxpool.Pool) func(ctx context.Context, key string, n int64) (bool, error) {
	return func(ctx context.Context, key string, n int64) (bool, error) {
		return false, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE stock SET qty = qty - $1 WHERE sku = 1 AND qty >= $1`, n)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return errNoStock
			}
			_, err = tx.Exec(ctx, `INSERT INTO reservations (op_id, qty) VALUES ($1, $2)`, key, n)
			return err
		})
	}
}

// idempotentReserve records the reservation under its key first and takes the stock
// only when the row is new: a retry that finds it changes nothing (a replay).
func idempotentReserve(pool *pgxpool.Pool) func(ctx context.Context, key string, n int64) (bool, error) {
	return func(ctx context.Context, key string, n int64) (bool, error) {
		replayed := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO reservations (op_id, qty) VALUES ($1, $2) ON CONFLICT (op_id) DO NOTHING`, key, n)
			if err != nil {
				return err
			}
			if replayed = tag.RowsAffected() == 0; replayed {
				return nil
			}
			tag, err = tx.Exec(ctx, `UPDATE stock SET qty = qty - $1 WHERE sku = 1 AND qty >= $1`, n)
			if err == nil && tag.RowsAffected() == 0 {
				err = errNoStock
			}
			return err
		})
		return replayed, err
	}
}

// reserveAll runs workers goroutines of n reservations (recorded as f) of 1..5 units each, each retried
// until it succeeds (5 attempts at most); a refusal for want of stock is a failure.
func reserveAll(rec *indoubttest.Recorder, f string, workers, n int, reserve func(ctx context.Context, key string, n int64) (bool, error)) {
	var wg sync.WaitGroup
	for w := range workers {
		wk := rec.Worker()
		wg.Go(func() {
			for i := range n {
				units := int64(1 + (w+i)%5)
				op := wk.Invoke(f, indoubttest.Amount(units))
				ctx, cancel := context.WithTimeout(withOp(context.Background(), op), 20*time.Second)
				var replayed bool
				var err error
				for a := range 5 {
					if replayed, err = reserve(ctx, op.ID(), units); err == nil || errors.Is(err, errNoStock) || a == 4 {
						break
					}
					op.Retried(err)
				}
				cancel()
				switch {
				case errors.Is(err, errNoStock) && f == "decrement":
					op.Ok(indoubttest.Rejected()) // the budget alone observes the refusal
				case errors.Is(err, errNoStock):
					op.Fail(err)
				case err == nil && replayed:
					op.Ok(indoubttest.Replayed(-1))
				default:
					op.Done(indoubttest.Applied(-1), err)
				}
			}
		})
	}
	wg.Wait()
}

// reservations is the model of the reservation tests: the stock it takes (a budget of
// 1000 units) and the reservations it makes (exactly once), on one history.
func reservations() indoubttest.Model {
	return indoubttest.Models(
		indoubttest.Part{Name: "stock", Model: indoubttest.Budget(1000),
			Functions: map[string]string{"reserve": "decrement", "read": "read"}},
		indoubttest.Part{Name: "reservations", Model: indoubttest.ExactlyOnce(),
			Functions: map[string]string{"reserve": "apply", "read": "read"}})
}

// readReservations records the final state of both parts.
func readReservations(t *testing.T, rec *indoubttest.Recorder, direct *pgxpool.Pool) {
	t.Helper()
	var qty int64
	if err := direct.QueryRow(context.Background(), `SELECT qty FROM stock WHERE sku = 1`).Scan(&qty); err != nil {
		t.Fatal(err)
	}
	rec.Read("read", map[string]any{
		"stock":        indoubttest.Balance(qty),
		"reservations": finalCounts(t, direct, `SELECT op_id, count(*) FROM reservations GROUP BY op_id`),
	})
}

// A naive retry of reservations under commit cuts: both models judge the one history,
// and both find what the duplicated transactions did: stock taken beyond what any order
// of the reservations allows, and reservations made twice.
func TestReservationsTwoModelsNaive(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	proxied, direct := pools(t, srv, stockSchema)
	srv.Arm("commit-cut:0.3")
	rec := indoubttest.NewRecorder(t, srv)
	reserveAll(rec, "reserve", 2, 10, naiveReserve(proxied))
	srv.Disarm()
	readReservations(t, rec, direct)
	rep := indoubttest.Evaluate(t, rec, reservations())
	forget(t, rep.RunDir)
	if rep.Verdict != checker.Invalid {
		t.Fatalf("verdict %v, want invalid: a naive retry of 20 reservations under commit-cut:0.3:\n%s", rep.Verdict, rep.Text)
	}
	r := runResults(t, rep.RunDir)
	validResults(t, rep.RunDir)
	got := map[string]checker.Verdict{}
	for _, m := range r.Models {
		got[m.Name] = m.Verdict
	}
	if got["stock"] != checker.Invalid || got["reservations"] != checker.Invalid {
		t.Errorf("results.json models %+v: want both parts invalid", r.Models)
	}
	if !rep.Found("duplicate") {
		t.Errorf("no reservation named duplicate:\n%s", rep.Text)
	}
	for _, a := range rep.Anomalies {
		if !strings.HasPrefix(a.Explanation, "stock: ") && !strings.HasPrefix(a.Explanation, "reservations: ") {
			t.Errorf("an anomaly does not name its model: %s", a.Explanation)
		}
	}
}

// The same reservations keyed by their op id: every cut is a replay or applied once,
// and both models find the history valid.
func TestReservationsTwoModelsIdempotent(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	proxied, direct := pools(t, srv, strings.Replace(stockSchema, "op_id text NOT NULL", "op_id text PRIMARY KEY", 1))
	srv.Arm("commit-cut:0.3")
	rec := indoubttest.NewRecorder(t, srv)
	reserveAll(rec, "reserve", 2, 10, idempotentReserve(proxied))
	srv.Disarm()
	readReservations(t, rec, direct)
	rep := indoubttest.Check(t, rec, reservations())
	if rep.Verdict != checker.Valid {
		return // Check said why
	}
	r := runResults(t, rep.RunDir)
	if len(r.Models) != 2 || r.Models[0].Verdict != checker.Valid || r.Models[1].Verdict != checker.Valid {
		t.Errorf("results.json models %+v: want both parts valid", r.Models)
	}
}

// lostUpdateReserve reads the stock, then writes what it computed, at READ COMMITTED:
// two reservations that read the same quantity both take their units and one write
// overwrites the other (a lost update: stock left that was taken).
func lostUpdateReserve(pool *pgxpool.Pool) func(ctx context.Context, key string, n int64) (bool, error) {
	return func(ctx context.Context, key string, n int64) (bool, error) {
		return false, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var qty int64
			if err := tx.QueryRow(ctx, `SELECT qty FROM stock WHERE sku = 1`).Scan(&qty); err != nil {
				return err
			}
			if qty < n {
				return errNoStock
			}
			// Widen the window between the read and the write, as a slow service would.
			if _, err := tx.Exec(ctx, `SELECT pg_sleep(0.005)`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE stock SET qty = $1 WHERE sku = 1`, qty-n)
			return err
		})
	}
}

// A stock of 20 units and 12 reservations of 1 to 5 units (37 asked): the budget with
// amounts finds the lost updates of a read-then-write reservation, and holds a guarded
// UPDATE ... WHERE qty >= n valid, its refusals observed as rejections.
func TestStockAmounts(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	for _, c := range []struct {
		name    string
		reserve func(*pgxpool.Pool) func(context.Context, string, int64) (bool, error)
		want    checker.Verdict
	}{
		{"read then write", lostUpdateReserve, checker.Invalid},
		{"guarded update", idempotentReserve, checker.Valid},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := pgtest.Postgres(t)
			schema := strings.Replace(strings.Replace(stockSchema, "op_id text NOT NULL", "op_id text PRIMARY KEY", 1), "(1, 1000)", "(1, 20)", 1)
			proxied, direct := pools(t, srv, schema)
			rec := indoubttest.NewRecorder(t, srv)
			reserveAll(rec, "decrement", 3, 4, c.reserve(proxied))
			var qty int64
			if err := direct.QueryRow(context.Background(), `SELECT qty FROM stock WHERE sku = 1`).Scan(&qty); err != nil {
				t.Fatal(err)
			}
			rec.Read("read", indoubttest.Balance(qty))
			rep := indoubttest.Evaluate(t, rec, indoubttest.Budget(20))
			forget(t, rep.RunDir)
			if rep.Verdict != c.want {
				t.Fatalf("verdict %v, want %v:\n%s", rep.Verdict, c.want, rep.Text)
			}
			if c.want == checker.Valid && strings.Contains(rep.Summary, " 0 rejected") {
				t.Errorf("no reservation was refused, so rejections are not exercised: %s", rep.Summary)
			}
		})
	}
}

const bankLogSchema = `CREATE TABLE acct (id text PRIMARY KEY, balance bigint NOT NULL CHECK (balance >= 0));
	INSERT INTO acct VALUES ('a', 100), ('b', 0);
	CREATE TABLE transfer_log (op_id text NOT NULL);`

// logFirstTransfer logs the transfer's id in a statement of its own before the
// transaction that moves the money: when the transfer fails (the balance would go
// below 0, and the transaction rolls back) its id stays logged.
func logFirstTransfer(ctx context.Context, pool *pgxpool.Pool, key string, t checker.Transfer) error {
	if _, err := pool.Exec(ctx, `INSERT INTO transfer_log (op_id) VALUES ($1)`, key); err != nil {
		return err
	}
	return moveMoney(ctx, pool, t, nil)
}

// loggedTransfer logs the id in the transaction that moves the money: both or neither.
func loggedTransfer(ctx context.Context, pool *pgxpool.Pool, key string, t checker.Transfer) error {
	return moveMoney(ctx, pool, t, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO transfer_log (op_id) VALUES ($1)`, key)
		return err
	})
}

func moveMoney(ctx context.Context, pool *pgxpool.Pool, t checker.Transfer, also func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE acct SET balance = balance - $1 WHERE id = $2`, t.Amount, t.From); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE acct SET balance = balance + $1 WHERE id = $2`, t.Amount, t.To); err != nil {
			return err
		}
		if also != nil {
			return also(tx)
		}
		return nil
	})
}

// Transfers of 30 from an account of 100, the fourth and later refused by the
// balance's CHECK: with the id logged outside the transaction, the refused transfers'
// ids stay logged, and the bank model reading the log names each (fail-applied); logged
// inside it, the history is valid, commit cuts and all.
func TestBankTransferLog(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	for _, c := range []struct {
		name     string
		transfer func(context.Context, *pgxpool.Pool, string, checker.Transfer) error
		want     checker.Verdict
	}{
		{"log outside the transaction", logFirstTransfer, checker.Invalid},
		{"log inside the transaction", loggedTransfer, checker.Valid},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := pgtest.Postgres(t)
			proxied, direct := pools(t, srv, bankLogSchema)
			srv.Arm("commit-cut:0.2")
			rec := indoubttest.NewRecorder(t, srv)
			w := rec.Worker()
			tr := checker.Transfer{From: "a", To: "b", Amount: 30}
			for range 6 {
				op := w.Invoke("transfer", tr)
				ctx, cancel := context.WithTimeout(withOp(context.Background(), op), 20*time.Second)
				err := c.transfer(ctx, proxied, op.ID(), tr)
				cancel()
				op.Done(nil, err) // no retry: a cut transfer is unknown
			}
			srv.Disarm()
			final := checker.BankLog{Balances: checker.Balances{}, Log: finalCounts(t, direct, `SELECT op_id, count(*) FROM transfer_log GROUP BY op_id`)}
			rows, err := direct.Query(context.Background(), `SELECT id, balance FROM acct`)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var id string
				var b int64
				if err := rows.Scan(&id, &b); err != nil {
					t.Fatal(err)
				}
				final.Balances[id] = b
			}
			rec.Read("read", final)
			rep := indoubttest.Evaluate(t, rec, indoubttest.Bank(checker.BankParams{Accounts: checker.Balances{"a": 100, "b": 0}, Log: true}))
			forget(t, rep.RunDir)
			if rep.Verdict != c.want {
				t.Fatalf("verdict %v, want %v:\n%s", rep.Verdict, c.want, rep.Text)
			}
			if c.want == checker.Invalid && !rep.Found("fail-applied") {
				t.Errorf("no refused transfer named fail-applied:\n%s", rep.Text)
			}
			validResults(t, rep.RunDir)
		})
	}
}
