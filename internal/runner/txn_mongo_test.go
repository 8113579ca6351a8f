package runner_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

// mongoTxnRun runs a transactional workload on a launched FerretDB, one document a
// transaction, and checks that the history was checked for strict serializability
// and that every transaction touched one key.
func mongoTxnRun(t *testing.T, w workloads.Name, workers, txns int, opt txn.Options, fault ...string) *results.Results {
	t.Helper()
	cfg := runner.Config{Workload: w, Store: runner.Mongo, Workers: workers, Ops: txns, Seed: 1,
		Out: t.TempDir(), Retry: policy(t, "conflict"), Txn: opt}
	if len(fault) > 0 {
		sched, err := schedule.Parse(fault)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Faults, cfg.Proxy = sched, "auto"
	}
	res, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	if f := txnFinal(t, res); !slices.Equal(f.Models, []string{"strict-serializable"}) {
		t.Errorf("checked for %v, want [strict-serializable]", f.Models)
	}
	if res.Txn == nil || res.Txn.Transactions < workers*txns {
		t.Errorf("the transactional section is %+v, want %d transactions checked", res.Txn, workers*txns)
	}
	f, err := os.Open(filepath.Join(res.RunDir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var op histories.Op
		if json.Unmarshal(sc.Bytes(), &op) != nil || op.F != txn.FTxn || op.Type != histories.Invoke {
			continue
		}
		var tx txn.Txn
		if err := json.Unmarshal(op.Value, &tx); err != nil {
			t.Fatalf("event %d: %v", op.Index, err)
		}
		if len(tx.Keys()) != 1 {
			t.Fatalf("event %d touches keys %v: this store runs one document a transaction", op.Index, tx.Keys())
		}
	}
	return res
}

// MongoDB's single-document transactions, run on FerretDB: one session alone gets
// every read right (the document before the command, with the transaction's own
// earlier writes), and the history is strictly serializable for both models.
func TestMongoTxnsAlone(t *testing.T) {
	for _, w := range []workloads.Name{workloads.ListAppend, workloads.RWRegister} {
		t.Run(string(w), func(t *testing.T) {
			res := mongoTxnRun(t, w, 1, 60, txn.Options{})
			if res.Verdict != checker.Valid {
				t.Fatalf("%v: %s\n%v", res.Verdict, res.Summary, res.Anomalies)
			}
		})
	}
}

// Under commit-mixed, commands cut after FerretDB applied them or dropped before it saw
// them leave transactions in doubt (info); one session's history is still strictly
// serializable, the checker deciding from the reads which of them happened.
func TestMongoTxnsUnderCommitMixed(t *testing.T) {
	res := mongoTxnRun(t, workloads.ListAppend, 1, 60, txn.Options{}, "commit-mixed:0.2")
	f := txnFinal(t, res)
	t.Logf("%s; committed %d, unknown %d; faults %v", res.Summary, f.Committed, f.Unknown, res.Faults.ByKind)
	if res.Verdict != checker.Valid {
		t.Fatalf("%v: %s\n%v", res.Verdict, res.Summary, res.Anomalies)
	}
	if f.Unknown == 0 || res.Faults.ByKind["commit-cut"] == 0 {
		t.Errorf("no transaction in doubt under commit-mixed: %+v, faults %+v", f, res.Faults.ByKind)
	}
}

// Concurrent single-document transactions on one hot key, on FerretDB 1.24.2: its
// findAndModify and update read the document, apply the update in Go and write the
// whole document back by _id (docs/findings.md), so concurrent appends overwrite each
// other. The checker must find it from the reads alone, and this test fails if it
// ever stops reproducing (as stores/mongo's conformance tests do for the same fault).
func TestMongoTxnsLoseAppendsOnFerretDB(t *testing.T) {
	res := mongoTxnRun(t, workloads.ListAppend, 8, 25, txn.Options{Keys: 1, MaxWritesPerKey: 1000})
	if res.Verdict != checker.Invalid {
		t.Fatalf("verdict %v: %s: FerretDB's lost single-document updates did not show", res.Verdict, res.Summary)
	}
	if !slices.ContainsFunc(res.Anomalies, func(a checker.Anomaly) bool {
		return a.Kind == "incompatible-order" || a.Kind == "lost-update" || a.Kind == "G-single-item" || a.Kind == "G-single-item-realtime"
	}) {
		t.Errorf("anomalies %v: want the overwritten appends named (incompatible-order, lost-update or a G-single cycle)", res.AnomalyKinds)
	}
	t.Logf("%s", res.Summary)
}
