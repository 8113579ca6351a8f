package checker

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// laGraph returns the list-append dependency graph (ww, wr and rw edges, no order) of
// ops as "from->to" pairs of history indices, sorted.
func laGraph(t *testing.T, ops []histories.Op) []string {
	t.Helper()
	tc, err := newTxnChecker(ListAppendModel, TxnOptions{})
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
	an, err := tc.model.analyze(context.Background(), tc.h, tc.c)
	if err != nil {
		t.Fatal(err)
	}
	an.join()
	seen := map[string]bool{}
	g := an.graph
	g.adjacent()
	for v := 0; v < g.n; v++ {
		for j := g.off[v]; j < g.off[v+1]; j++ {
			if g.bits[j]&relData != 0 {
				seen[fmt.Sprintf("%d->%d", tc.h.at(int32(v)), tc.h.at(g.to[j]))] = true
			}
		}
	}
	var out []string
	for e := range seen {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// TestElleListAppendGraph holds the inferred dependencies to the graphs of Elle's
// graph-test (list_append_test.clj), each history's transactions at indices 0, 1, ...
func TestElleListAppendGraph(t *testing.T) {
	e := func(s string) string { return elleTxn(t, s) }
	h := func(ss ...string) []histories.Op {
		var evs []tev
		for _, s := range ss {
			evs = append(evs, tok(e(s)))
		}
		return txnOps(evs...)
	}
	for _, c := range []struct {
		name string
		ops  []histories.Op
		want string
	}{
		{"one append", h("ax1"), ""},
		{"empty read", h("rx"), ""},
		{"one append one read", h("ax1", "rx1"), "0->1"},
		{"read empty, append, read", h("rx", "ax1", "rx1"), "0->1 1->2"},
		{"append, append, read", h("ax2", "ax1", "rx12"), "0->2 1->0"},
		{"Adya's figure 3", h("az1ax1ay1", "rx1ay2", "ry12az3", "rz13"), "0->1 0->2 1->2 2->3"},
		{"G0", h("ax1ay1", "ax2ay2", "rx12ry21"), "0->1 0->2 1->0 1->2"},
		{"G1c", h("ax1ry1", "ax2ay1", "rx12"), "0->1 1->0 1->2"},
		{"G2", h("rxay1", "ryax1", "rx1ry1"), "0->1 0->2 1->0 1->2"},
		{"info reads", txnOps(tev{0, histories.Info, `[["append","x",2],["r","y",null]]`}, tev{1, histories.OK, e("ax1ay1")}, tev{2, histories.OK, e("rx12ry1")}),
			"0->2 1->0 1->2"},
		{"single append without reads", h("rx", "ax1"), "0->1"},
		{"multiple appends without reads", h("rx", "ax1", "ax2"), "0->1 0->2"},
		{"write-write", h("ax1", "ax2", "rx12"), "0->1 1->2"},
		{"write-read", h("ax1", "rx1", "ax2", "rx12"), "0->1 0->2 1->2 2->3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := strings.Join(laGraph(t, c.ops), " ")
			if got != c.want {
				t.Errorf("edges %q, want %q", got, c.want)
			}
		})
	}
	t.Run("duplicate appends", func(t *testing.T) {
		ops := txnOps(tev{0, histories.Invoke, `[["append","x",1],["r","y",null]]`}, tev{1, histories.Invoke, `[["append","y",2],["append","x",1]]`})
		if _, err := checkTxn(context.Background(), ListAppendModel, ops, TxnOptions{}); err == nil || !strings.Contains(err.Error(), "appended to key x by two transactions") {
			t.Errorf("err %v, want the duplicate append named", err)
		}
	})
}

// TestElleListAppendCases holds the anomalies found without cycles to the cases Elle's
// g1a-cases, g1b-cases and internal-cases tests expect: how many of each kind, and for
// which transactions (history indices).
func TestElleListAppendCases(t *testing.T) {
	e := func(s string) string { return elleTxn(t, s) }
	ok := func(v string) tev { return tok(v) }
	for _, c := range []struct {
		name string
		ops  []histories.Op
		kind string
		want [][]int64 // each case's transactions
	}{
		{"G1a valid and invalid reads", txnOps(ok(e("rx1ax2")), ok(e("rx12ry3")), tev{0, histories.Fail, e("ax1")}), "G1a", [][]int64{{0, 2}, {1, 2}}},
		{"G1b valid and invalid reads", txnOps(ok(e("rx1")), ok(e("rx12ry3")), ok(e("ax1ax2")), ok(e("rx123"))), "G1b", [][]int64{{0, 2}}},
		{"G1b internal reads", txnOps(ok(e("ax1rx1ax2"))), "G1b", nil},
		{"internal good", txnOps(ok(`[["r","y",[5,6]],["append","x",3],["r","x",[1,2,3]],["append","x",4],["r","x",[1,2,3,4]]]`)), "internal", nil},
		{"internal read-append-read", txnOps(
			// Elle's test appends 3 in each; a checked history needs unique appends.
			ok(`[["r","x",[1,2]],["append","x",3],["r","x",[1,2]]]`),
			ok(`[["r","x",[1,2]],["append","x",13],["r","x",[0,2,13]]]`),
			ok(`[["r","x",[1,2]],["append","x",23],["r","x",[1,2,23,4]]]`),
			ok(`[["r","x",[1,2]],["append","x",33],["r","x",[1]]]`)), "internal", [][]int64{{0}, {1}, {2}, {3}}},
		{"internal append-read", txnOps(ok(`[["append","x",3],["r","x",[1,2,3,4]]]`), ok(`[["append","x",13],["r","x",[]]]`)), "internal", [][]int64{{0}, {1}}},
		{"internal FaunaDB example", txnOps(tev{1, histories.Invoke, `[["append",0,6],["r",0,null]]`}, tev{1, histories.OK, `[["append",0,6],["r",0,null]]`}), "internal", [][]int64{{1}}},
		{"future read external", cat2(pairOf(t, 0, histories.OK, e("rx012ax1"))), "future-read", [][]int64{{1}}},
		{"future read internal", cat2(pairOf(t, 0, histories.OK, e("ax1rx01ax0ax3"))), "future-read", [][]int64{{1}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := checkTxnModel(t, ListAppendModel, c.ops, TxnOptions{Anomalies: []string{c.kind}})
			var got [][]int64
			for _, a := range r.Anomalies {
				if a.Kind == c.kind {
					got = append(got, a.Ops)
				}
			}
			if !slices.EqualFunc(got, c.want, slices.Equal[[]int64]) {
				t.Errorf("%s cases %v, want %v\n%s", c.kind, got, c.want, anomalyText(r))
			}
		})
	}
}

func cat2(evs []tev) []histories.Op { return txnOps(evs...) }

// TestElleRWRegisterVersionGraphs holds the register version inference from an order of
// transactions to Elle's transaction-graph->version-graphs tests
// (rw_register_test.clj): given the order as successor lists over the test's
// transactions, the version edges inferred.
func TestElleRWRegisterVersionGraphs(t *testing.T) {
	type tx struct {
		status histories.Type
		s      string
	}
	ok := func(s string) tx { return tx{histories.OK, s} }
	fail := func(s string) tx { return tx{histories.Fail, s} }
	info := func(s string) tx { return tx{histories.Info, s} }
	for _, c := range []struct {
		name string
		txns []tx
		succ map[int32][]int32
		want string
	}{
		{"r->w", []tx{ok("rx1"), ok("wx2")}, map[int32][]int32{0: {1}}, "x:1->2"},
		{"fork-join", []tx{ok("rx1"), ok("wx2"), ok("wx3"), ok("rx4")}, map[int32][]int32{0: {1, 2}, 1: {3}, 2: {3}}, "x:1->2 x:1->3 x:2->4 x:3->4"},
		{"external ww", []tx{ok("wx1wx2"), ok("wx3wx4rx5")}, map[int32][]int32{0: {1}}, "x:2->4"},
		{"external wr", []tx{ok("wx1wx2"), ok("rx3rx4wx5")}, map[int32][]int32{0: {1}}, "x:2->3"},
		{"external rw", []tx{ok("rx1rx2"), ok("wx3wx4rx5")}, map[int32][]int32{0: {1}}, "x:1->4"},
		{"external rr", []tx{ok("rx1rx2"), ok("rx3rx4wx5")}, map[int32][]int32{0: {1}}, "x:1->3"},
		{"no v1 -> v1", []tx{ok("wx1"), ok("rx1")}, map[int32][]int32{0: {1}}, ""},
		{"no deps on failed or crashed reads", []tx{ok("wx1"), fail("rx2"), info("rx3"), fail("rx4"), ok("rx5"), info("rx6"), ok("rx7")},
			map[int32][]int32{0: {1, 2}, 3: {4}, 5: {6}}, ""},
		{"crashed writes count, failed ones not", []tx{ok("wx1"), fail("wx2"), info("rx3wx4"), fail("wx5"), ok("rx6"), info("wx8"), ok("rx9")},
			map[int32][]int32{0: {1, 2}, 3: {4}, 5: {6}}, "x:1->4 x:8->9"},
		{"see through failed and crashed", []tx{ok("wx1"), info("rx_"), ok("rx3"), ok("wy1"), fail("wy2"), ok("ry3")},
			map[int32][]int32{0: {1, 2}, 3: {4, 5}}, "x:1->3 y:1->3"},
		{"see through a run of them", []tx{ok("wx1"), info("rx_"), fail("wx2"), ok("wx3")},
			map[int32][]int32{0: {1}, 1: {2}, 2: {3}}, "x:1->3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var evs []tev
			for i, x := range c.txns {
				evs = append(evs, tev{i, x.status, elleReg(t, x.s)})
			}
			tc, err := newTxnChecker(RWRegisterModel, TxnOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range txnOps(evs...) {
				if err := tc.add(op); err != nil {
					t.Fatal(err)
				}
			}
			rr := tc.model.(*rwRegister)
			es := rr.orderEdges(context.Background(), tc.h, rr.index(tc.h), func(id int32) []int32 { return c.succ[id] })
			var got []string
			for _, e := range dedupEdges(es) {
				got = append(got, fmt.Sprintf("%s:%s->%s", tc.h.in.keyText[e.key][1:2], tc.h.in.valueString(e.from), tc.h.in.valueString(e.to)))
			}
			sort.Strings(got)
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("version edges %q, want %q", s, c.want)
			}
		})
	}
}
