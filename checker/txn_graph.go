package checker

import (
	"math"
	"slices"
)

// edgeBits is a set of the relations between two transactions. An edge can carry
// several (T2 both read T1's append and appended after it); a cycle names each edge by
// the first of its relations in the order ww, wr, rw, process, realtime, as Elle's
// explainer does, so that a data dependency always explains an edge before an order
// that needs no data.
type edgeBits uint8

const (
	relWW       edgeBits = 1 << iota // T2 wrote the version after T1's
	relWR                            // T2 read what T1 wrote
	relRW                            // T1 read a version T2 then replaced
	relProcess                       // one process ran T1, then T2
	relRealtime                      // T1 completed before T2 was invoked

	relData = relWW | relWR | relRW
)

// label returns the relation that names an edge carrying b.
func (b edgeBits) label() edgeBits {
	for _, r := range []edgeBits{relWW, relWR, relRW, relProcess, relRealtime} {
		if b&r != 0 {
			return r
		}
	}
	return 0
}

// String names a single relation.
func (b edgeBits) String() string {
	switch b {
	case relWW:
		return "ww"
	case relWR:
		return "wr"
	case relRW:
		return "rw"
	case relProcess:
		return "process"
	case relRealtime:
		return "realtime"
	}
	return "?"
}

// txnGraph is the dependency graph over a history's transactions (by id). Data and
// process edges are stored as adjacency arrays; real-time edges are not stored at all:
// the ok completions linked to a transaction are a contiguous run of them (see
// txnRec.rtLo), and so the transactions an ok one links to are a contiguous run of the
// invoked ones, invoked[rtL[v]:rtR[v]]. A real-time graph of a history of c
// concurrent clients has about c edges per transaction; this holds it in two integers.
type txnGraph struct {
	n        int
	off      []int32 // adjacency of v: to[off[v]:off[v+1]], bits alike
	to       []int32
	bits     []edgeBits
	realtime bool
	invoked  []int32 // invoked transactions, in invocation order
	rtL, rtR []int32
	dead     []bool // failed transactions: no vertex
	// count is the edges inferred, before those between the same two transactions
	// were merged (txnAnalysis.edges), when the graph was built from incoming edges.
	count int
	// in holds the stored edges target by target (incomingOf) until the adjacency
	// arrays are made of them (adjacent), and stored counts them.
	in     []*incoming
	stored int
	// done orders the transactions by their completions: a transaction's position in
	// the history, math.MaxInt64 for one never completed (incomingOf).
	done []int64
	// acyclic says every stored edge goes from a transaction that completed earlier to
	// one that completed later, or never (incomingOf): then the graph has no cycle.
	// Real-time and process order always do.
	acyclic bool
}

// buildGraph makes the graph of an analysis's edges, with process or real-time order
// as the check needs.
func (an *txnAnalysis) buildGraph() *txnGraph {
	h, c := an.h, an.c
	g := newTxnGraph(h)
	okOrder := h.okOrder()
	if c.process {
		last := map[int32]int32{}
		for _, id := range okOrder {
			p := h.txns[id].process
			if prev, ok := last[p]; ok {
				an.edge(prev, id, relProcess)
			}
			last[p] = id
		}
	}
	g.adjacency(an.from, an.to, an.bits)
	an.from, an.to, an.bits = nil, nil, nil
	if c.realtime {
		g.setRealtime(h, okOrder)
	}
	return g
}

// newTxnGraph returns the graph of h's transactions with no edge yet.
func newTxnGraph(h *txnHistory) *txnGraph {
	g := &txnGraph{n: len(h.txns), dead: make([]bool, len(h.txns))}
	for i := range h.txns {
		g.dead[i] = h.txns[i].status == txnFail
	}
	return g
}

// okOrder returns the ok transactions in the order of their completions.
func (h *txnHistory) okOrder() []int32 {
	okOrder := make([]int32, h.okCount)
	for i := range h.txns {
		if p := h.txns[i].okPos; p >= 0 {
			okOrder[p] = int32(i)
		}
	}
	return okOrder
}

// processPrev returns, for each transaction, the ok transaction its process completed
// before it, when it is ok itself; -1 for none.
func (h *txnHistory) processPrev(okOrder []int32) []int32 {
	prev := make([]int32, len(h.txns))
	for i := range prev {
		prev[i] = -1
	}
	last := map[int32]int32{}
	for _, id := range okOrder {
		p := h.txns[id].process
		if l, ok := last[p]; ok {
			prev[id] = l
		}
		last[p] = id
	}
	return prev
}

// setRealtime adds real-time order to the graph: the invoked transactions and, for
// each ok one, the run of them it precedes.
func (g *txnGraph) setRealtime(h *txnHistory, okOrder []int32) {
	g.realtime = true
	g.invoked = make([]int32, 0, len(h.txns))
	for i := range h.txns {
		if h.txns[i].inv >= 0 {
			g.invoked = append(g.invoked, int32(i))
		}
	}
	g.rtL, g.rtR = make([]int32, g.n), make([]int32, g.n)
	l, r := 0, 0
	for _, id := range okOrder {
		p := h.txns[id].okPos
		for l < len(g.invoked) && h.txns[g.invoked[l]].rtHi <= p {
			l++
		}
		for r < len(g.invoked) && h.txns[g.invoked[r]].rtLo <= p {
			r++
		}
		g.rtL[id], g.rtR[id] = int32(l), int32(max(l, r))
	}
}

// incoming is the edges into transactions lo..hi-1, target by target: those into t
// come from src[off[t-lo]:off[t-lo+1]], each source once with the relations of all its
// edges to t merged, in the order first found.
type incoming struct {
	lo, hi int
	off    []int32
	src    []int32
	bits   []edgeBits
	// count is the edges found, before merging, but for process order: what
	// txnAnalysis.edge counts.
	count int
	// backward holds the target of each edge from a transaction that did not
	// complete before its target did (txnGraph.done).
	backward []int32
}

// add records, while the edges into target t are found (they begin at start), an edge
// from a by rel; a self edge or one from a failed transaction is no edge.
func (in *incoming) add(g *txnGraph, t int32, start int, a int32, rel edgeBits) {
	if a == t || g.dead[a] {
		return
	}
	if g.done[a] >= g.done[t] {
		in.backward = append(in.backward, t)
	}
	if rel != relProcess {
		in.count++
	}
	for j := start; j < len(in.src); j++ {
		if in.src[j] == a {
			in.bits[j] |= rel
			return
		}
	}
	in.src = append(in.src, a)
	in.bits = append(in.bits, rel)
}

// buildGraph makes the dependency graph of h: into finds the dependencies into
// the transactions of each range incomingOf gives it (prev[id], when c asks for the
// process order, is the transaction of id's process before it), while the real-time
// order, when c asks for it, is worked out on another goroutine.
func buildGraph(h *txnHistory, c *txnCheck, into func(g *txnGraph, prev []int32, in *incoming)) *txnGraph {
	g := newTxnGraph(h)
	okOrder := h.okOrder()
	var prev []int32
	if c.process {
		prev = h.processPrev(okOrder)
	}
	rt := make(chan struct{})
	go func() {
		defer close(rt)
		if c.realtime {
			g.setRealtime(h, okOrder)
		}
	}()
	g.count = g.incomingOf(h, func(in *incoming) { into(g, prev, in) })
	<-rt
	return g
}

// incomingOf finds the edges into every transaction of g, the two halves of them on
// two goroutines: into(in) fills in, its range set, by in.add. The edges are kept, to
// be turned around into the adjacency only if the graph can have a cycle (adjacent):
// when every edge goes forward in the order of the completions, as every one of a
// history that its database applied in that order does, it cannot, and the search for
// components is not needed. It returns the edges counted (incoming.count).
func (g *txnGraph) incomingOf(h *txnHistory, into func(in *incoming)) int {
	g.done = make([]int64, g.n)
	for i := range h.txns {
		g.done[i] = h.txns[i].comp
		if g.done[i] < 0 {
			g.done[i] = math.MaxInt64
		}
	}
	mid := g.n / 2
	parts := []*incoming{{lo: 0, hi: mid}, {lo: mid, hi: g.n}}
	fin := make(chan struct{})
	go func() {
		defer close(fin)
		into(parts[1])
	}()
	into(parts[0])
	<-fin
	g.in, g.stored = parts, 0
	count, backward := 0, 0
	for _, in := range parts {
		g.stored += len(in.src)
		count += in.count
		backward += len(in.backward)
	}
	g.done = nil
	g.acyclic = backward == 0 || g.backwardIntoSinks(h)
	return count
}

// backwardIntoSinks reports whether every backward edge incomingOf found goes into a
// sink: a transaction with no edge out of it, stored or real-time, which no cycle can
// pass through. A transaction that ended unknown or never completed and whose appends
// no read saw is one: the edges into it from what was appended and read after its
// completion go backward in the order of the completions, and ordering it last
// instead puts them forward, so that the graph still has no cycle.
func (g *txnGraph) backwardIntoSinks(h *txnHistory) bool {
	hasOut := make([]bool, g.n)
	for _, in := range g.in {
		for _, a := range in.src {
			hasOut[a] = true
		}
	}
	for _, in := range g.in {
		for _, t := range in.backward {
			// Only an ok transaction is the source of real-time edges.
			if hasOut[t] || h.txns[t].status == txnOK {
				return false
			}
		}
	}
	return true
}

// adjacent makes the adjacency arrays of the edges incomingOf found, once.
func (g *txnGraph) adjacent() {
	if g.in != nil {
		g.setIncoming(g.in)
		g.in = nil
	}
}

// setIncoming makes the graph's stored edges those of parts, which cover the targets
// in order. Going through the targets in order, each source's edges come out sorted by
// target and, merged by incoming already, each target once: the adjacency that
// adjacency makes of an edge list, without its sorting.
func (g *txnGraph) setIncoming(parts []*incoming) {
	n := g.n
	g.off = make([]int32, n+1)
	total := 0
	for _, in := range parts {
		for _, a := range in.src {
			g.off[a+1]++
		}
		total += len(in.src)
	}
	for i := 1; i <= n; i++ {
		g.off[i] += g.off[i-1]
	}
	g.to = make([]int32, total)
	g.bits = make([]edgeBits, total)
	fill := slices.Clone(g.off[:n])
	for _, in := range parts {
		for t := in.lo; t < in.hi; t++ {
			for j := in.off[t-in.lo]; j < in.off[t-in.lo+1]; j++ {
				a := in.src[j]
				k := fill[a]
				fill[a]++
				g.to[k], g.bits[k] = int32(t), in.bits[j]
			}
		}
	}
}

// adjacency builds the adjacency arrays from an edge list, merging the relations of
// repeated edges.
func (g *txnGraph) adjacency(from, to []int32, bits []edgeBits) {
	g.off = make([]int32, g.n+1)
	for _, f := range from {
		g.off[f+1]++
	}
	for i := 1; i <= g.n; i++ {
		g.off[i] += g.off[i-1]
	}
	g.to = make([]int32, len(from))
	g.bits = make([]edgeBits, len(from))
	fill := slices.Clone(g.off[:g.n])
	for i, f := range from {
		j := fill[f]
		fill[f]++
		g.to[j], g.bits[j] = to[i], bits[i]
	}
	// Sort each vertex's edges by target and merge repeats, compacting in place.
	w := int32(0)
	for v := 0; v < g.n; v++ {
		lo, hi := g.off[v], g.off[v+1]
		g.off[v] = w
		seg := adjSeg{g.to[lo:hi], g.bits[lo:hi]}
		if hi-lo > 1 {
			seg.sort()
		}
		for i := lo; i < hi; i++ {
			if w > g.off[v] && g.to[w-1] == g.to[i] {
				g.bits[w-1] |= g.bits[i]
				continue
			}
			g.to[w], g.bits[w] = g.to[i], g.bits[i]
			w++
		}
	}
	g.off[g.n] = w
	g.to, g.bits = g.to[:w:w], g.bits[:w:w]
}

// adjSeg is one vertex's edges, sorted by target.
type adjSeg struct {
	to   []int32
	bits []edgeBits
}

func (s adjSeg) sort() {
	if len(s.to) <= 12 {
		for i := 1; i < len(s.to); i++ {
			for j := i; j > 0 && s.to[j] < s.to[j-1]; j-- {
				s.to[j], s.to[j-1] = s.to[j-1], s.to[j]
				s.bits[j], s.bits[j-1] = s.bits[j-1], s.bits[j]
			}
		}
		return
	}
	idx := make([]int, len(s.to))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(s.to[a]) - int(s.to[b]) })
	to, bits := slices.Clone(s.to), slices.Clone(s.bits)
	for i, j := range idx {
		s.to[i], s.bits[i] = to[j], bits[j]
	}
}

// degree returns the number of neighbours neighbour(v, i) enumerates.
func (g *txnGraph) degree(v int32) int32 {
	d := g.off[v+1] - g.off[v]
	if g.realtime {
		d += g.rtR[v] - g.rtL[v]
	}
	return d
}

// neighbour returns v's i-th neighbour, real-time ones after the stored ones; -1 for a
// failed transaction, which is no vertex.
func (g *txnGraph) neighbour(v, i int32) int32 {
	if d := g.off[v+1] - g.off[v]; i < d {
		return g.to[g.off[v]+i]
	} else {
		w := g.invoked[g.rtL[v]+i-d]
		if g.dead[w] {
			return -1
		}
		return w
	}
}

// empty reports whether the graph has no edge at all.
func (g *txnGraph) empty() bool {
	if len(g.to) > 0 || g.stored > 0 {
		return false
	}
	g.adjacent()
	if g.realtime {
		for v := 0; v < g.n; v++ {
			for i := int32(0); i < g.degree(int32(v)); i++ {
				if g.neighbour(int32(v), i) >= 0 {
					return false
				}
			}
		}
	}
	return true
}

// sccs returns the strongly connected components of more than one transaction, each
// sorted, by Tarjan's algorithm without recursion (a component of millions of
// transactions would exhaust the stack of a recursive one), and comp, each vertex's
// component among them (-1: in none).
func (g *txnGraph) sccs(stop func() bool) (comps [][]int32, comp []int32) {
	g.adjacent()
	n := g.n
	index := make([]int32, n) // 0: unvisited; else visit order + 1
	low := make([]int32, n)
	onStack := make([]bool, n)
	var stack []int32
	type frame struct{ v, i int32 }
	var calls []frame
	next := int32(1)
	comp = make([]int32, n)
	for i := range comp {
		comp[i] = -1
	}
	for root := int32(0); int(root) < n; root++ {
		if index[root] != 0 || g.dead[root] {
			continue
		}
		if stop != nil && root%4096 == 0 && stop() {
			return nil, comp
		}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		calls = append(calls[:0], frame{root, 0})
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			v := f.v
			if f.i < g.degree(v) {
				w := g.neighbour(v, f.i)
				f.i++
				switch {
				case w < 0:
				case index[w] == 0:
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{w, 0})
				case onStack[w]:
					low[v] = min(low[v], index[w])
				}
				continue
			}
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				u := calls[len(calls)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			i := len(stack) - 1
			for stack[i] != v {
				i--
			}
			members := stack[i:]
			for _, w := range members {
				onStack[w] = false
			}
			if len(members) > 1 {
				c := slices.Clone(members)
				slices.Sort(c)
				for _, w := range c {
					comp[w] = int32(len(comps))
				}
				comps = append(comps, c)
			}
			stack = stack[:i]
		}
	}
	return comps, comp
}

// localGraph is one strongly connected component on its own, its transactions
// numbered 0..n-1 in history order, every edge with both its relations and the one
// that names it.
type localGraph struct {
	ids  []int32 // global id of each local vertex
	off  []int32
	to   []int32
	rels []edgeBits
	lab  []edgeBits
}

// local extracts component c (sorted global ids members) from g. localID is scratch of
// g.n entries that this component's vertices may overwrite.
func (g *txnGraph) local(members []int32, c int32, comp, localID []int32) *localGraph {
	for i, v := range members {
		localID[v] = int32(i)
	}
	lg := &localGraph{ids: members, off: make([]int32, len(members)+1)}
	mark := make([]int32, len(members))
	pos := make([]int32, len(members))
	for i := range mark {
		mark[i] = -1
	}
	for i, v := range members {
		start := int32(len(lg.to))
		for j := int32(0); j < g.degree(v); j++ {
			w := g.neighbour(v, j)
			if w < 0 || comp[w] != c {
				continue
			}
			lw := localID[w]
			bits := relRealtime
			if j < g.off[v+1]-g.off[v] {
				bits = g.bits[g.off[v]+j]
			}
			if mark[lw] == int32(i) {
				lg.rels[pos[lw]] |= bits
				continue
			}
			mark[lw], pos[lw] = int32(i), int32(len(lg.to))
			lg.to = append(lg.to, lw)
			lg.rels = append(lg.rels, bits)
		}
		_ = start
		lg.off[i+1] = int32(len(lg.to))
	}
	lg.lab = make([]edgeBits, len(lg.rels))
	for i, r := range lg.rels {
		lg.lab[i] = r.label()
	}
	return lg
}

// edge returns the index of the edge u→v, or -1.
func (lg *localGraph) edge(u, v int32) int {
	for i := lg.off[u]; i < lg.off[u+1]; i++ {
		if lg.to[i] == v {
			return int(i)
		}
	}
	return -1
}
