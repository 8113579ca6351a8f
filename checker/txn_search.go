package checker

import (
	"context"
)

// searchState is where a path is in a cycle class's automaton: whether its last edge
// was rw, whether it took more than one rw edge, whether two were adjacent, whether it
// took a wr edge and an edge of the class's extra order.
type searchState uint8

const (
	stLastRW searchState = 1 << iota
	stMoreRW
	stAdjacent
	stWR
	stX
)

// relevant returns the state bits that matter to class cl.
func (cl cycleClass) relevant() searchState {
	var m searchState
	switch cl.rw {
	case rwNonadjacent:
		m |= stLastRW | stMoreRW
	case rwAdjacent:
		m |= stLastRW | stMoreRW | stAdjacent
	}
	if cl.needWR {
		m |= stWR
	}
	if cl.needX != 0 {
		m |= stX
	}
	return m
}

// step returns the state after taking an edge labelled l, and false when the class
// forbids it.
func (cl cycleClass) step(s searchState, l edgeBits) (searchState, bool) {
	if l == relRW {
		switch cl.rw {
		case rwNone, rwSingle:
			// A single-rw cycle starts with its rw edge: there is no other.
			return s, false
		case rwNonadjacent:
			if s&stLastRW != 0 {
				return s, false
			}
		case rwAdjacent:
			if s&stLastRW != 0 {
				s |= stAdjacent
			}
		}
		return s | stLastRW | stMoreRW, true
	}
	if cl.allow&l == 0 {
		return s, false
	}
	s &^= stLastRW
	if l == relWR {
		s |= stWR
	}
	if l == cl.needX {
		s |= stX
	}
	return s, true
}

// accepts reports whether a path in state s, back at the tail of its first edge,
// closes a cycle of class cl. The first edge is rw for the classes with rw edges, so
// a last edge that is rw too is adjacent to it.
func (cl cycleClass) accepts(s searchState) bool {
	switch cl.rw {
	case rwNonadjacent:
		if s&stMoreRW == 0 || s&stLastRW != 0 {
			return false
		}
	case rwAdjacent:
		if s&stMoreRW == 0 || s&(stAdjacent|stLastRW) == 0 {
			return false
		}
	}
	return (!cl.needWR || s&stWR != 0) && (cl.needX == 0 || s&stX != 0)
}

// pivot is the label of the edge every cycle of the class has, which the search starts
// with.
func (cl cycleClass) pivot() edgeBits {
	switch {
	case cl.rw != rwNone:
		return relRW
	case cl.needWR:
		return relWR
	case cl.needX != 0:
		return cl.needX
	}
	return relWW
}

// start is the state after the first edge, the pivot.
func (cl cycleClass) start() searchState {
	switch cl.pivot() {
	case relRW:
		return stLastRW // one rw edge so far
	case relWR:
		return stWR
	case relWW:
		return 0
	}
	return stX
}

// minLength is the fewest edges a cycle of the class can have.
func (cl cycleClass) minLength() int {
	if cl.rw == rwNonadjacent {
		return 4
	}
	return 2
}

// compactState numbers the states of a class's relevant bits 0..2^bits-1.
func compactState(s, relevant searchState) int {
	idx := 0
	for b := searchState(1); b <= stX; b <<= 1 {
		if relevant&b != 0 {
			idx <<= 1
			if s&b != 0 {
				idx |= 1
			}
		}
	}
	return idx
}

func stateCount(relevant searchState) int {
	n := 1
	for b := searchState(1); b <= stX; b <<= 1 {
		if relevant&b != 0 {
			n *= 2
		}
	}
	return n
}

// bfsEntry is one state reached: vertex, automaton state, the entry it was reached
// from and by which edge.
type bfsEntry struct {
	v      int32
	s      searchState
	parent int32
	edge   int32
}

// search returns the shortest cycle of class cl it finds in the component within
// ctx, and whether ctx ended before the search could tell there is none.
func (lg *localGraph) search(ctx context.Context, cl cycleClass) (*sccCycle, bool) {
	n := len(lg.ids)
	// A cycle of the class lies within one component of the edges it may take.
	mask := cl.allow
	if cl.rw != rwNone {
		mask |= relRW
	}
	comp, _ := tarjan(n, func(v, i int32) int32 {
		j := lg.off[v] + i
		if j >= lg.off[v+1] {
			return -1
		}
		if lg.lab[j]&mask == 0 {
			return -2
		}
		return lg.to[j]
	})
	rel := cl.relevant()
	states := stateCount(rel)
	visited := make([]uint32, n*states)
	stamp := uint32(0)
	var queue []bfsEntry
	var best *sccCycle
	pivot := cl.pivot()
	for u := int32(0); int(u) < n; u++ {
		for e := lg.off[u]; e < lg.off[u+1]; e++ {
			v := lg.to[e]
			if lg.lab[e] != pivot || comp[u] != comp[v] {
				continue
			}
			if ctx.Err() != nil {
				return best, best == nil
			}
			s0 := cl.start()
			stamp++
			queue = append(queue[:0], bfsEntry{v: v, s: s0, parent: -1, edge: e})
			visited[int(v)*states+compactState(s0, rel)] = stamp
			found := false
			for qi := 0; qi < len(queue) && !found; qi++ {
				if qi%1024 == 1023 && ctx.Err() != nil {
					return best, best == nil
				}
				x := queue[qi]
				for j := lg.off[x.v]; j < lg.off[x.v+1]; j++ {
					s, ok := cl.step(x.s, lg.lab[j])
					if !ok {
						continue
					}
					w := lg.to[j]
					if w == u {
						if !cl.accepts(s) {
							continue
						}
						if c := lg.walkCycle(cl, u, queue, int32(qi), j); c != nil && (best == nil || len(c.txns) < len(best.txns)) {
							best = c
						}
						found = true
						break
					}
					k := int(w)*states + compactState(s, rel)
					if visited[k] == stamp {
						continue
					}
					visited[k] = stamp
					queue = append(queue, bfsEntry{v: w, s: s, parent: int32(qi), edge: j})
				}
			}
			if best != nil && len(best.txns) <= cl.minLength() {
				return best, false
			}
		}
	}
	return best, false
}

// walkCycle turns the path that closed at u (queue entry at, then edge closing) into a
// cycle of class cl: the walk itself when it visits no transaction twice, else the
// first of its simple cycles that is of the class, or nil.
func (lg *localGraph) walkCycle(cl cycleClass, u int32, queue []bfsEntry, at int32, closing int32) *sccCycle {
	var edges []int32
	edges = append(edges, closing)
	for i := at; i >= 0; i = queue[i].parent {
		edges = append(edges, queue[i].edge)
	}
	// edges is backwards: reverse, so edges[0] leaves u.
	for i, j := 0, len(edges)-1; i < j; i, j = i+1, j-1 {
		edges[i], edges[j] = edges[j], edges[i]
	}
	verts := make([]int32, len(edges))
	verts[0] = u
	for i := 1; i < len(edges); i++ {
		verts[i] = lg.to[edges[i-1]]
	}
	for _, c := range simpleCycles(verts, edges) {
		labels := make([]edgeBits, len(c.edges))
		for i, e := range c.edges {
			labels[i] = lg.lab[e]
		}
		if classify(labels) != cl.name {
			continue
		}
		txns := make([]int32, len(c.verts))
		for i, v := range c.verts {
			txns[i] = lg.ids[v]
		}
		return &sccCycle{txns: txns, labels: labels, kind: cl.name}
	}
	return nil
}

type walk struct {
	verts, edges []int32
}

// simpleCycles splits a closed walk (verts[i] --edges[i]--> verts[i+1 mod n]) at its
// repeated vertices into simple cycles.
func simpleCycles(verts, edges []int32) []walk {
	pos := map[int32]int{}
	for j, v := range verts {
		if i, ok := pos[v]; ok {
			inner := walk{verts[i:j], edges[i:j]}
			outer := walk{append(append([]int32(nil), verts[:i]...), verts[j:]...), append(append([]int32(nil), edges[:i]...), edges[j:]...)}
			return append(simpleCycles(inner.verts, inner.edges), simpleCycles(outer.verts, outer.edges)...)
		}
		pos[v] = j
	}
	return []walk{{verts, edges}}
}

// anyCycle returns a shortest cycle through the component's first transaction, of
// whatever class: what a search that ran out of time still shows of the component.
func (lg *localGraph) anyCycle() *sccCycle {
	n := len(lg.ids)
	parent := make([]int32, n)
	via := make([]int32, n)
	for i := range parent {
		parent[i] = -2
	}
	parent[0] = -1
	queue := []int32{0}
	for qi := 0; qi < len(queue); qi++ {
		x := queue[qi]
		for j := lg.off[x]; j < lg.off[x+1]; j++ {
			w := lg.to[j]
			if w == 0 {
				var edges []int32
				edges = append(edges, j)
				for y := x; y != 0; y = parent[y] {
					edges = append(edges, via[y])
				}
				c := &sccCycle{}
				for i := len(edges) - 1; i >= 0; i-- {
					e := edges[i]
					from := int32(0)
					if i < len(edges)-1 {
						from = lg.to[edges[i+1]]
					}
					c.txns = append(c.txns, lg.ids[from])
					c.labels = append(c.labels, lg.lab[e])
				}
				c.kind = classify(c.labels)
				return c
			}
			if parent[w] == -2 {
				parent[w], via[w] = x, j
				queue = append(queue, w)
			}
		}
	}
	return nil
}
