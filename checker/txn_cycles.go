package checker

import (
	"context"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// The search for cycles, per strongly connected component of the dependency graph.
//
// First, for each model whose forbidden cycles a subgraph captures (read-uncommitted:
// ww edges; snapshot isolation: ww and wr edges, each rw edge after one of those;
// ...), the component's part in that subgraph is checked for a cycle. That is cheap
// (one more Tarjan) and exact, so it proves a model violated even when no cycle can be
// shown in time, and it rules out whole classes: without a snapshot-isolation cycle
// there is no G0, G1c, G-single or G-nonadjacent to look for.
//
// Then each class of cycle still possible is searched for, worst first (G0 before
// G1c before G-single-item ..., data cycles before those that need process or real-time
// order), and a class implied by one already found is skipped: the cycle found is the
// evidence for both. A class is a small automaton over the labels of the edges (how
// many rw edges, whether two are adjacent, whether a wr, process or real-time edge was
// taken), and the search is a breadth-first search of the product of the component
// and that automaton: from every edge that a cycle of the class must contain (an rw
// edge, say), the shortest path back to its tail that the automaton accepts. Breadth
// first, the first cycle through an edge is the shortest through it; the search tries
// the edges in history order and keeps the shortest cycle it finds within its budget.

// cycleClass is one class of cycle the search can look for.
type cycleClass struct {
	name   string
	allow  edgeBits // the relations allowed besides rw
	rw     rwMode
	needWR bool
	needX  edgeBits // relProcess or relRealtime for a -process or -realtime class
}

type rwMode uint8

const (
	rwNone        rwMode = iota // no rw edge
	rwSingle                    // exactly one
	rwNonadjacent               // two or more, never two in a row
	rwAdjacent                  // two or more, two of them in a row
)

// cycleClasses lists the classes in search order.
var cycleClasses = func() []cycleClass {
	base := []cycleClass{
		{name: "G0", allow: relWW},
		{name: "G1c", allow: relWW | relWR, needWR: true},
		{name: "G-single-item", allow: relWW | relWR, rw: rwSingle},
		{name: "G-nonadjacent-item", allow: relWW | relWR, rw: rwNonadjacent},
		{name: "G2-item", allow: relWW | relWR, rw: rwAdjacent},
	}
	var all []cycleClass
	for _, c := range base {
		all = append(all, c)
		for _, x := range []struct {
			suffix string
			rel    edgeBits
		}{{"-process", relProcess}, {"-realtime", relRealtime}} {
			v := c
			v.name, v.allow, v.needX = c.name+x.suffix, c.allow|x.rel, x.rel
			all = append(all, v)
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return lessAnomaly(all[i].name, all[j].name) })
	return all
}()

// cycleTypes is the set of every class name, with the predicate classes Elle names
// and that the models forbid, which these data models (no predicate reads) never
// produce.
var cycleTypes = func() map[string]bool {
	m := map[string]bool{}
	for _, c := range cycleClasses {
		m[c.name] = true
	}
	for _, b := range []string{"G-single", "G-nonadjacent", "G2"} {
		for _, s := range []string{"", "-process", "-realtime"} {
			m[b+s] = true
		}
	}
	return m
}()

// classify names a cycle by its edges' labels, as Elle's explainer does: by its rw
// edges (one: G-single-item; several, two in a row: G2-item; several, never in a row:
// G-nonadjacent-item), else G1c with a wr edge, else G0; with -realtime or -process
// when it needs that order.
func classify(labels []edgeBits) string {
	var ww, wr, rw, proc, rt int
	adjacent := false
	for i, l := range labels {
		switch l {
		case relWW:
			ww++
		case relWR:
			wr++
		case relRW:
			rw++
			if labels[(i+len(labels)-1)%len(labels)] == relRW {
				adjacent = true
			}
		case relProcess:
			proc++
		case relRealtime:
			rt++
		}
	}
	var t string
	switch {
	case rw == 1:
		t = "G-single-item"
	case rw > 1 && adjacent:
		t = "G2-item"
	case rw > 1:
		t = "G-nonadjacent-item"
	case wr > 0:
		t = "G1c"
	default:
		t = "G0"
	}
	switch {
	case rt > 0:
		t += "-realtime"
	case proc > 0:
		t += "-process"
	}
	return t
}

// existsSpec is a model whose forbidden cycles are the cycles of a subgraph: the
// edges carrying a (and, for an extension, single rw edges after one of those).
type existsSpec struct {
	model string // canonical
	a     edgeBits
	ext   bool // cycles of a, each rw edge preceded by one of a
}

var existsSpecs = []existsSpec{
	{"PL-1", relWW, false},
	{"PL-2", relWW | relWR, false},
	{"PL-SI", relWW | relWR, true},
	{"PL-2.99", relWW | relWR | relRW, false},
	{"PL-3", relWW | relWR | relRW, false},
	{"strong-session-PL-1", relWW | relProcess, false},
	{"strong-session-PL-2", relWW | relWR | relProcess, false},
	{"strong-session-snapshot-isolation", relWW | relWR | relProcess, true},
	{"strong-session-serializable", relWW | relWR | relRW | relProcess, false},
	{"strong-PL-1", relWW | relRealtime, false},
	{"strong-PL-2", relWW | relWR | relRealtime, false},
	{"strong-snapshot-isolation", relWW | relWR | relRealtime, true},
	{"PL-SS", relWW | relWR | relRW | relRealtime, false},
}

// subgraphText says which edges a spec's subgraph holds.
func (s existsSpec) subgraphText() string {
	var parts []string
	for _, r := range []edgeBits{relWW, relWR, relRW, relProcess, relRealtime} {
		if s.a&r != 0 {
			parts = append(parts, r.String())
		}
	}
	t := strings.Join(parts, " ")
	if s.ext {
		t += ", and rw edges each after one of those"
	}
	return t
}

// sccCycle is a cycle found in one component: its transactions (global ids) in order,
// and the label of the edge from each to the next.
type sccCycle struct {
	txns   []int32
	labels []edgeBits
	kind   string
}

// sccExists is a cycle-exists proof: the smallest component of a model's subgraph.
type sccExists struct {
	spec existsSpec
	txns []int32
}

// sccTimeout is a search that ran out of its budget.
type sccTimeout struct {
	class    string
	notFound []string // classes searched before, without a cycle
	size     int
}

// sccResult is what one component's search found.
type sccResult struct {
	cycles  []sccCycle
	exists  []sccExists
	timeout *sccTimeout
}

// searchComponents searches every component, in parallel, each within budget.
func searchComponents(ctx context.Context, g *txnGraph, comps [][]int32, comp []int32, budget time.Duration) []sccResult {
	out := make([]sccResult, len(comps))
	localID := make([]int32, g.n)
	workers := min(runtime.GOMAXPROCS(0), len(comps))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				lg := g.local(comps[i], int32(i), comp, localID)
				sctx, cancel := context.WithTimeout(ctx, budget)
				out[i] = searchComponent(sctx, lg)
				cancel()
			}
		}()
	}
	for i := range comps {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

// searchComponent finds the cycles of one strongly connected component.
func searchComponent(ctx context.Context, lg *localGraph) sccResult {
	var res sccResult
	var have edgeBits
	for _, r := range lg.rels {
		have |= r
	}
	// Which models this component proves violated, weakest first; a model stronger
	// than one found needs no proof of its own.
	ruledOut := map[string]bool{}
	for _, s := range existsSpecs {
		// Without process or real-time edges here, the spec that needs them has the
		// subgraph, and the answer, of the one before it.
		if x := s.a &^ relData; ruledOut[s.model] || x != 0 && have&x == 0 {
			continue
		}
		if members := lg.existsCycle(s); members != nil {
			txns := make([]int32, len(members))
			for i, v := range members {
				txns[i] = lg.ids[v]
			}
			res.exists = append(res.exists, sccExists{spec: s, txns: txns})
			for m := range closure(modelImpliedBy, s.model) {
				ruledOut[m] = true
			}
		}
	}
	// Classes no cycle can be of: those the models still possible here forbid.
	var possible []string
	for _, s := range existsSpecs {
		if !ruledOut[s.model] {
			possible = append(possible, s.model)
		}
	}
	impossible := prohibitedAnomalies(possible, nil)
	skip := map[string]bool{}
	var searched []string
	for _, cl := range cycleClasses {
		if skip[cl.name] || impossible[cl.name] || cl.needX != 0 && have&cl.needX == 0 {
			continue
		}
		searched = append(searched, cl.name)
		cyc, timedOut := lg.search(ctx, cl)
		if timedOut {
			var notFound []string
			for _, s := range searched[:len(searched)-1] {
				if !slices.ContainsFunc(res.cycles, func(c sccCycle) bool { return c.kind == s }) {
					notFound = append(notFound, s)
				}
			}
			res.timeout = &sccTimeout{class: cl.name, notFound: notFound, size: len(lg.ids)}
			if len(res.cycles) == 0 {
				if c := lg.anyCycle(); c != nil {
					res.cycles = append(res.cycles, *c)
				}
			}
			return res
		}
		if cyc != nil {
			res.cycles = append(res.cycles, *cyc)
			for a := range closure(anomalyImplies, cl.name) {
				skip[a] = true
			}
		}
	}
	return res
}

// tarjan returns the strongly connected component of each of n vertices of the graph
// that next enumerates (next(v, i) is v's i-th neighbour, -1 when they are
// exhausted), without recursion, and the number of components.
func tarjan(n int, next func(v, i int32) int32) (comp []int32, count int32) {
	index := make([]int32, n)
	low := make([]int32, n)
	onStack := make([]bool, n)
	comp = make([]int32, n)
	var stack []int32
	type frame struct{ v, i int32 }
	var calls []frame
	counter := int32(1)
	for root := int32(0); int(root) < n; root++ {
		if index[root] != 0 {
			continue
		}
		index[root], low[root] = counter, counter
		counter++
		stack = append(stack, root)
		onStack[root] = true
		calls = append(calls[:0], frame{root, 0})
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			w := next(v, f.i)
			if w >= 0 {
				f.i++
				switch {
				case index[w] == 0:
					index[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			if w == -2 {
				f.i++
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				for {
					x := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[x] = false
					comp[x] = count
					if x == v {
						break
					}
				}
				count++
			}
		}
	}
	return comp, count
}

// filtered enumerates the edges of lg whose relations meet mask; -2 skips an edge
// that does not, -1 ends the enumeration.
func (lg *localGraph) filtered(mask edgeBits) func(v, i int32) int32 {
	return func(v, i int32) int32 {
		j := lg.off[v] + i
		if j >= lg.off[v+1] {
			return -1
		}
		if lg.rels[j]&mask == 0 {
			return -2
		}
		return lg.to[j]
	}
}

// existsCycle returns the smallest non-trivial component of spec s's subgraph of lg,
// or nil when it has none.
func (lg *localGraph) existsCycle(s existsSpec) []int32 {
	n := len(lg.ids)
	var comp []int32
	var count int32
	if !s.ext {
		comp, count = tarjan(n, lg.filtered(s.a))
	} else {
		// The extension as a graph of twice the vertices: 2v is v entered by an edge of
		// a (or not entered yet), 2v+1 is v entered by an rw edge, which only a 2v may
		// take. Its cycles are exactly those with no two rw edges in a row.
		comp, count = tarjan(2*n, func(x, i int32) int32 {
			v, afterRW := x/2, x%2 == 1
			d := lg.off[v+1] - lg.off[v]
			// Each edge is offered twice: as an a-edge, then as an rw edge.
			if i >= 2*d {
				return -1
			}
			e := lg.off[v] + i/2
			w, rels := lg.to[e], lg.rels[e]
			if i%2 == 0 {
				if rels&s.a == 0 {
					return -2
				}
				return 2 * w
			}
			if afterRW || rels&relRW == 0 {
				return -2
			}
			return 2*w + 1
		})
	}
	size := make([]int32, count)
	for _, c := range comp {
		size[c]++
	}
	best := int32(-1)
	for c, sz := range size {
		if sz > 1 && (best < 0 || sz < size[best]) {
			best = int32(c)
		}
	}
	if best < 0 {
		return nil
	}
	seen := map[int32]bool{}
	var members []int32
	for x, c := range comp {
		if c != best {
			continue
		}
		v := int32(x)
		if s.ext {
			v /= 2
		}
		if !seen[v] {
			seen[v] = true
			members = append(members, v)
		}
	}
	slices.Sort(members)
	return members
}
