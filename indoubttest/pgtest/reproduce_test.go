package pgtest_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// A failed check prints how to make the failure again: the go test command of the test
// alone, and the commit faults it met as listed faults. Armed in place of the test's
// probability, those fire at exactly the same commit points, and the same code fails
// the same way.
func TestFailedCheckPrintsItsReproducer(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	// naive decrements a balance of 20 ten times, retrying any error up to 3 times.
	naive := func(t *testing.T, arm ...string) (string, []uint64) {
		srv := pgtest.Postgres(t)
		ctx := context.Background()
		direct, err := pgx.Connect(ctx, srv.DirectDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer direct.Close(ctx)
		if _, err := direct.Exec(ctx, `CREATE TABLE acct (balance bigint); INSERT INTO acct VALUES (20)`); err != nil {
			t.Fatal(err)
		}
		srv.Arm(arm...)
		rec := indoubttest.NewRecorder(t, srv)
		w := rec.Worker()
		for range 10 {
			op := w.Invoke("decrement", nil)
			var balance int64
			for range 3 {
				if err = decrement(ctx, srv.DSN, &balance); err == nil {
					break
				}
				op.Retried(err)
			}
			op.Done(indoubttest.Applied(balance), err)
		}
		srv.Disarm()
		var final int64
		if err := direct.QueryRow(ctx, `SELECT balance FROM acct`).Scan(&final); err != nil {
			t.Fatal(err)
		}
		rec.Read("read", indoubttest.Balance(final))
		rep := indoubttest.Evaluate(t, rec, indoubttest.Budget(20))
		var points []uint64
		for _, e := range srv.Events() {
			points = append(points, e.Point)
		}
		if rep.Verdict != checker.Invalid {
			return "", points
		}
		return rep.Text, points
	}
	var listed []string
	var points []uint64
	t.Run("random", func(t *testing.T) {
		msg, pts := naive(t, "commit-cut:0.3")
		if len(pts) == 0 || msg == "" {
			t.Fatalf("no cut, or no failure (%d cuts): the naive retry was not caught\n%s", len(pts), msg)
		}
		want := "go test -count=1 -run '^TestFailedCheckPrintsItsReproducer$/^random$' ."
		if !strings.Contains(msg, want) {
			t.Errorf("no re-run command %q in:\n%s", want, msg)
		}
		_, arm, ok := strings.Cut(msg, "srv.Arm(")
		if !ok {
			t.Fatalf("no listed faults in:\n%s", msg)
		}
		arm, _, _ = strings.Cut(arm, ")")
		for _, m := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(arm, -1) {
			listed = append(listed, m[1])
		}
		for _, p := range pts {
			if !slices.Contains(listed, fmt.Sprintf("commit-cut@commit:%d", p)) {
				t.Errorf("the cut at point %d is not listed: %v", p, listed)
			}
		}
		points = pts
		t.Logf("failed as it should:\n%s", msg)
	})
	if len(listed) == 0 {
		return
	}
	t.Run("listed", func(t *testing.T) {
		msg, pts := naive(t, listed...)
		if !slices.Equal(pts, points) {
			t.Errorf("listed faults fired at %v, the random ones at %v", pts, points)
		}
		if msg == "" {
			t.Errorf("the listed faults did not make the same code fail")
		}
	})
}

// decrement takes one from the balance on a connection of its own.
func decrement(ctx context.Context, dsn string, balance *int64) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, `UPDATE acct SET balance = balance - 1 RETURNING balance`).Scan(balance)
}
