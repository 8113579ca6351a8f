package runner_test

import (
	"context"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/workloads"
)

// The counter and insert workloads on MariaDB through the proxy, under commit cuts: a
// naive retry of a cut increment or of a cut INSERT with a key the server generates
// applies it twice (invalid); the idempotent increment and the INSERT of a key the
// client chose (its retry meets its own row) reconcile exactly. Each verdict is
// reproduced from the run directory alone.
func TestMySQLCounterAndInsertUnderCommitCuts(t *testing.T) {
	t.Parallel()
	m := startMariaDB(t)
	for _, tc := range []struct {
		name     string
		workload workloads.Name
		mech     string
		key      string
		retry    string
		want     checker.Verdict
	}{
		{"counter increment naive", workloads.Counter, "increment", "", "naive", checker.Invalid},
		{"counter for-update idempotent", workloads.Counter, "for-update", "", "idempotent", checker.Valid},
		{"insert identity naive", workloads.Insert, "", "identity", "naive", checker.Invalid},
		{"insert client-mono naive", workloads.Insert, "", "client-mono", "naive", checker.Valid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := runner.Config{Workload: tc.workload, Store: runner.MySQL, DSN: m.DSN, Mechanism: tc.mech, Key: tc.key,
				Workers: 4, Ops: 25, Seed: 1, Out: t.TempDir(), Retry: policy(t, tc.retry), Faults: parseSchedule(t, "commit-cut:0.3")}
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Verdict != tc.want {
				t.Fatalf("verdict %v, want %v: %s", res.Verdict, tc.want, res.Summary)
			}
			if c := res.Faults.Commits; c == nil || c.ChangedRows == 0 {
				t.Fatalf("commit faults %+v: want cuts proven to have changed rows", c)
			}
		})
	}
}

// The bank on one MariaDB: at SERIALIZABLE a transfer's reads lock the rows, so every
// read of the accounts sums to the total (valid); at REPEATABLE READ a transfer writes
// over an update it did not read, and reads see the total changed (invalid,
// not-conserved). Each verdict is reproduced from the run directory alone.
func TestMySQLBank(t *testing.T) {
	t.Parallel()
	m := startMariaDB(t)
	for _, tc := range []struct {
		iso  string
		want checker.Verdict
	}{{"serializable", checker.Valid}, {"repeatable-read", checker.Invalid}} {
		t.Run(tc.iso, func(t *testing.T) {
			cfg := runner.Config{Workload: workloads.Bank, Store: runner.MySQL, DSN: m.DSN, Isolation: tc.iso,
				Workers: 6, Ops: 60, Seed: 1, Out: t.TempDir(), Retry: policy(t, "none")}
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Verdict != tc.want {
				t.Fatalf("verdict %v, want %v: %s", res.Verdict, tc.want, res.Summary)
			}
			if tc.want == checker.Invalid && res.AnomalyKinds["not-conserved"] == 0 {
				t.Fatalf("anomalies %v: want not-conserved", res.AnomalyKinds)
			}
		})
	}
}
