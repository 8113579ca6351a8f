package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/workloads"
)

// startMariaDB launches a MariaDB of the test's own.
func startMariaDB(t *testing.T) *mariadb.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := mariadb.Start(ctx, mariadb.Options{Dir: servertest.ReachableDir(t)})
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return m
}

// The budget on MariaDB through the proxy: a naive retry after a cut commit applies
// the decrement twice, which the checker sees and the OK packets' affected rows prove;
// the idempotent retry reconciles exactly, in autocommit and in a transaction. Each
// verdict is reproduced from the run directory alone.
func TestMySQLBudgetUnderCommitCuts(t *testing.T) {
	t.Parallel()
	m := startMariaDB(t)
	cfg := func(t *testing.T, retry, mech, fault string) runner.Config {
		return runner.Config{
			Workload: "budget", Store: runner.MySQL, DSN: m.DSN, Mechanism: mech,
			Workers: 4, Ops: 40, Budget: 120, Seed: 1, Out: t.TempDir(),
			Retry: policy(t, retry), Faults: parseSchedule(t, fault),
		}
	}
	t.Run("naive", func(t *testing.T) {
		res, err := runner.Run(context.Background(), cfg(t, "naive", "autocommit", "commit-cut:0.2"))
		if err != nil {
			t.Fatal(err)
		}
		recheck(t, res)
		if res.Verdict != checker.Invalid {
			t.Fatalf("verdict %v, want invalid: %s", res.Verdict, res.Summary)
		}
		c := res.Faults.Commits
		if c == nil || c.ChangedRows == 0 || c.ChangedRows != res.Faults.ByKind["commit-cut"] {
			t.Fatalf("commit faults %+v: want every cut proven to have changed rows", c)
		}
		if res.Evidence == nil || len(res.Evidence.AppliedTwice) == 0 {
			t.Fatalf("no operation proven applied twice: %+v", res.Evidence)
		}
	})
	for _, mech := range []string{"autocommit", "transaction"} {
		t.Run("idempotent "+mech, func(t *testing.T) {
			res, err := runner.Run(context.Background(), cfg(t, "idempotent", mech, "commit-mixed:0.2"))
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Verdict != checker.Valid {
				t.Fatalf("verdict %v, want valid: %s", res.Verdict, res.Summary)
			}
			if res.Faults.ByKind["commit-cut"] == 0 || res.Faults.ByKind["commit-drop"] == 0 {
				t.Fatalf("faults %+v: want cuts and drops", res.Faults.ByKind)
			}
		})
	}
}

// The transactional workloads on MariaDB, checked for what each level is measured to
// give (Hermitage's MySQL row): list-append at serializable and repeatable read,
// rw-register at read committed, each valid, the deadlocks InnoDB broke retried as
// conflicts.
func TestMySQLTxnWorkloads(t *testing.T) {
	t.Parallel()
	m := startMariaDB(t)
	for _, tc := range []struct{ workload, isolation string }{
		{"list-append", "serializable"}, {"list-append", "repeatable-read"}, {"rw-register", "read-committed"},
	} {
		t.Run(tc.workload+" "+tc.isolation, func(t *testing.T) {
			res, err := runner.Run(context.Background(), runner.Config{
				Workload: workloads.Name(tc.workload), Store: runner.MySQL, DSN: m.DSN, Isolation: tc.isolation,
				Workers: 4, Ops: 40, Seed: 1, Out: t.TempDir(), Retry: policy(t, "none"),
			})
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Verdict != checker.Valid {
				t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
			}
		})
	}
}
