package pgtest_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// cuts runs 20 inserts one after the other, each on a connection of its own, under
// commit-cut:0.5, and says which were cut.
func cuts(t *testing.T, srv *indoubttest.Server) []int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, srv.DirectDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS c (n int)`); err != nil {
		t.Fatal(err)
	}
	srv.Arm("commit-cut:0.5")
	defer srv.Disarm()
	var out []int
	for i := range 20 {
		c, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `INSERT INTO c VALUES (1)`); err != nil {
			out = append(out, i)
		}
		c.Close(ctx)
	}
	return out
}

// The fault seed: the Seed option, INDOUBT_SEED, or Seeds' subtests, each giving the
// same decisions for the same commits; a failure prints the command that runs the test
// again with its seed.
func TestSeeds(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	t.Run("same seed, same decisions", func(t *testing.T) {
		a := cuts(t, pgtest.Postgres(t, indoubttest.Seed(7)))
		b := cuts(t, pgtest.Postgres(t, indoubttest.Seed(7)))
		c := cuts(t, pgtest.Postgres(t, indoubttest.Seed(8)))
		if !slices.Equal(a, b) || len(a) == 0 || len(a) == 20 {
			t.Fatalf("seed 7 cut %v, then %v: want the same, some and not all", a, b)
		}
		if slices.Equal(a, c) {
			t.Errorf("seeds 7 and 8 cut the same inserts %v", a)
		}
	})
	var seen []int64
	indoubttest.Seeds(t, 3, func(t *testing.T, seed int64) {
		if !strings.HasSuffix(t.Name(), fmt.Sprintf("/seed=%d", seed)) {
			t.Errorf("subtest %s for seed %d", t.Name(), seed)
		}
		rec := indoubttest.NewRecorder(t, pgtest.Postgres(t))
		rec.Worker().Invoke("decrement", nil).Ok(indoubttest.Applied(0))
		rec.Read("read", indoubttest.Balance(0))
		if r := indoubttest.Evaluate(t, rec, indoubttest.Budget(1)); r.Seed != seed {
			t.Errorf("the server's seed is %d, want the subtest's %d", r.Seed, seed)
		}
		seen = append(seen, seed)
	})
	if len(seen) != 3 || seen[0] == seen[1] || seen[1] == seen[2] || seen[0] == seen[2] {
		t.Errorf("seeds %v: want 3 distinct ones", seen)
	}
	t.Run("INDOUBT_SEED", func(t *testing.T) {
		t.Setenv("INDOUBT_SEED", "12345")
		var ran []int64
		indoubttest.Seeds(t, 3, func(t *testing.T, seed int64) { ran = append(ran, seed) })
		if !slices.Equal(ran, []int64{12345}) {
			t.Errorf("with INDOUBT_SEED=12345, Seeds ran %v", ran)
		}
		c := &capture{TB: t}
		rec := indoubttest.NewRecorder(c, pgtest.Postgres(t))
		rec.Worker().Invoke("decrement", nil).Ok(indoubttest.Applied(0))
		rec.Read("read", indoubttest.Balance(-1))
		r := indoubttest.Check(c, rec, indoubttest.Budget(1))
		forget(t, r.RunDir)
		msg := strings.Join(c.msgs, "\n")
		want := regexp.MustCompile(`fault seed 12345; the same fault decisions again: \(cd \S+/indoubttest/pgtest && INDOUBT_SEED=12345 go test -count=1 -run '\^TestSeeds\$/\^INDOUBT_SEED\$' \.\)`)
		if r.Seed != 12345 || !want.MatchString(msg) {
			t.Errorf("seed %d; the message does not give the command:\n%s", r.Seed, msg)
		}
		if got := cuts(t, pgtest.Postgres(t, indoubttest.Seed(99))); len(got) == 0 {
			t.Errorf("no cut at probability 0.5 over 20 inserts")
		}
	})
}
