package checker

import (
	"context"
	"slices"
)

// This file searches one region of transactions for a version order (see
// txn_search_order.go): a DPLL-style search over the choices of the region's pairs of
// writes of a key, with unit propagation (a choice whose edges would close a cycle
// forces the other), incremental cycle detection (Pearce and Kelly's dynamic
// topological order: an edge that goes forward in it costs nothing, one that goes
// backward a search bounded by the two ends' places), and conflict-directed
// backjumping (a choice that no cycle below it used is not tried the other way).
// The cycles it met are kept as a tree, the witness that no choice exists.

// orderKind says why an edge of the search's graph is there.
type orderKind uint8

const (
	okWR       orderKind = 1 + iota // the reader read the writer's value
	okInitRW                        // the reader read the initial state, which every write replaces
	okWW                            // the chosen (or assumed) order puts one write after the other
	okRW                            // the reader read a version the chosen (or assumed) order puts before the writer's
	okProcess                       // process order
	okRealtime                      // real-time order
)

// orderWhy is why an edge is there: its kind, the key and values, and the choice
// (variable) that gave it, -1 for one every order has.
type orderWhy struct {
	kind orderKind
	v    int32
	key  uint32
	val  int64 // wr, rw: the value read; ww: the earlier version
	val2 int64 // ww, rw: the later version; initial rw: the version written
}

// orderEdge is an edge between two vertices of a region's graph (txn_search_order.go's
// layers: a transaction's index in the region, or that plus the region's size).
type orderEdge struct {
	from, to int32
	why      orderWhy
}

// dynGraph is a graph with a topological order kept as edges are added (Pearce and
// Kelly, "A dynamic topological sort algorithm for directed acyclic graphs", JEA 2006),
// and removed last first.
type dynGraph struct {
	edges   []orderEdge
	out, in [][]int32
	ord, at []int32 // ord[v] is v's place, at[p] the vertex at place p
	seen    []uint32
	stamp   uint32
	parent  []int32
	fwd     []int32
	bwd     []int32
	stack   []int32
	places  []int32
	steps   int // vertices visited: what the searches cost
}

// newDynGraph returns a graph of n vertices with no edge, placed in the order given.
func newDynGraph(initial []int32) *dynGraph {
	n := len(initial)
	g := &dynGraph{out: make([][]int32, n), in: make([][]int32, n), ord: make([]int32, n), at: make([]int32, n),
		seen: make([]uint32, n), parent: make([]int32, n)}
	for p, v := range initial {
		g.ord[v], g.at[p] = int32(p), v
	}
	return g
}

// insert adds e, or, when e would close a cycle, adds nothing and returns the cycle:
// e, then the path back to its source.
func (g *dynGraph) insert(e orderEdge) []orderEdge {
	u, v := e.from, e.to
	if u == v {
		return []orderEdge{e}
	}
	lb, ub := g.ord[v], g.ord[u]
	if lb < ub {
		g.stamp += 2
		fs, bs := g.stamp, g.stamp+1
		// Forward from v, among the vertices placed before u: reaching u is a cycle.
		g.fwd, g.stack = g.fwd[:0], append(g.stack[:0], v)
		g.seen[v], g.parent[v] = fs, -1
		for len(g.stack) > 0 {
			w := g.stack[len(g.stack)-1]
			g.stack = g.stack[:len(g.stack)-1]
			g.fwd = append(g.fwd, w)
			g.steps++
			for _, ei := range g.out[w] {
				y := g.edges[ei].to
				if y == u {
					cy := []orderEdge{e}
					var back []orderEdge
					back = append(back, g.edges[ei])
					for z := w; z != v; z = g.edges[g.parent[z]].from {
						back = append(back, g.edges[g.parent[z]])
					}
					slices.Reverse(back)
					return append(cy, back...)
				}
				if g.seen[y] != fs && g.ord[y] < ub {
					g.seen[y], g.parent[y] = fs, ei
					g.stack = append(g.stack, y)
				}
			}
		}
		// Backward from u, among the vertices placed after v.
		g.bwd, g.stack = g.bwd[:0], append(g.stack[:0], u)
		g.seen[u] = bs
		for len(g.stack) > 0 {
			w := g.stack[len(g.stack)-1]
			g.stack = g.stack[:len(g.stack)-1]
			g.bwd = append(g.bwd, w)
			g.steps++
			for _, ei := range g.in[w] {
				y := g.edges[ei].from
				if g.seen[y] != bs && g.ord[y] > lb {
					g.seen[y] = bs
					g.stack = append(g.stack, y)
				}
			}
		}
		// The vertices that reach u go, in their order, before those v reaches, in
		// the places they held between them.
		byOrd := func(a, b int32) int { return int(g.ord[a] - g.ord[b]) }
		slices.SortFunc(g.fwd, byOrd)
		slices.SortFunc(g.bwd, byOrd)
		g.places = g.places[:0]
		for _, w := range g.bwd {
			g.places = append(g.places, g.ord[w])
		}
		for _, w := range g.fwd {
			g.places = append(g.places, g.ord[w])
		}
		slices.Sort(g.places)
		i := 0
		for _, w := range g.bwd {
			g.ord[w], g.at[g.places[i]] = g.places[i], w
			i++
		}
		for _, w := range g.fwd {
			g.ord[w], g.at[g.places[i]] = g.places[i], w
			i++
		}
	}
	id := int32(len(g.edges))
	g.edges = append(g.edges, e)
	g.out[u] = append(g.out[u], id)
	g.in[v] = append(g.in[v], id)
	return nil
}

// truncate removes the edges added after the first n, last first. The order stays a
// topological one.
func (g *dynGraph) truncate(n int) {
	for i := len(g.edges) - 1; i >= n; i-- {
		e := g.edges[i]
		g.out[e.from] = g.out[e.from][:len(g.out[e.from])-1]
		g.in[e.to] = g.in[e.to][:len(g.in[e.to])-1]
	}
	g.edges = g.edges[:n]
}

// orderVar is the choice of a region's two writes of a key: side 0 puts a's before
// b's, side 1 b's before a's; each side's edges.
type orderVar struct {
	key    uint32
	a, b   int32 // transactions, by their index in the region
	va, vb int64
	side   int8 // -1 while undecided
	edges  [2][]orderEdge
}

// orderNode is a node of the witness: a leaf is a cycle; a branch is a choice, each
// side's subtree below it.
type orderNode struct {
	v     int32
	cycle []orderEdge
	kids  [2]*orderNode
}

// orderAssign is a choice made: a decision, or forced by propagation, when the other
// side closes the cycle of reason.
type orderAssign struct {
	v      int32
	side   int8
	mark   int // the graph's edges before the choice's
	forced bool
	reason *orderNode
}

// orderSolver searches a region.
type orderSolver struct {
	g       *dynGraph
	vars    []orderVar
	trail   []orderAssign
	ctx     context.Context
	steps   int64 // most ticks the search may take
	stopped bool
	ticks   int64
}

type depSet map[int32]bool

func cycleDeps(cy []orderEdge) depSet {
	d := depSet{}
	for _, e := range cy {
		if e.why.v >= 0 {
			d[e.why.v] = true
		}
	}
	return d
}

func (d depSet) merge(o depSet) {
	for v := range o {
		d[v] = true
	}
}

// tick counts a step of the search (a choice looked at while propagating) and
// reports whether the search must stop: out of steps, or ctx ended. Steps, not
// time, bound a region, so that its outcome is the same on a busy machine.
func (s *orderSolver) tick() bool {
	s.ticks++
	if s.ticks > s.steps {
		s.stopped = true
	}
	if s.ticks&63 == 1 && !s.stopped {
		s.stopped = s.ctx.Err() != nil
	}
	return s.stopped
}

// insertAll adds es, or none of them and returns the cycle the first that cannot go
// closes.
func (s *orderSolver) insertAll(es []orderEdge) []orderEdge {
	mark := len(s.g.edges)
	for _, e := range es {
		if cy := s.g.insert(e); cy != nil {
			s.g.truncate(mark)
			return cy
		}
	}
	return nil
}

// forwardSide reports whether every edge of side goes forward in the order: then
// adding them closes no cycle.
func (s *orderSolver) forwardSide(v int32, side int8) bool {
	for _, e := range s.vars[v].edges[side] {
		if s.g.ord[e.from] >= s.g.ord[e.to] {
			return false
		}
	}
	return true
}

// fewerBackward returns the side of v with fewer edges backward in the order.
func (s *orderSolver) fewerBackward(v int32) int8 {
	var n [2]int
	for side := range 2 {
		for _, e := range s.vars[v].edges[side] {
			if s.g.ord[e.from] >= s.g.ord[e.to] {
				n[side]++
			}
		}
	}
	if n[1] < n[0] {
		return 1
	}
	return 0
}

// feasible reports whether side of v can be taken now, and if not the cycle it
// closes.
func (s *orderSolver) feasible(v int32, side int8) (bool, []orderEdge) {
	if s.forwardSide(v, side) {
		return true, nil
	}
	mark := len(s.g.edges)
	if cy := s.insertAll(s.vars[v].edges[side]); cy != nil {
		return false, cy
	}
	s.g.truncate(mark)
	return true, nil
}

// assign takes side of v; nil unless its edges close a cycle (then nothing is taken).
func (s *orderSolver) assign(v int32, side int8, forced bool, reason *orderNode) []orderEdge {
	mark := len(s.g.edges)
	if cy := s.insertAll(s.vars[v].edges[side]); cy != nil {
		return cy
	}
	s.vars[v].side = side
	s.trail = append(s.trail, orderAssign{v: v, side: side, mark: mark, forced: forced, reason: reason})
	return nil
}

// undo takes back the choices after the first n.
func (s *orderSolver) undo(n int) {
	for i := len(s.trail) - 1; i >= n; i-- {
		a := s.trail[i]
		s.vars[a.v].side = -1
		s.g.truncate(a.mark)
	}
	s.trail = s.trail[:n]
}

// propagate looks at every choice with no side whose edges go forward in the order:
// one side is tried, and if it closes a cycle the other is forced; until nothing
// changes;
// a choice both sides of which do is a conflict, returned as a branch with both
// cycles, with the choices its cycles used.
func (s *orderSolver) propagate() (*orderNode, depSet) {
	for {
		changed := false
		for v := range s.vars {
			if s.vars[v].side >= 0 || s.forwardSide(int32(v), 0) || s.forwardSide(int32(v), 1) {
				// A side whose edges go forward can be taken as things are: only a
				// choice with no such side forces or conflicts now.
				continue
			}
			if s.tick() {
				return nil, nil
			}
			// One side is tried: if it can be taken, trying it has put its edges
			// forward in the order, and the choice waits; if not, the other is forced.
			side := s.fewerBackward(int32(v))
			ok, c0 := s.feasible(int32(v), side)
			if ok {
				continue
			}
			reason := &orderNode{v: -1, cycle: c0}
			if c1 := s.assign(int32(v), 1-side, true, reason); c1 != nil {
				d := cycleDeps(c0)
				d.merge(cycleDeps(c1))
				delete(d, int32(v))
				n := &orderNode{v: int32(v)}
				n.kids[side], n.kids[1-side] = reason, &orderNode{v: -1, cycle: c1}
				return n, d
			}
			changed = true
		}
		if !changed {
			return nil, nil
		}
	}
}

// unwind adds to the witness n of a conflict the forced choices after the first mark
// that it used, each with the cycle its other side closes.
func (s *orderSolver) unwind(mark int, n *orderNode, d depSet) (*orderNode, depSet) {
	for i := len(s.trail) - 1; i >= mark; i-- {
		a := s.trail[i]
		if !a.forced || !d[a.v] {
			continue
		}
		b := &orderNode{v: a.v}
		b.kids[a.side], b.kids[1-a.side] = n, a.reason
		delete(d, a.v)
		for v := range cycleDeps(a.reason.cycle) {
			if v != a.v {
				d[v] = true
			}
		}
		n = b
	}
	return n, d
}

// solve searches on from the choices made: true when every choice left has a side
// whose edges go forward in the order, which then decides them all (the choices are
// left in place, and the order is the solution); else the witness and the choices
// made before that it used (s.stopped: neither).
func (s *orderSolver) solve() (bool, *orderNode, depSet) {
	mark := len(s.trail)
	if n, d := s.propagate(); n != nil || s.stopped {
		if s.stopped {
			return false, nil, nil
		}
		n, d = s.unwind(mark, n, d)
		s.undo(mark)
		return false, n, d
	}
	// Every undecided choice with a side whose edges go forward in the order takes
	// that side: all of them together close no cycle, the order stays topological,
	// and the search is done. A choice with no such side is decided.
	v := int32(-1)
	for i := range s.vars {
		if s.vars[i].side < 0 && !s.forwardSide(int32(i), 0) && !s.forwardSide(int32(i), 1) {
			v = int32(i)
			break
		}
	}
	if v < 0 {
		return true, nil, nil
	}
	first := s.fewerBackward(v)
	var kids [2]*orderNode
	all := depSet{}
	for _, side := range []int8{first, 1 - first} {
		at := len(s.trail)
		var n *orderNode
		var d depSet
		if cy := s.assign(v, side, false, nil); cy != nil {
			n, d = &orderNode{v: -1, cycle: cy}, cycleDeps(cy)
		} else {
			var sat bool
			sat, n, d = s.solve()
			if sat {
				return true, nil, nil
			}
			if s.stopped {
				return false, nil, nil
			}
			s.undo(at)
		}
		kids[side] = n
		if !d[v] {
			// The choice took no part in the conflict: the other side has it too.
			n, d = s.unwind(mark, n, d)
			s.undo(mark)
			return false, n, d
		}
		delete(d, v)
		all.merge(d)
	}
	n, d := s.unwind(mark, &orderNode{v: v, kids: kids}, all)
	s.undo(mark)
	return false, n, d
}

// solveRegion searches the region of transactions ms for a version order of the
// writes among them: its transactions in an order that the choice found makes
// topological, or the witness that there is none.
func (p *orderProblem) solveRegion(ctx context.Context, ms []int32, steps int64) (orderOutcome, []int32, *orderWitness, int64) {
	m := int32(len(ms))
	p.ensureLoc()
	for i, t := range ms {
		p.loc[t] = int32(i)
	}
	defer func() {
		for _, t := range ms {
			p.loc[t] = -1
		}
	}()
	layers := int32(p.spec.layers())
	// The vertices start in the order of pos, a transaction's rw vertex just
	// before it.
	byPos := slices.Clone(ms)
	slices.SortFunc(byPos, func(a, b int32) int { return cmpInt64(p.pos[a], p.pos[b]) })
	initial := make([]int32, 0, m*layers)
	for _, t := range byPos {
		if layers == 2 {
			initial = append(initial, p.loc[t]+m)
		}
		initial = append(initial, p.loc[t])
	}
	s := &orderSolver{g: newDynGraph(initial), ctx: ctx, steps: steps}
	// physical returns the edges of the graph for a dependency a → b.
	physical := func(a, b int32, rw bool, why orderWhy) []orderEdge {
		switch {
		case layers == 1:
			return []orderEdge{{a, b, why}}
		case rw:
			return []orderEdge{{a, b + m, why}}
		}
		return []orderEdge{{a, b, why}, {a + m, b, why}}
	}
	known := p.regionEdges(ms, physical)
	for _, e := range known {
		if cy := s.g.insert(e); cy != nil {
			return orderNone, nil, &orderWitness{p: p, ms: ms, root: &orderNode{v: -1, cycle: cy}}, 0
		}
	}
	s.vars = p.regionVars(ms, physical)
	sat, root, _ := s.solve()
	switch {
	case s.stopped:
		return orderStopped, nil, nil, s.ticks
	case !sat:
		return orderNone, nil, &orderWitness{p: p, ms: ms, root: root, vars: s.vars}, s.ticks
	}
	key := func(i int32) int32 {
		if layers == 2 {
			return max(s.g.ord[i], s.g.ord[i+m])
		}
		return s.g.ord[i]
	}
	order := slices.Clone(ms)
	slices.SortFunc(order, func(a, b int32) int { return int(key(p.loc[a]) - key(p.loc[b])) })
	return orderFound, order, nil, s.ticks
}

// regionEdges returns the edges among the region's transactions that every version
// order has: wr, rw from reads of the initial state to every write of the key, the
// options' assumed version order, and process or real-time order as the spec asks.
func (p *orderProblem) regionEdges(ms []int32, physical func(a, b int32, rw bool, why orderWhy) []orderEdge) []orderEdge {
	x, h := p.x, p.h
	var out []orderEdge
	in := func(t int32) bool { return p.loc[t] >= 0 }
	writers := p.regionWriters(ms)
	for _, t := range ms {
		if h.txns[t].status != txnOK {
			continue
		}
		ents := x.readEnts(t)
		for i, r := range x.reads(t) {
			if r.val == valueNil {
				for _, w := range writers[r.key] {
					if w.txn == t {
						continue
					}
					out = append(out, physical(p.loc[t], p.loc[w.txn], true, orderWhy{kind: okInitRW, v: -1, key: r.key, val: valueNil, val2: w.val})...)
				}
				continue
			}
			if ents[i] < 0 {
				continue
			}
			e := ents[i]
			for _, w := range x.writers[x.wAt[e]:x.wAt[e+1]] {
				if in(w) && w != t {
					out = append(out, physical(p.loc[w], p.loc[t], false, orderWhy{kind: okWR, v: -1, key: r.key, val: r.val})...)
				}
			}
		}
	}
	for _, v := range p.vg {
		for _, b := range x.writersOf(v.key, v.to) {
			if !in(b) {
				continue
			}
			for _, a := range x.writersOf(v.key, v.from) {
				if in(a) && a != b {
					out = append(out, physical(p.loc[a], p.loc[b], false, orderWhy{kind: okWW, v: -1, key: v.key, val: v.from, val2: v.to})...)
				}
			}
			for _, a := range x.readersOf(v.key, v.from) {
				if in(a) && a != b {
					out = append(out, physical(p.loc[a], p.loc[b], true, orderWhy{kind: okRW, v: -1, key: v.key, val: v.from, val2: v.to})...)
				}
			}
		}
	}
	switch p.spec.order {
	case relProcess:
		var oks []int32
		for _, t := range ms {
			if h.txns[t].status == txnOK {
				oks = append(oks, t)
			}
		}
		slices.SortFunc(oks, func(a, b int32) int { return int(h.txns[a].okPos - h.txns[b].okPos) })
		last := map[int32]int32{}
		for _, t := range oks {
			pr := h.txns[t].process
			if q, ok := last[pr]; ok {
				out = append(out, physical(p.loc[q], p.loc[t], false, orderWhy{kind: okProcess, v: -1})...)
			}
			last[pr] = t
		}
	case relRealtime:
		realtimeReduction(h, ms, func(a, b int32) {
			out = append(out, physical(p.loc[a], p.loc[b], false, orderWhy{kind: okRealtime, v: -1})...)
		})
	}
	return out
}

// regionWriters returns, by key, the writes of the region's transactions.
func (p *orderProblem) regionWriters(ms []int32) map[uint32][]orderWrite {
	out := map[uint32][]orderWrite{}
	for _, t := range ms {
		for _, w := range p.x.writes(t) {
			if w.val != valueNil {
				out[w.key] = append(out[w.key], orderWrite{txn: t, val: w.val})
			}
		}
	}
	return out
}

// regionVars returns the choices of the region: each two writes of a key, each side
// with its ww edge and the rw edges from the readers of the earlier version.
func (p *orderProblem) regionVars(ms []int32, physical func(a, b int32, rw bool, why orderWhy) []orderEdge) []orderVar {
	writers := p.regionWriters(ms)
	keys := make([]uint32, 0, len(writers))
	for k := range writers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var vars []orderVar
	for _, k := range keys {
		ws := writers[k]
		for i := 0; i < len(ws); i++ {
			for j := i + 1; j < len(ws); j++ {
				v := int32(len(vars))
				ov := orderVar{key: k, a: p.loc[ws[i].txn], b: p.loc[ws[j].txn], va: ws[i].val, vb: ws[j].val, side: -1}
				for side, pair := range [2][2]orderWrite{{ws[i], ws[j]}, {ws[j], ws[i]}} {
					first, then := pair[0], pair[1]
					es := physical(p.loc[first.txn], p.loc[then.txn], false, orderWhy{kind: okWW, v: v, key: k, val: first.val, val2: then.val})
					for _, r := range p.x.readersOf(k, first.val) {
						if p.loc[r] >= 0 && r != then.txn {
							es = append(es, physical(p.loc[r], p.loc[then.txn], true, orderWhy{kind: okRW, v: v, key: k, val: first.val, val2: then.val})...)
						}
					}
					ov.edges[side] = es
				}
				vars = append(vars, ov)
			}
		}
	}
	return vars
}
