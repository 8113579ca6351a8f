package checker

import (
	"math/rand/v2"
	"strings"
	"testing"
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
