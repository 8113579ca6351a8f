package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// randomRetiringRegisters is a history of n rw-register transactions by procs
// processes, overlapping in time, over keys that come and go as Elle's generator's
// do: each transaction touches keys from a window that slides along the history, so
// that most keys are touched by a few dozen transactions and never again. Values are
// unique per key; reads see any value written so far or nothing. Some transactions
// fail or end unknown.
func randomRetiringRegisters(rng *rand.Rand, n, procs int) []histories.Op {
	var ops []histories.Op
	open := make([]bool, procs)
	pending := make([]string, procs)
	written := map[int][]int{}
	next := map[int]int{}
	started := 0
	for started < n || slices.Contains(open, true) {
		p := rng.IntN(procs)
		if !open[p] {
			if started == n {
				continue
			}
			base := started / 8
			var mops, inv string
			for m := 1 + rng.IntN(3); m > 0; m-- {
				k := base + rng.IntN(4)
				sep := ","
				if mops == "" {
					sep = ""
				}
				if rng.IntN(2) == 0 {
					got := "null"
					if ws := written[k]; len(ws) > 0 && rng.IntN(4) > 0 {
						got = fmt.Sprint(ws[rng.IntN(len(ws))])
					}
					mops += fmt.Sprintf(`%s["r",%d,%s]`, sep, k, got)
					inv += fmt.Sprintf(`%s["r",%d,null]`, sep, k)
				} else {
					next[k]++
					written[k] = append(written[k], next[k])
					w := fmt.Sprintf(`%s["w",%d,%d]`, sep, k, next[k])
					mops += w
					inv += w
				}
			}
			ops = append(ops, histories.Op{Process: p, Type: histories.Invoke, F: TxnFunction, Value: []byte("[" + inv + "]")})
			pending[p] = "[" + mops + "]"
			open[p] = true
			started++
			continue
		}
		typ := histories.OK
		switch rng.IntN(20) {
		case 0:
			typ = histories.Fail
		case 1:
			typ = histories.Info
		}
		ops = append(ops, histories.Op{Process: p, Type: typ, F: TxnFunction, Value: []byte(pending[p])})
		open[p] = false
	}
	for i := range ops {
		ops[i].Index, ops[i].Time = int64(i), int64(i)
	}
	return ops
}

// orderEdgesByDefinition is orderEdges read off its definition: for each transaction
// T1 and key k it left a version of, a search along the order from T1 that stops at
// the first transactions touching k; each of those, T2, gives the edge from T1's last
// version of k to T2's first. Quadratic, and independent of orderEdges' pruning.
func orderEdgesByDefinition(rr *rwRegister, h *txnHistory, x *rwIndex, succ func(int32) []int32) []string {
	touches := func(id int32, k uint32) bool {
		_, ok := rr.firstValue(h, x, id, k)
		return ok
	}
	var out []string
	for a := range h.txns {
		keys := map[uint32]bool{}
		for _, m := range h.txnMops(int32(a)) {
			keys[m.key] = true
		}
		for k := range keys {
			v1, ok := rr.lastValue(h, x, int32(a), k)
			if !ok {
				continue
			}
			seen := map[int32]bool{}
			stack := slices.Clone(succ(int32(a)))
			for len(stack) > 0 {
				b := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if b < 0 || seen[b] {
					continue
				}
				seen[b] = true
				if touches(b, k) {
					if v2, _ := rr.firstValue(h, x, b, k); v2 != v1 {
						out = append(out, fmt.Sprintf("%d:%d->%d", k, v1, v2))
					}
					continue
				}
				stack = append(stack, succ(b)...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestOrderEdgesEqualTheirDefinition holds the version edges inferred from process
// and real-time order (--sequential-keys, --linearizable-keys) to their definition on
// histories of many short-lived keys, the shape on which keeping every later key at
// every transaction made the inference quadratic (a 100,000-transaction history took
// more than ten minutes and 20 GB).
func TestOrderEdgesEqualTheirDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	rounds := 60
	if testing.Short() {
		rounds = 15
	}
	edges := 0
	for round := 0; round < rounds; round++ {
		ops := randomRetiringRegisters(rng, 40+rng.IntN(160), 2+rng.IntN(6))
		tc, err := newTxnChecker(RWRegisterModel, TxnOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			if err := tc.add(op); err != nil {
				t.Fatal(err)
			}
		}
		if err := tc.h.close(); err != nil {
			t.Fatal(err)
		}
		rr := tc.model.(*rwRegister)
		x := rr.index(tc.h)
		for _, order := range []struct {
			name string
			succ func(int32) []int32
		}{{"process", processSuccessors(tc.h)}, {"realtime", realtimeSuccessors(tc.h)}} {
			var got []string
			for _, e := range dedupEdges(rr.orderEdges(context.Background(), tc.h, x, order.succ)) {
				got = append(got, fmt.Sprintf("%d:%d->%d", e.key, e.from, e.to))
			}
			slices.Sort(got)
			want := orderEdgesByDefinition(rr, tc.h, x, order.succ)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, %s order: %d edges, want %d by the definition\ngot  %v\nwant %v", round, order.name, len(got), len(want), got, want)
			}
			edges += len(got)
		}
	}
	if edges == 0 {
		t.Fatal("no history gave a version edge: the test checks nothing")
	}
	t.Logf("%d version edges held to their definition", edges)
}
