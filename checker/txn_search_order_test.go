package checker

import (
	"context"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// searchedModels are the reference's models that the search for a version order
// decides on rw-register histories.
var searchedModels = []string{bSerializable, bStrict, bStrongSession, bSI, bStrongSI, bStrongSessionSI}

// TestVersionOrderSearchDifferential holds the rw-register checker, with its search for
// a version order, to the brute-force reference (txn_brute_test.go: every committed
// set and every commit order, each model by its operational definition) on thousands
// of small random histories: for serializability and snapshot isolation and their
// strong-session and strong variants the checker now rules a model out exactly when
// the reference finds no execution that satisfies it, and calls it valid only with
// the model named complete.
func TestVersionOrderSearchDifferential(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200
	}
	rng := rand.New(rand.NewPCG(43, 5))
	agree := map[string]int{}
	violated := map[string]int{}
	for i := 0; i < n; i++ {
		ops, txns := randomTxnHistory(rng, true)
		want := brute(txns, true)
		viaRT, r1 := fastViolations(t, RWRegisterModel, ops, "strict-serializable")
		viaProc, r2 := fastViolations(t, RWRegisterModel, ops, "strong-session-serializable", "snapshot-isolation")
		for _, r := range []Result{r1, r2} {
			if r.Verdict == Unknown {
				t.Fatalf("history %d: unknown: %s\n%s%s", i, r.Summary, dumpTxnOps(ops), anomalyText(r))
			}
			if r.Verdict == Valid && !strings.Contains(r.Summary, "complete for") {
				t.Fatalf("history %d: valid without the search deciding it: %s\n%s", i, r.Summary, dumpTxnOps(ops))
			}
		}
		for _, m := range searchedModels {
			got, res := viaRT[m], r1
			if m == bStrongSession || m == bStrongSessionSI {
				got, res = viaProc[m], r2
			}
			if want.violates[m] {
				violated[m]++
			}
			if got != want.violates[m] {
				t.Fatalf("history %d: %s: checker says violated=%v, reference says %v\n%s%s\n%s",
					i, m, got, want.violates[m], dumpTxnOps(ops), res.Summary, anomalyText(res))
			}
			agree[m]++
		}
	}
	for _, m := range searchedModels {
		t.Logf("%-34s %4d agree, %4d violate it", m, agree[m], violated[m])
	}
}

// TestVersionOrderSearchGolden checks the histories of testdata/txn-search, each
// written so that no read shows a key's version order (every value read was written
// by a transaction whose place among the key's writes is not known), at several
// models: the verdict, the anomaly types and the weakest models violated.
func TestVersionOrderSearchGolden(t *testing.T) {
	cases := []struct {
		name string
		want map[string]string // model → goldenText
	}{
		{"write-skew", map[string]string{
			"serializable":       "invalid PL-3-cycle-every-order; not serializable\n",
			"snapshot-isolation": "valid\n",
			"causal":             "valid\n",
		}},
		{"lost-update", map[string]string{
			"snapshot-isolation": "invalid lost-update; not cursor-stability update-atomic\n",
			"causal":             "valid\n",
		}},
		{"long-fork", map[string]string{
			"snapshot-isolation":  "invalid PL-SI-cycle-every-order; not snapshot-isolation\n",
			"strict-serializable": "invalid PL-SI-cycle-every-order; not snapshot-isolation\n",
			"causal":              "valid\n",
		}},
		{"g-single", map[string]string{
			"serializable":       "invalid PL-SI-cycle-every-order; not snapshot-isolation\n",
			"snapshot-isolation": "invalid PL-SI-cycle-every-order; not snapshot-isolation\n",
			"causal":             "valid\n",
		}},
		{"valid-needs-order", map[string]string{
			"strict-serializable": "valid\n",
			"snapshot-isolation":  "valid\n",
		}},
	}
	for _, tc := range cases {
		_, ops, err := histories.ReadFile(filepath.Join("testdata", "txn-search", tc.name+".jsonl"), false)
		if err != nil {
			t.Fatal(err)
		}
		for model, want := range tc.want {
			t.Run(tc.name+"/"+model, func(t *testing.T) {
				r, err := CheckRWRegister(context.Background(), ops, TxnOptions{ConsistencyModels: []string{model}})
				if err != nil {
					t.Fatal(err)
				}
				if got, _, _ := strings.Cut(goldenText(r, txnKinds(t, r)), "\n"); got+"\n" != want {
					t.Errorf("got %q, want %q\n%s\n%s", got, want, r.Summary, anomalyText(r))
				}
				if r.Verdict == Valid && model != "causal" && !strings.Contains(r.Summary, "complete for "+model) {
					t.Errorf("valid, but the search did not name %s complete: %s", model, r.Summary)
				}
			})
		}
	}
}

// TestVersionOrderSearchWitness checks that the witness of write skew names both
// choices of the order of key y's writes and the cycle each closes, in the run's
// words.
func TestVersionOrderSearchWitness(t *testing.T) {
	_, ops, err := histories.ReadFile(filepath.Join("testdata", "txn-search", "write-skew.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := CheckRWRegister(context.Background(), ops, TxnOptions{ConsistencyModels: []string{"serializable"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Anomalies) != 1 {
		t.Fatalf("want one anomaly, got %s", anomalyText(r))
	}
	text := r.Anomalies[0].Explanation
	for _, want := range []string{
		"T2 = transaction 1", // the writer of x = 1 and y = 1, by its completion
		"precedes",
		"a cycle:",
		"which T2 wrote",
		"comes after it in this order",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explanation lacks %q:\n%s", want, text)
		}
	}
	if got := len(r.Anomalies[0].Ops); got != 3 {
		t.Errorf("the witness names %d transactions, want 3: %v", got, r.Anomalies[0].Ops)
	}
}

// TestVersionOrderSearchOutOfTime checks that a search cut short says unknown, never
// valid: a history whose version order needs a search, given no time for it.
func TestVersionOrderSearchOutOfTime(t *testing.T) {
	_, ops, err := histories.ReadFile(filepath.Join("testdata", "txn-search", "valid-needs-order.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := CheckRWRegister(context.Background(), ops, TxnOptions{ConsistencyModels: []string{"serializable"}, CycleSearchTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Unknown || !strings.Contains(anomalyText(r), "ran out of time") {
		t.Errorf("got %v: %s\n%s", r.Verdict, r.Summary, anomalyText(r))
	}
}
