package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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

// TestVersionOrderSearchOutOfSteps checks that a search cut short says unknown, never
// valid, naming its bound: histories whose version order needs a search are checked
// with the default bound, then with one step fewer than the search took, then with
// exactly as many. Steps, not time, bound it, so the outcome and the steps taken
// are the same however busy the machine is.
func TestVersionOrderSearchOutOfSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 2))
	check := func(ops []histories.Op, model string, steps int64) (Result, int64) {
		t.Helper()
		r, err := CheckRWRegister(context.Background(), ops, TxnOptions{ConsistencyModels: []string{model}, OrderSearchSteps: steps})
		if err != nil {
			t.Fatal(err)
		}
		var fs []orderFigures
		if raw, ok := r.Details["version_order_search"]; ok {
			if err := json.Unmarshal(raw, &fs); err != nil {
				t.Fatal(err)
			}
		}
		most := int64(0)
		for _, f := range fs {
			most = max(most, f.Steps)
		}
		return r, most
	}
	tried := 0
	for i := 0; i < 200 && tried < 3; i++ {
		ops := mediumRegisterHistory(rng, 40, 3, 0.1)
		for _, model := range []string{"serializable", "snapshot-isolation"} {
			r, steps := check(ops, model, 0)
			if steps < 2 {
				continue
			}
			tried++
			r2, steps2 := check(ops, model, 0)
			if r2.Verdict != r.Verdict || steps2 != steps {
				t.Fatalf("two checks of one history: %v in %d steps, then %v in %d", r.Verdict, steps, r2.Verdict, steps2)
			}
			cut, _ := check(ops, model, steps-1)
			want := fmt.Sprintf("ran out of steps (--order-search-steps %d ", steps-1)
			if cut.Verdict != Unknown || !strings.Contains(anomalyText(cut), want) {
				t.Errorf("%s, %d steps of %d: got %v: %s\n%s", model, steps-1, steps, cut.Verdict, cut.Summary, anomalyText(cut))
			}
			if exact, _ := check(ops, model, steps); exact.Verdict != r.Verdict {
				t.Errorf("%s, the %d steps it took: got %v, with the default %v", model, steps, exact.Verdict, r.Verdict)
			}
		}
	}
	if tried == 0 {
		t.Fatal("no history took more than one step to search")
	}
	if _, err := CheckRWRegister(context.Background(), nil, TxnOptions{OrderSearchSteps: -1}); err == nil {
		t.Error("negative OrderSearchSteps accepted")
	}
}

// mediumRegisterHistory returns an rw-register history of n transactions over a few
// keys, run one at a time in a random order at their completions, each reading now
// and then an older state than the one it writes over (stale), with real time that
// overlaps: histories with many writes per key, some satisfying the models and some
// not, too large to enumerate.
func mediumRegisterHistory(rng *rand.Rand, n, keys int, stale float64) []histories.Op {
	type txn struct {
		proc     int
		mops     [][3]any
		inv, end int
	}
	state := make([]any, keys)
	var snapshots [][]any
	next := 0
	txns := make([]txn, n)
	for i := range txns {
		snap := state
		if len(snapshots) > 0 && rng.Float64() < stale {
			snap = snapshots[rng.IntN(len(snapshots))]
		}
		local := slices.Clone(snap)
		for m := 1 + rng.IntN(4); m > 0; m-- {
			k := rng.IntN(keys)
			if rng.IntN(2) == 0 {
				txns[i].mops = append(txns[i].mops, [3]any{"r", k, local[k]})
			} else {
				next++
				local[k] = next
				state[k] = next
				txns[i].mops = append(txns[i].mops, [3]any{"w", k, next})
			}
		}
		snapshots = append(snapshots, slices.Clone(state))
		if len(snapshots) > 6 {
			snapshots = snapshots[1:]
		}
	}
	// Each transaction's invocation some steps before its completion, which is its
	// place in the serial order.
	type event struct {
		at   int
		done bool
		t    int
	}
	var evs []event
	for i := range txns {
		evs = append(evs, event{at: 4*i + 3, done: true, t: i}, event{at: 4*i - rng.IntN(12), t: i})
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.at - b.at })
	var ops []histories.Op
	busy := map[int]bool{}
	proc := make([]int, n)
	for _, e := range evs {
		if !e.done {
			p := 0
			for busy[p] {
				p++
			}
			busy[p], proc[e.t] = true, p
		} else {
			busy[proc[e.t]] = false
		}
		typ := histories.Invoke
		var parts []string
		for _, m := range txns[e.t].mops {
			v := m[2]
			if m[0] == "r" && !e.done {
				v = nil
			}
			b, _ := json.Marshal([]any{m[0], m[1], v})
			parts = append(parts, string(b))
		}
		if e.done {
			typ = histories.OK
		}
		ops = append(ops, histories.Op{Index: int64(len(ops)), Time: int64(len(ops)), Process: proc[e.t], Type: typ, F: TxnFunction,
			Value: json.RawMessage("[" + strings.Join(parts, ",") + "]")})
	}
	return ops
}

// TestVersionOrderSearchRegions holds the lazy search, which searches only the
// regions where the order of the completions closes a cycle and grows them, to the
// same search over the whole history as one region, on medium random histories: the
// same outcome for every model.
func TestVersionOrderSearchRegions(t *testing.T) {
	n := 400
	if testing.Short() {
		n = 100
	}
	rng := rand.New(rand.NewPCG(43, 8))
	outcomes := map[string]int{}
	for i := 0; i < n; i++ {
		ops := mediumRegisterHistory(rng, 20+rng.IntN(40), 2+rng.IntN(4), rng.Float64()*0.3)
		tc, err := newTxnChecker(RWRegisterModel, TxnOptions{ConsistencyModels: []string{"strict-serializable"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			if err := tc.add(op); err != nil {
				t.Fatalf("%v\n%s", err, dumpTxnOps(ops))
			}
		}
		if err := tc.h.close(); err != nil {
			t.Fatal(err)
		}
		an, err := tc.model.analyze(context.Background(), tc.h, tc.c)
		if err != nil {
			t.Fatal(err)
		}
		an.join()
		rr := tc.model.(*rwRegister)
		for _, s := range orderSpecs {
			lazy := newOrderProblem(tc.h, rr.index(tc.h), nil, s).search(context.Background(), 1<<40)
			whole := newOrderProblem(tc.h, rr.index(tc.h), nil, s)
			got, _, _, _ := whole.solveRegion(context.Background(), whole.txns, 1<<40)
			if lazy.outcome != got {
				t.Fatalf("history %d, %s: the regions' search says %v, the whole history's %v\n%s", i, s.model, lazy.outcome, got, dumpTxnOps(ops))
			}
			outcomes[s.model+" "+got.String()]++
		}
	}
	t.Log(outcomes)
}
