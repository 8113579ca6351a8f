package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// randomTxnHistory makes a small random history of a database that misbehaves in
// random ways, for the differential test: 2 to 6 transactions of 1 to 3 micro-ops
// over 1 to 3 keys; a random set of them committed in a random order, each reading
// either the state just before its commit or an older snapshot (plus its own writes),
// and now and then something no order gives (a list out of order, a value twice);
// intervals of real time around the commit points, or anywhere; processes reused
// where their transactions do not overlap; failed and unknown outcomes.
func randomTxnHistory(rng *rand.Rand, registers bool) ([]histories.Op, []bTxn) {
	n := 2 + rng.IntN(5)
	keys := 1 + rng.IntN(3)
	next := make([]int, keys)
	// Half the histories end with a transaction that reads every key, which shows the
	// order of every committed append.
	final := rng.IntN(2) == 0
	if final {
		n++
	}
	txns := make([]bTxn, n)
	for i := range txns {
		if final && i == n-1 {
			for k := 0; k < keys; k++ {
				txns[i].mops = append(txns[i].mops, bMop{read: true, key: k})
			}
			continue
		}
		for m := 1 + rng.IntN(3); m > 0; m-- {
			k := rng.IntN(keys)
			if rng.IntN(2) == 0 {
				txns[i].mops = append(txns[i].mops, bMop{read: true, key: k})
			} else {
				next[k]++
				txns[i].mops = append(txns[i].mops, bMop{key: k, val: next[k]})
			}
		}
	}
	// Commit order and reads.
	var committed []int
	for i := range txns {
		if rng.IntN(100) < 85 && !(final && i == n-1) {
			committed = append(committed, i)
		}
	}
	rng.Shuffle(len(committed), func(a, b int) { committed[a], committed[b] = committed[b], committed[a] })
	if final {
		committed = append(committed, n-1)
	}
	state := bState{}
	prefixes := []bState{state.clone()}
	writer := map[[2]int]int{}
	for i, t := range txns {
		for _, m := range t.mops {
			if !m.read {
				writer[[2]int{m.key, m.val}] = i
			}
		}
	}
	commitAt := make([]int, n)
	for i := range commitAt {
		commitAt[i] = -1
	}
	for p, i := range committed {
		commitAt[i] = p
		snap := state
		if rng.IntN(10) < 3 && !(final && i == n-1) {
			snap = prefixes[rng.IntN(len(prefixes))]
		}
		local := snap.clone()
		for j := range txns[i].mops {
			m := &txns[i].mops[j]
			if !m.read {
				if registers {
					local[m.key] = []int{m.val}
					state[m.key] = []int{m.val}
				} else if l := state[m.key]; len(l) > 0 && writer[[2]int{m.key, l[len(l)-1]}] != i && rng.IntN(12) == 0 {
					// Not applied atomically: this append lands before the last
					// transaction's, which writes cycles are made of.
					state[m.key] = append(slices.Clone(l[:len(l)-1]), m.val, l[len(l)-1])
					local[m.key] = append(local[m.key], m.val)
				} else {
					local[m.key] = append(local[m.key], m.val)
					state[m.key] = append(state[m.key], m.val)
				}
				continue
			}
			cur := local[m.key]
			if registers {
				if len(cur) == 0 {
					m.null = true
				} else {
					m.val = cur[0]
				}
			} else {
				m.list = slices.Clone(cur)
				// Reads out of order (of two transactions' appends: within one, no read
				// can tell the order the database applied them in) or with a repeat.
				if len(m.list) >= 2 && rng.IntN(20) == 0 && writer[[2]int{m.key, m.list[0]}] != writer[[2]int{m.key, m.list[1]}] {
					m.list[0], m.list[1] = m.list[1], m.list[0]
				} else if len(m.list) >= 1 && rng.IntN(30) == 0 {
					m.list = append(m.list, m.list[0])
				}
			}
		}
		prefixes = append(prefixes, state.clone())
	}
	for i := range txns {
		switch {
		case final && i == n-1:
			txns[i].ok = true
		case commitAt[i] >= 0 && rng.IntN(100) < 85:
			txns[i].ok = true
		case rng.IntN(100) < 50:
			txns[i].info = true
		}
	}
	// Real time: intervals around the commit points, or anywhere.
	type iv struct{ start, end float64 }
	ivs := make([]iv, n)
	aroundCommits := rng.IntN(2) == 0
	for i := range ivs {
		c := float64(commitAt[i]) + 0.5
		if commitAt[i] < 0 || !aroundCommits {
			c = rng.Float64() * float64(n)
		}
		ivs[i] = iv{c - rng.Float64()*float64(n)/2, c + rng.Float64()*float64(n)/2}
		if final && i == n-1 {
			ivs[i] = iv{3 * float64(n), 3*float64(n) + 1}
		}
	}
	// Processes: a transaction may continue a process whose last one ended before it
	// began, and had not ended unknown.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return ivs[order[a]].start < ivs[order[b]].start })
	var procEnd []float64
	var procDead []bool
	for _, i := range order {
		txns[i].process = -1
		if rng.IntN(2) == 0 {
			for p := range procEnd {
				if !procDead[p] && procEnd[p] < ivs[i].start {
					txns[i].process = p
					break
				}
			}
		}
		if txns[i].process < 0 {
			txns[i].process = len(procEnd)
			procEnd, procDead = append(procEnd, 0), append(procDead, false)
		}
		procEnd[txns[i].process] = ivs[i].end
		procDead[txns[i].process] = txns[i].info
	}
	type ev struct {
		at     float64
		txn    int
		invoke bool
	}
	var evs []ev
	for i, v := range ivs {
		evs = append(evs, ev{v.start, i, true}, ev{v.end, i, false})
	}
	sort.Slice(evs, func(a, b int) bool { return evs[a].at < evs[b].at })
	var ops []histories.Op
	for _, e := range evs {
		t := &txns[e.txn]
		op := histories.Op{Index: int64(len(ops)), Time: int64(len(ops)), Process: t.process, F: TxnFunction}
		switch {
		case e.invoke:
			op.Type, op.Value = histories.Invoke, bValue(t.mops, registers, true)
			t.inv = len(ops)
		case t.ok:
			op.Type, op.Value = histories.OK, bValue(t.mops, registers, false)
			t.comp = len(ops)
		case t.info:
			op.Type, op.Error = histories.Info, "conn closed"
			t.comp = -1
		default:
			op.Type, op.Error = histories.Fail, "aborted"
			t.comp = len(ops)
		}
		ops = append(ops, op)
	}
	// An unknown outcome completes never, as far as real time goes.
	for i := range txns {
		if txns[i].info {
			txns[i].comp = len(ops) + 1
		}
	}
	return ops, txns
}

// bValue encodes a reference transaction as a history value; an invocation's reads
// are null.
func bValue(mops []bMop, registers, invoke bool) json.RawMessage {
	var parts []string
	for _, m := range mops {
		switch {
		case !m.read && registers:
			parts = append(parts, fmt.Sprintf(`["w",%d,%d]`, m.key, m.val))
		case !m.read:
			parts = append(parts, fmt.Sprintf(`["append",%d,%d]`, m.key, m.val))
		case invoke || m.null:
			parts = append(parts, fmt.Sprintf(`["r",%d,null]`, m.key))
		case registers:
			parts = append(parts, fmt.Sprintf(`["r",%d,%d]`, m.key, m.val))
		default:
			b, _ := json.Marshal(m.list)
			if m.list == nil {
				b = []byte("[]")
			}
			parts = append(parts, fmt.Sprintf(`["r",%d,%s]`, m.key, b))
		}
	}
	return json.RawMessage("[" + strings.Join(parts, ",") + "]")
}

// fastViolations returns the models the checker rules out, checking for models
// (which decides whether it uses process or real-time order).
func fastViolations(t *testing.T, model string, ops []histories.Op, models ...string) (map[string]bool, Result) {
	t.Helper()
	r, err := checkTxn(context.Background(), model, ops, TxnOptions{ConsistencyModels: models})
	if err != nil {
		t.Fatalf("%v\n%s", err, dumpTxnOps(ops))
	}
	out := map[string]bool{}
	if r.Verdict == Valid {
		return out, r
	}
	for _, field := range []string{"not", "also_not"} {
		var ms []string
		if raw, ok := r.Details[field]; ok {
			if err := json.Unmarshal(raw, &ms); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range ms {
			out[m] = true
		}
	}
	return out, r
}

func dumpTxnOps(ops []histories.Op) string {
	var b strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&b, "%3d p%-2d %-6s %s\n", op.Index, op.Process, op.Type, op.Value)
	}
	return b.String()
}

// TestTxnDifferential holds the list-append checker to the brute-force reference on
// thousands of small random histories: for every model the reference decides, the
// checker rules it out exactly when the reference finds no execution of the history
// that satisfies it. The register checker infers version orders from what registers
// show, which is less than an enumeration finds; it is held to soundness: every model
// it rules out, the reference rules out too.
func TestTxnDifferential(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 300
	}
	for _, registers := range []bool{false, true} {
		model := ListAppendModel
		if registers {
			model = RWRegisterModel
		}
		t.Run(model, func(t *testing.T) {
			t.Parallel() // each model has its random source: the two run on two cores
			rng := rand.New(rand.NewPCG(7, 11))
			agree := map[string]int{}
			violated := map[string]int{}
			exact := 0
			for i := 0; i < n; i++ {
				ops, txns := randomTxnHistory(rng, registers)
				want := brute(txns, registers)
				// Where a committed append went unread, its place in the key's order is
				// unknown, and the checker, like Elle, infers no order among such
				// appends: held to soundness only there. Registers never show their
				// order: soundness only.
				full := !registers && allAppendsRead(txns)
				if full {
					exact++
				}
				viaRT, r1 := fastViolations(t, model, ops, "strict-serializable")
				viaProc, r2 := fastViolations(t, model, ops, "strong-session-serializable")
				for _, m := range bModels {
					if !want.comparable[m] {
						continue
					}
					got := viaRT[m]
					res := r1
					if m == bStrongSession || m == bStrongSessionSI {
						got, res = viaProc[m], r2
					}
					if want.violates[m] {
						violated[m]++
					}
					if got == want.violates[m] {
						agree[m]++
						continue
					}
					if !full && !got {
						continue // the checker may see less than the enumeration
					}
					t.Fatalf("history %d: %s: checker says violated=%v, reference says %v\n%s%s\n%s",
						i, m, got, want.violates[m], dumpTxnOps(ops), res.Summary, anomalyText(res))
				}
			}
			t.Logf("%d histories, %d held to exact agreement (every committed append read)", n, exact)
			for _, m := range bModels {
				t.Logf("%-34s %4d agree, %4d violate it", m, agree[m], violated[m])
			}
		})
	}
}

// allAppendsRead reports whether every append of a committed transaction appears in
// some committed read.
func allAppendsRead(txns []bTxn) bool {
	seen := map[[2]int]bool{}
	for _, t := range txns {
		if !t.ok {
			continue
		}
		for _, m := range t.mops {
			for _, e := range m.list {
				seen[[2]int{m.key, e}] = true
			}
		}
	}
	for _, t := range txns {
		if !t.ok {
			continue
		}
		for _, m := range t.mops {
			if !m.read && !seen[[2]int{m.key, m.val}] {
				return false
			}
		}
	}
	return true
}

func anomalyText(r Result) string {
	var b strings.Builder
	for _, a := range r.Anomalies {
		fmt.Fprintf(&b, "%s %v: %s\n", a.Kind, a.Ops, a.Explanation)
	}
	return b.String()
}
