package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// listAppend runs workers goroutines of n list-append transactions each, at the
// isolation level given, through the proxied pool: each transaction 2 to 4 micro-ops
// over 3 keys, an append being an upsert that extends the key's array, a read a SELECT
// of it. A serialization failure (40001) is retried, recorded with Retried.
func listAppend(t *testing.T, rec *indoubttest.Recorder, pool *pgxpool.Pool, level pgx.TxIsoLevel, workers, n int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		w := rec.Worker()
		rng := rand.New(rand.NewPCG(uint64(i), 41))
		wg.Go(func() {
			for range n {
				var tx indoubttest.Txn
				for range 2 + rng.IntN(3) {
					key := fmt.Sprint("k", rng.IntN(3))
					if rng.IntN(2) == 0 {
						tx = append(tx, indoubttest.Append(key, next.Add(1)))
					} else {
						tx = append(tx, indoubttest.ReadList(key))
					}
				}
				op := w.Invoke("txn", tx)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				var err error
				for attempt := range 10 {
					if err = runTxn(ctx, pool, level, tx); err == nil || !serializationFailure(err) || attempt == 9 {
						break
					}
					op.Retried(err)
				}
				cancel()
				op.Done(tx, err)
			}
		})
	}
	wg.Wait()
}

func serializationFailure(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// runTxn runs the micro-ops of tx in one transaction, filling in what its reads saw.
func runTxn(ctx context.Context, pool *pgxpool.Pool, level pgx.TxIsoLevel, tx indoubttest.Txn) error {
	return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: level}, func(t pgx.Tx) error {
		for i := range tx {
			m := &tx[i]
			switch m.F {
			case "append":
				if _, err := t.Exec(ctx, `INSERT INTO lists (k, vals) VALUES ($1, ARRAY[$2::bigint])
					ON CONFLICT (k) DO UPDATE SET vals = lists.vals || $2::bigint`, m.Key, m.Value); err != nil {
					return err
				}
			case "r":
				var list []int64
				if err := t.QueryRow(ctx, `SELECT vals FROM lists WHERE k = $1`, m.Key).Scan(&list); err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				m.SawList(list)
			}
		}
		return nil
	})
}

// A Go test of one's own transactions with the list-append model: PostgreSQL at READ
// COMMITTED is caught not serializable, the failure naming the anomalies; at
// SERIALIZABLE (serialization failures retried) the same transactions are valid.
func TestListAppendIsolationLevels(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	t.Run("read committed is caught", func(t *testing.T) {
		srv := pgtest.Postgres(t)
		proxied, _ := pools(t, srv, `CREATE TABLE lists (k text PRIMARY KEY, vals bigint[] NOT NULL)`)
		// Concurrency makes the anomalies; on a loaded machine a round may see none,
		// so a few rounds are allowed before the case counts as not exercised.
		var rep *indoubttest.Report
		for round := range 4 {
			rec := indoubttest.NewRecorder(t, srv)
			listAppend(t, rec, proxied, pgx.ReadCommitted, 5, 30)
			rep = indoubttest.Evaluate(t, rec, indoubttest.ListAppend("serializable"))
			forget(t, rep.RunDir)
			if rep.Verdict == checker.Invalid {
				break
			}
			t.Logf("round %d: %v (%s)", round+1, rep.Verdict, rep.Summary)
		}
		if rep.Verdict != checker.Invalid {
			t.Fatalf("READ COMMITTED found serializable over 4 rounds of 150 transactions: %s", rep.Text)
		}
		kinds := map[string]bool{}
		for _, a := range rep.Anomalies {
			kinds[a.Kind] = true
			if !strings.Contains(rep.Text, a.Kind) {
				t.Errorf("the failure message does not name %s:\n%s", a.Kind, rep.Text)
			}
			if !rep.Found(a.Kind) {
				t.Errorf("Found(%q) is false for an anomaly of the report", a.Kind)
			}
		}
		t.Logf("READ COMMITTED: %s; anomalies %v", rep.Summary, kinds)
		if !strings.Contains(rep.Text, "list-append check failed") {
			t.Errorf("the message does not lead with the failed check:\n%s", rep.Text)
		}
	})
	t.Run("serializable is valid", func(t *testing.T) {
		srv := pgtest.Postgres(t)
		proxied, _ := pools(t, srv, `CREATE TABLE lists (k text PRIMARY KEY, vals bigint[] NOT NULL)`)
		rec := indoubttest.NewRecorder(t, srv)
		listAppend(t, rec, proxied, pgx.Serializable, 4, 25)
		indoubttest.Check(t, rec, indoubttest.ListAppend("serializable"))
	})
}
