package runner_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

// txnConfig is a transactional run on the package's PostgreSQL, sized by transactions.
func txnConfig(t *testing.T, w workloads.Name, level string, workers, txns int) runner.Config {
	return runner.Config{
		Workload: w, Store: runner.Postgres, DSN: pg.Get(t).DSN, Isolation: level,
		Workers: workers, Ops: txns, Seed: 1, Out: t.TempDir(), Retry: policy(t, "conflict"),
	}
}

func txnFinal(t *testing.T, res *results.Results) txn.Final {
	t.Helper()
	f, ok := res.Final.(txn.Final)
	if !ok {
		t.Fatalf("final is %T, want txn.Final", res.Final)
	}
	return f
}

// Each level of PostgreSQL keeps its documented promise on the random workload, for
// both models: the history is checked for the level's model (read-committed,
// snapshot-isolation, serializable) and found valid; the serialization failures of the
// stronger levels are retried and counted.
func TestTxnLevelsKeepTheirPromise(t *testing.T) {
	for _, w := range []workloads.Name{workloads.ListAppend, workloads.RWRegister} {
		for _, level := range []string{"read-committed", "repeatable-read", "serializable"} {
			t.Run(string(w)+" "+level, func(t *testing.T) {
				cfg := txnConfig(t, w, level, 4, 40)
				res, err := runner.Run(context.Background(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				recheck(t, res)
				f := txnFinal(t, res)
				want := map[string]string{"read-committed": "read-committed", "repeatable-read": "snapshot-isolation", "serializable": "serializable"}[level]
				if !slices.Equal(f.Models, []string{want}) {
					t.Errorf("checked for %v, want [%s]", f.Models, want)
				}
				if res.Verdict != checker.Valid {
					t.Fatalf("%s %s: %v: %s\n%v", w, level, res.Verdict, res.Summary, res.Anomalies)
				}
				if f.Committed+f.Failed+f.Unknown != 160 || f.Committed == 0 || f.ReadOnly == 0 {
					t.Errorf("transactions %+v, want 160 of them, some committed read-only", f)
				}
				if res.Txn == nil || res.Txn.Transactions < 160 {
					t.Errorf("the transactional section is %+v, want the checked transactions counted", res.Txn)
				}
				t.Logf("%s %s: %s; %d committed, retries %v", w, level, res.Summary, f.Committed, res.Retries.ByReason)
			})
		}
	}
}

// The articles' contention row as isolation: read-modify-write transactions on one hot
// key at READ COMMITTED, checked for serializability, lose updates, and the checker
// names the lost update with the cycle that proves it.
func TestReadCommittedReadModifyWriteLosesUpdates(t *testing.T) {
	for _, w := range []workloads.Name{workloads.ListAppend, workloads.RWRegister} {
		t.Run(string(w), func(t *testing.T) {
			cfg := txnConfig(t, w, "read-committed", 8, 30)
			cfg.Txn = txn.Options{Keys: 1, Pattern: txn.ReadModifyWrite, MaxWritesPerKey: 1000, ConsistencyModels: []string{"serializable"}}
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Verdict != checker.Invalid {
				t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
			}
			var lost *checker.Anomaly
			for i, a := range res.Anomalies {
				if a.Kind == "lost-update" {
					lost = &res.Anomalies[i]
					break
				}
			}
			if lost == nil {
				t.Fatalf("no lost-update among %v", res.AnomalyKinds)
			}
			if res.Txn == nil || len(res.Txn.Cycles) == 0 {
				t.Fatalf("no cycle drawn for the anomalies: %+v", res.Txn)
			}
			var kinds []string
			for _, c := range res.Txn.Cycles {
				kinds = append(kinds, c.Type)
				for _, s := range c.Steps {
					if s.Type == "rw" && s.Key == "" {
						t.Errorf("an rw edge without its key: %+v", s)
					}
				}
			}
			if !slices.ContainsFunc(kinds, func(k string) bool { return strings.HasPrefix(k, "G-single") || strings.HasPrefix(k, "G2") }) {
				t.Errorf("cycles %v, want a G-single or G2 cycle behind the lost updates", kinds)
			}
			b, _ := json.Marshal(res.Txn.Not)
			t.Logf("%s: %s; not %s; cycles %v", w, res.Summary, b, kinds)
		})
	}
}

// The rw-register workload's table is its own: run on a server where the register
// workload ran (its indoubt_register holds text keys), it still runs and is checked.
func TestTxnTablesApartFromRegister(t *testing.T) {
	reg := txnConfig(t, workloads.Register, "", 2, 5)
	reg.Retry = policy(t, "none")
	if _, err := runner.Run(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
	res, err := runner.Run(context.Background(), txnConfig(t, workloads.RWRegister, "serializable", 2, 10))
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != checker.Valid {
		t.Fatalf("%v: %s", res.Verdict, res.Summary)
	}
}

// Failover to a synchronous standby under the list-append workload at SERIALIZABLE,
// checked for strict serializability: the transactions the failover cut end in doubt,
// and the promoted standby holds every commit, so the reads after it show every
// acknowledged append where real time puts it: valid.
func TestTxnFailoverToSyncStandby(t *testing.T) {
	t.Parallel() // servers of its own, launched by the run
	cfg := txnConfig(t, workloads.ListAppend, "serializable", 8, 0)
	cfg.DSN, cfg.Topology, cfg.Replication = "", runner.TopologyReplicated, "sync"
	cfg.Duration, cfg.Faults = 3500*time.Millisecond, parseSchedule(t, "failover@1500ms")
	cfg.Txn = txn.Options{ConsistencyModels: []string{"strict-serializable"}}
	res := processRun(t, cfg)
	faultsHappened(t, res, "failover", "promoted")
	f := txnFinal(t, res)
	t.Logf("%s; committed %d, unknown %d, failed %d", res.Summary, f.Committed, f.Unknown, f.Failed)
	if res.Verdict != checker.Valid {
		t.Fatalf("%v: %s\n%v", res.Verdict, res.Summary, res.Anomalies)
	}
	if f.Committed == 0 || f.Unknown == 0 {
		t.Errorf("transactions %+v: want commits, and the ones the failover cut in doubt", f)
	}
}
