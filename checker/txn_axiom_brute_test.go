package checker

import (
	"context"
	"math/rand/v2"
	"sort"
	"testing"
)

// A brute-force reference for the axiomatic levels (txn_axiom.go), on histories small
// enough to enumerate, written from Biswas and Enea's definitions without the
// checker's code: a history satisfies a level when some set of the unknown
// transactions committed (with every ok one, and no failed one) and some total order
// co of those, after the initial state, contains session order and write-read and
// meets the level's axiom for every read of x in t3 from t2 and every t1 ≠ t2 that
// wrote x: t1 co t2 whenever t1 wrote what t3 read earlier (read committed), t1 wr
// t3 or t1 so t3 (read atomic), t1 (so ∪ wr)+ t3 (causal). A read is from the
// transaction whose last write of the key it returns (null: the initial state); a
// read after the transaction's own write of the key must return that write; a read
// with no writer among the committed (a failed transaction's value, one never
// written, an intermediate one, the reader's own later write) satisfies no level.
// An unknown transaction's reads are not known: only its writes count.

// bAxiom reports whether txns satisfy level.
func bAxiom(txns []bTxn, level axLevel) bool {
	var info []int
	for i, t := range txns {
		if t.info {
			info = append(info, i)
		}
	}
	for mask := 0; mask < 1<<len(info); mask++ {
		in := make([]bool, len(txns))
		for i, t := range txns {
			in[i] = t.ok
		}
		for j, i := range info {
			if mask&(1<<j) != 0 {
				in[i] = true
			}
		}
		if bAxiomWith(txns, in, level) {
			return true
		}
	}
	return false
}

// bRead is an external read: its position among the transaction's micro-ops, key, and
// writer (-1: the initial state).
type bRead struct{ pos, key, from int }

func bAxiomWith(txns []bTxn, in []bool, level axLevel) bool {
	n := len(txns)
	lastWrite := func(t, k int) (int, bool) {
		v, ok := 0, false
		for _, m := range txns[t].mops {
			if !m.read && m.key == k {
				v, ok = m.val, true
			}
		}
		return v, ok
	}
	reads := make([][]bRead, n)
	for t := range txns {
		if !in[t] || !txns[t].ok {
			continue
		}
		own := map[int]int{}
		for p, m := range txns[t].mops {
			if !m.read {
				own[m.key] = m.val
				continue
			}
			if v, ok := own[m.key]; ok {
				if m.null || m.val != v {
					return false
				}
				continue
			}
			if m.null {
				reads[t] = append(reads[t], bRead{p, m.key, -1})
				continue
			}
			from := -1
			for w := range txns {
				if v, ok := lastWrite(w, m.key); ok && in[w] && w != t && v == m.val {
					from = w
				}
			}
			if from < 0 {
				return false
			}
			reads[t] = append(reads[t], bRead{p, m.key, from})
		}
	}
	// so ∪ wr, and its transitive closure.
	hb := make([][]bool, n)
	for i := range hb {
		hb[i] = make([]bool, n)
	}
	for a := range txns {
		for b := range txns {
			if in[a] && in[b] && a != b && txns[a].process == txns[b].process && txns[a].inv < txns[b].inv {
				hb[a][b] = true
			}
		}
	}
	direct := make([][]bool, n)
	for a := range hb {
		direct[a] = append([]bool(nil), hb[a]...)
	}
	for t, rs := range reads {
		for _, r := range rs {
			if r.from >= 0 {
				hb[r.from][t], direct[r.from][t] = true, true
			}
		}
	}
	for k := 0; k < n; k++ {
		for a := 0; a < n; a++ {
			for b := 0; b < n; b++ {
				if hb[a][k] && hb[k][b] {
					hb[a][b] = true
				}
			}
		}
	}
	var members []int
	for i := range txns {
		if in[i] {
			members = append(members, i)
		}
	}
	for _, order := range bPermutations(members) {
		pos := make([]int, n)
		for i, t := range order {
			pos[t] = i + 1 // the initial state is at 0
		}
		before := func(a, b int) bool { // a co b, -1 the initial state
			if a < 0 {
				return true
			}
			if b < 0 {
				return false
			}
			return pos[a] < pos[b]
		}
		good := true
		for a := 0; a < n && good; a++ {
			for b := 0; b < n && good; b++ {
				if direct[a][b] && !before(a, b) {
					good = false
				}
			}
		}
		for t3, rs := range reads {
			for i, r := range rs {
				for t1 := range txns {
					if !good {
						break
					}
					if !in[t1] || t1 == r.from || t1 == t3 {
						continue
					}
					if _, ok := lastWrite(t1, r.key); !ok {
						continue
					}
					var premise bool
					switch level {
					case axRC:
						for _, e := range rs[:i] {
							premise = premise || e.from == t1
						}
					case axRA:
						premise = direct[t1][t3]
					case axCC:
						premise = hb[t1][t3]
					}
					if premise && !before(t1, r.from) {
						good = false
					}
				}
			}
		}
		if good {
			return true
		}
	}
	return false
}

// TestAxiomDifferential holds the axiomatic checks to the brute-force reference on
// thousands of small random histories, some of their reads changed to values no
// order gives (a failed transaction's, one never written, another key's version).
func TestAxiomDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 2019))
	runs := 2000
	if testing.Short() {
		runs = 500
	}
	// Every other history with the index by key that large transactions take.
	defer func(b int) { axBigTxn = b }(axBigTxn)
	counts := map[string]int{}
	for run := 0; run < runs; run++ {
		ops, txns := randomTxnHistory(rng, true)
		axBigTxn = 16
		if run%2 == 1 {
			axBigTxn = 0
		}
		if rng.IntN(4) == 0 {
			// Change one ok transaction's read.
			var cands [][2]int
			for i, tx := range txns {
				for j, m := range tx.mops {
					if tx.ok && m.read {
						cands = append(cands, [2]int{i, j})
					}
				}
			}
			if len(cands) > 0 {
				c := cands[rng.IntN(len(cands))]
				m := &txns[c[0]].mops[c[1]]
				m.null, m.val = rng.IntN(4) == 0, 1+rng.IntN(4)
				ops[txns[c[0]].comp].Value = bValue(txns[c[0]].mops, true, false)
			}
		}
		for _, l := range []axLevel{axRC, axRA, axCC} {
			want := bAxiom(txns, l)
			r, err := checkTxn(context.Background(), RWRegisterModel, ops, TxnOptions{ConsistencyModels: []string{l.model()}})
			if err != nil {
				// A value written twice is refused; the generator writes each once.
				t.Fatalf("run %d: %v\n%s", run, err, dumpTxnOps(ops))
			}
			got := r.Verdict == Valid
			if r.Verdict == Unknown || got != want {
				t.Fatalf("run %d, %s: checker %s, reference valid=%v\n%s\n%s\n%v", run, l.model(), r.Verdict, want, r.Summary, dumpTxnOps(ops), r.Anomalies)
			}
			if !want {
				counts[l.model()]++
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%s: %d of %d histories invalid", k, counts[k], runs)
	}
	// The test means something only if it saw violations of every level.
	for _, l := range []axLevel{axRC, axRA, axCC} {
		if counts[l.model()] == 0 {
			t.Errorf("no history violated %s", l.model())
		}
	}
}
