package checker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// rwRegister is the rw-register model. A register's reads do not reveal the order of
// its versions, so the checker infers what it can (versionOrders) and derives ww and
// rw dependencies along that partial order.
type rwRegister struct {
	internal []rwInternal
	// vg holds the version order's edges other than the initial state's, for
	// explanations.
	vg map[versionEdge]bool
	// x indexes the external reads and writes as the transactions are taken.
	x rwIndex
	// states is take's scratch.
	states []kv
}

type kv struct {
	key uint32
	val int64
}

type versionEdge struct {
	key      uint32
	from, to int64
}

type rwInternal struct {
	txn      int32
	mop      int
	expected int64
}

// rwIndex is every transaction's external reads and writes, flat, and for each (key,
// value) the transactions that externally wrote and read it. It is built as the
// transactions are taken (rwRegister.take), in the order they complete.
type rwIndex struct {
	// The external reads of transaction t are r[ext[t].r:][:ext[t].nr], its writes
	// w[ext[t].w:][:ext[t].nw].
	ext  []rwExt
	r, w []kv
	// rEnt and wEnt are the entry of each read and write in vals: a committed
	// transaction's reads and a write of one that did not fail have one; -1 else.
	rEnt, wEnt []int32
	vals       elemTable // (key, value) → entry
	// writers[wAt[e]:wAt[e+1]] are the transactions that take part and wrote entry
	// e's value; readers[rAt[e]:rAt[e+1]] the committed ones that read it.
	wAt, rAt         []int32
	writers, readers []int32
}

// rwExt is where a transaction's external reads and writes are in rwIndex.r and w.
type rwExt struct {
	r, w   int32
	nr, nw int32
}

func (x *rwIndex) reads(t int32) []kv {
	e := x.ext[t]
	return x.r[e.r : e.r+e.nr]
}

func (x *rwIndex) writes(t int32) []kv {
	e := x.ext[t]
	return x.w[e.w : e.w+e.nw]
}

// readEnts and writeEnts are the entries of reads(t) and writes(t).
func (x *rwIndex) readEnts(t int32) []int32 {
	e := x.ext[t]
	return x.rEnt[e.r : e.r+e.nr]
}

func (x *rwIndex) writeEnts(t int32) []int32 {
	e := x.ext[t]
	return x.wEnt[e.w : e.w+e.nw]
}

// index returns the index of h's transactions, those never taken with nothing indexed.
func (rr *rwRegister) index(h *txnHistory) *rwIndex {
	for len(rr.x.ext) < len(h.txns) {
		rr.x.ext = append(rr.x.ext, rwExt{})
	}
	return &rr.x
}

// take indexes transaction id, of status, its micro-ops mops: its external reads and
// writes, and the entries of those a committed transaction's reads and the writes of
// one that did not fail have.
func (x *rwIndex) take(h *txnHistory, id int32, status txnStatus, mops []txnMop) {
	for int(id) >= len(x.ext) {
		x.ext = grownTo(x.ext, 1, h.expect(len(x.ext)+1))
		x.ext = append(x.ext, rwExt{})
	}
	r0, w0 := len(x.r), len(x.w)
	x.r = grownTo(x.r, len(mops), h.expect(len(x.r)+len(mops)))
	x.w = grownTo(x.w, len(mops), h.expect(len(x.w)+len(mops)))
	x.r, x.w = extOf(mops, x.r, x.w)
	x.ext[id] = rwExt{r: int32(r0), w: int32(w0), nr: int32(len(x.r) - r0), nw: int32(len(x.w) - w0)}
	x.rEnt = grownTo(x.rEnt, len(x.r)-r0, h.expect(len(x.r)))
	x.wEnt = grownTo(x.wEnt, len(x.w)-w0, h.expect(len(x.w)))
	want := h.expect(len(x.vals.entries) + len(mops))
	x.vals.entries = grownTo(x.vals.entries, len(mops), want)
	if len(x.vals.slots) > 0 && 2*(x.vals.indexed+len(mops)) > len(x.vals.slots) {
		// The index would grow: to the size the history is expected to need.
		x.vals.reserve(max(want, x.vals.indexed+len(mops)))
	}
	for _, v := range x.w[w0:] {
		e := int32(-1)
		if status != txnFail {
			e = x.entry(v)
		}
		x.wEnt = append(x.wEnt, e)
	}
	for _, v := range x.r[r0:] {
		e := int32(-1)
		if status == txnOK {
			e = x.entry(v)
		}
		x.rEnt = append(x.rEnt, e)
	}
}

// writersOf returns the transactions that take part and wrote k = v.
func (x *rwIndex) writersOf(k uint32, v int64) []int32 {
	e := x.vals.get(k, v)
	if e < 0 {
		return nil
	}
	return x.writers[x.wAt[e]:x.wAt[e+1]]
}

// readersOf returns the committed transactions that read k = v.
func (x *rwIndex) readersOf(k uint32, v int64) []int32 {
	e := x.vals.get(k, v)
	if e < 0 {
		return nil
	}
	return x.readers[x.rAt[e]:x.rAt[e+1]]
}

// group builds the lists of the transactions at each entry, from parallel arrays of
// entries and transactions, as offsets and members.
func group(n int, ents, txns []int32) (at, members []int32) {
	at = make([]int32, n+1)
	for _, e := range ents {
		at[e+1]++
	}
	for i := 1; i <= n; i++ {
		at[i] += at[i-1]
	}
	members = make([]int32, len(ents))
	fill := slices.Clone(at[:n])
	for i, e := range ents {
		members[fill[e]] = txns[i]
		fill[e]++
	}
	return at, members
}

func newRWRegister() *rwRegister { return &rwRegister{} }

// take records a completed transaction.
func (rr *rwRegister) take(h *txnHistory, id int32, d *txnValue) error {
	status := h.txns[id].status
	for _, m := range d.mops {
		switch {
		case m.kind == mopAppend:
			return fmt.Errorf("history index %d: rw-register transaction has an append to %s (want w or r)", h.at(id), h.in.keyString(m.key))
		case m.isList:
			return fmt.Errorf("history index %d: rw-register read of %s returned a list (a list-append history? give --model list-append)", h.at(id), h.in.keyString(m.key))
		}
	}
	h.appendMops(id, d, nil)
	rr.x.take(h, id, status, h.txnMops(id))
	if status != txnOK {
		return nil
	}
	// Internal consistency: within a transaction a read sees the key's last value,
	// once a micro-op has shown it (a first read of nothing shows nothing).
	states := rr.states[:0]
	for i, m := range h.txnMops(id) {
		j := -1
		for k := range states {
			if states[k].key == m.key {
				j = k
				break
			}
		}
		if m.kind == mopRead && j >= 0 && states[j].val != valueNil && states[j].val != m.val {
			rr.internal = append(rr.internal, rwInternal{txn: id, mop: i, expected: states[j].val})
			break
		}
		if j < 0 {
			states = append(states, kv{m.key, m.val})
		} else {
			states[j].val = m.val
		}
	}
	rr.states = states
	return nil
}

// extOf appends a transaction's external reads (the first micro-op on a key, when it
// is a read) and external writes (the last write to a key) to reads and writes.
func extOf(mops []txnMop, reads, writes []kv) ([]kv, []kv) {
	for i, m := range mops {
		first := true
		for _, p := range mops[:i] {
			if p.key == m.key {
				first = false
				break
			}
		}
		if m.kind == mopRead && first {
			reads = append(reads, kv{m.key, m.val})
		}
		if m.kind == mopWrite {
			last := true
			for _, n := range mops[i+1:] {
				if n.key == m.key && n.kind == mopWrite {
					last = false
					break
				}
			}
			if last {
				writes = append(writes, kv{m.key, m.val})
			}
		}
	}
	return reads, writes
}

func lookup(s []kv, key uint32) (int64, bool) {
	for _, x := range s {
		if x.key == key {
			return x.val, true
		}
	}
	return 0, false
}

// analyze infers the version orders, the dependencies, and the anomalies that need no
// cycle.
func (rr *rwRegister) analyze(ctx context.Context, h *txnHistory, c *txnCheck) (*txnAnalysis, error) {
	an := newTxnAnalysis(h, c, rr)
	n := len(h.txns)
	x := rr.index(h)
	an.aside(func(side *txnAnalysis) { rr.cases(h, side) })
	// Entries for every value written or read, and who wrote each (failed
	// transactions aside), in the order of the transactions.
	var wEnts, wTxns []int32
	for id, t := range h.txns {
		if t.status == txnFail {
			continue
		}
		for _, e := range x.writeEnts(int32(id)) {
			wEnts = append(wEnts, e)
			wTxns = append(wTxns, int32(id))
		}
	}
	allAt, all := group(len(x.vals.entries), wEnts, wTxns)
	// The transactions that take part: committed ones, and unknown ones a committed
	// read proves committed by seeing one of their writes.
	part := make([]bool, n)
	for id, t := range h.txns {
		part[id] = t.status == txnOK
	}
	var rEnts, rTxns []int32
	for id, t := range h.txns {
		if t.status != txnOK {
			continue
		}
		ents := x.readEnts(int32(id))
		for i, r := range x.reads(int32(id)) {
			e := ents[i]
			rEnts = append(rEnts, e)
			rTxns = append(rTxns, int32(id))
			if r.val == valueNil {
				continue
			}
			ws := all[allAt[e]:allAt[e+1]]
			if len(ws) > 1 {
				return nil, fmt.Errorf("history index %d: %s had value %s written by more than one transaction (history indices %d and %d): rw-register needs every written value unique per key",
					h.at(int32(id)), h.in.keyString(r.key), h.in.valueString(r.val), h.at(ws[0]), h.at(ws[1]))
			}
			for _, w := range ws {
				part[w] = true
			}
		}
	}
	var pEnts, pTxns []int32
	for i, e := range wEnts {
		if part[wTxns[i]] {
			pEnts, pTxns = append(pEnts, e), append(pTxns, wTxns[i])
		}
	}
	ne := len(x.vals.entries)
	x.wAt, x.writers = group(ne, pEnts, pTxns)
	x.rAt, x.readers = group(ne, rEnts, rTxns)
	if ctx.Err() != nil {
		return an, nil
	}
	edges := rr.versionOrders(ctx, h, c, an, x)
	if ctx.Err() != nil {
		return an, nil // the caller says the check was interrupted
	}
	rr.vg = make(map[versionEdge]bool, len(edges))
	for _, e := range edges {
		rr.vg[e] = true
	}
	an.graph = rr.graph(h, c, x, part, edges)
	return an, nil
}

// graph builds the dependency graph: the wr, ww and rw dependencies into each
// transaction (incoming), with process or real-time order as the check needs. part
// says which transactions take part; edges is the version order beyond the initial
// state's.
func (rr *rwRegister) graph(h *txnHistory, c *txnCheck, x *rwIndex, part []bool, edges []versionEdge) *txnGraph {
	// The version edges into each version, by key and version.
	into := slices.Clone(edges)
	slices.SortFunc(into, func(a, b versionEdge) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return cmp.Compare(a.to, b.to)
	})
	// The entry of each key's initial state, read as null: -1 when no committed read
	// saw it.
	nilEnt := make([]int32, h.in.nkeys())
	for k := range nilEnt {
		nilEnt[k] = x.vals.get(uint32(k), valueNil)
	}
	return buildGraph(h, c, func(g *txnGraph, prev []int32, in *incoming) { rr.incoming(h, g, x, part, nilEnt, into, prev, in) })
}

// incoming finds the dependencies into each transaction of in's range: wr from the one
// write of what each of its external reads saw; and into one that takes part, for each
// of its external writes, rw from the reads of the key's initial state, and ww and rw
// from the writes and reads of the versions into (the version order) puts before it;
// and from prev[id], when prev is given, the process order.
func (rr *rwRegister) incoming(h *txnHistory, g *txnGraph, x *rwIndex, part []bool, nilEnt []int32, into []versionEdge, prev []int32, in *incoming) {
	in.off = make([]int32, in.hi-in.lo+1)
	for id := in.lo; id < in.hi; id++ {
		t := int32(id)
		start := len(in.src)
		in.off[id-in.lo] = int32(start)
		if h.txns[id].status == txnFail {
			continue
		}
		if h.txns[id].status == txnOK {
			ents := x.readEnts(t)
			for i, r := range x.reads(t) {
				if r.val == valueNil {
					continue
				}
				e := ents[i]
				for _, w := range x.writers[x.wAt[e]:x.wAt[e+1]] {
					in.add(g, t, start, w, relWR)
				}
			}
		}
		if part[id] {
			for _, w := range x.writes(t) {
				if w.val == valueNil {
					continue
				}
				if ne := nilEnt[w.key]; ne >= 0 {
					for _, a := range x.readers[x.rAt[ne]:x.rAt[ne+1]] {
						in.add(g, t, start, a, relRW)
					}
				}
				if len(into) == 0 {
					continue
				}
				i, _ := slices.BinarySearchFunc(into, versionEdge{key: w.key, to: w.val}, func(e, target versionEdge) int {
					if e.key != target.key {
						return cmp.Compare(e.key, target.key)
					}
					return cmp.Compare(e.to, target.to)
				})
				for ; i < len(into) && into[i].key == w.key && into[i].to == w.val; i++ {
					for _, a := range x.writersOf(w.key, into[i].from) {
						in.add(g, t, start, a, relWW)
					}
					for _, a := range x.readersOf(w.key, into[i].from) {
						in.add(g, t, start, a, relRW)
					}
				}
			}
		}
		if prev != nil && prev[id] >= 0 {
			in.add(g, t, start, prev[id], relProcess)
		}
	}
	in.off[in.hi-in.lo] = int32(len(in.src))
}

// entry returns the entry of (key, value), adding it when absent.
func (x *rwIndex) entry(v kv) int32 {
	if e := x.vals.get(v.key, v.val); e >= 0 {
		return e
	}
	e := x.vals.add(v.key, v.val)
	x.vals.index(e)
	return e
}

// versionOrders returns the edges of every key's version order that the assumptions
// of c's options allow, besides the initial state's (before every value, implicit):
// each assumption whose edges keep every key's order acyclic. An assumption that does
// not is left out and each cycle it would make is reported as cyclic-versions.
//
// Inference from an order takes time in proportion to the history times the keys
// live at once; it stops early, its edges incomplete, when ctx ends.
func (rr *rwRegister) versionOrders(ctx context.Context, h *txnHistory, c *txnCheck, an *txnAnalysis, x *rwIndex) []versionEdge {
	type source struct {
		name  string
		edges func() []versionEdge
	}
	var sources []source
	if c.opt.WFRKeys {
		sources = append(sources, source{"wfr-keys", func() []versionEdge {
			var es []versionEdge
			for id, t := range h.txns {
				if t.status != txnOK {
					continue
				}
				for _, r := range x.reads(int32(id)) {
					if w, ok := lookup(x.writes(int32(id)), r.key); ok && r.val != valueNil && w != r.val {
						es = append(es, versionEdge{r.key, r.val, w})
					}
				}
			}
			return es
		}})
	}
	if c.opt.SequentialKeys {
		sources = append(sources, source{"sequential-keys", func() []versionEdge {
			return rr.orderEdges(ctx, h, x, processSuccessors(h))
		}})
	}
	if c.opt.LinearizableKeys {
		sources = append(sources, source{"linearizable-keys", func() []versionEdge {
			return rr.orderEdges(ctx, h, x, realtimeSuccessors(h))
		}})
	}
	var accepted []versionEdge
	names := []string{"initial-state"}
	for _, s := range sources {
		merged := append(slices.Clone(accepted), s.edges()...)
		if ctx.Err() != nil {
			return nil
		}
		cycles := versionCycles(merged)
		if len(cycles) == 0 {
			accepted = merged
			names = append(names, s.name)
			continue
		}
		for _, cy := range cycles {
			vals := make([]string, len(cy.vals))
			for i, v := range cy.vals {
				vals[i] = h.in.valueString(v)
			}
			an.add("cyclic-versions", txnAnomaly{text: fmt.Sprintf("%s's versions %s would each precede one another by %s: the assumption of %s is left out",
				h.in.keyString(cy.key), strings.Join(vals, ", "), strings.Join(append(slices.Clone(names), s.name), ", "), s.name)})
		}
	}
	return dedupEdges(accepted)
}

func dedupEdges(es []versionEdge) []versionEdge {
	sort.Slice(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.key != b.key {
			return a.key < b.key
		}
		if a.from != b.from {
			return a.from < b.from
		}
		return a.to < b.to
	})
	return slices.Compact(es)
}

type versionCycle struct {
	key  uint32
	vals []int64
}

// versionCycles returns each key's cycles of versions: its strongly connected
// components of more than one value.
func versionCycles(es []versionEdge) []versionCycle {
	es = dedupEdges(slices.Clone(es))
	var out []versionCycle
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].key == es[i].key {
			j++
		}
		idx := map[int64]int32{}
		var vals []int64
		id := func(v int64) int32 {
			if x, ok := idx[v]; ok {
				return x
			}
			idx[v] = int32(len(vals))
			vals = append(vals, v)
			return int32(len(vals) - 1)
		}
		adj := map[int32][]int32{}
		intoNil := false
		for _, e := range es[i:j] {
			a, b := id(e.from), id(e.to)
			adj[a] = append(adj[a], b)
			intoNil = intoNil || e.to == valueNil
		}
		if intoNil {
			// The initial state precedes every value, and here something is said to
			// precede the initial state.
			n := id(valueNil)
			for v := range vals {
				if int32(v) != n {
					adj[n] = append(adj[n], int32(v))
				}
			}
		}
		comp, count := tarjan(len(vals), func(v, k int32) int32 {
			if int(k) >= len(adj[v]) {
				return -1
			}
			return adj[v][k]
		})
		members := make([][]int64, count)
		for v, c := range comp {
			members[c] = append(members[c], vals[v])
		}
		for _, m := range members {
			if len(m) > 1 {
				slices.Sort(m)
				out = append(out, versionCycle{es[i].key, m})
			}
		}
		i = j
	}
	return out
}

// processSuccessors returns, for each transaction, the next ok transaction of its
// process (the process order Elle's sequential-keys assumption reads), ok ones only.
func processSuccessors(h *txnHistory) func(id int32) []int32 {
	next := make([]int32, len(h.txns))
	for i := range next {
		next[i] = -1
	}
	okOrder := make([]int32, h.okCount)
	for i, t := range h.txns {
		if t.okPos >= 0 {
			okOrder[t.okPos] = int32(i)
		}
	}
	last := map[int32]int32{}
	for _, id := range okOrder {
		p := h.txns[id].process
		if prev, ok := last[p]; ok {
			next[prev] = id
		}
		last[p] = id
	}
	return func(id int32) []int32 {
		if next[id] < 0 {
			return nil
		}
		return []int32{next[id]}
	}
}

// realtimeSuccessors returns, for each ok transaction, the transactions real-time order
// links it to (the transitive reduction of "completed before it was invoked").
func realtimeSuccessors(h *txnHistory) func(id int32) []int32 {
	an := &txnAnalysis{h: h, c: &txnCheck{realtime: true}}
	g := an.buildGraph()
	return func(id int32) []int32 {
		var out []int32
		for i := int32(0); i < g.degree(id); i++ {
			out = append(out, g.neighbour(id, i))
		}
		return out
	}
}

// orderEdges infers version edges from an order of transactions: when T1 precedes T2
// and both touched key k, the version T1 left k at precedes the one T2 first saw or
// wrote. For each transaction and key, only the first transactions after it (along
// each path of the order) to touch the key count; later ones follow from those.
//
// It returns early, with the edges found so far, when ctx ends.
func (rr *rwRegister) orderEdges(ctx context.Context, h *txnHistory, x *rwIndex, succ func(int32) []int32) []versionEdge {
	n := len(h.txns)
	touches := func(id int32) []uint32 {
		var ks []uint32
		switch h.txns[id].status {
		case txnOK:
			for _, r := range x.reads(id) {
				ks = append(ks, r.key)
			}
			fallthrough
		case txnInfo:
			for _, w := range x.writes(id) {
				if !slices.Contains(ks, w.key) {
					ks = append(ks, w.key)
				}
			}
		}
		return ks
	}
	// A key's entry matters at id only if id or a transaction before it touches the
	// key: only those read first[id] (ids before id are the only ones that reach it).
	// Keeping the others made the maps hold every key touched later, n times over,
	// quadratic in a history whose keys are retired as Elle's generator retires them.
	// firstTouch[k] is the smallest id touching k; lastPred[b] the smallest id with b
	// as a successor, after which first[b] is read no more and is dropped.
	firstTouch := map[uint32]int32{}
	lastPred := make([]int32, n)
	for id := int32(n - 1); id >= 0; id-- {
		for _, k := range touches(id) {
			firstTouch[k] = id
		}
		for _, b := range succ(id) {
			if b >= 0 {
				lastPred[b] = id
			}
		}
	}
	needed := func(k uint32, id int32) bool {
		f, ok := firstTouch[k]
		return ok && f <= id
	}
	// first[id][k]: the first transactions after id to touch k. Computed in reverse
	// id order, which is a topological order of both orders.
	first := make([]map[uint32][]int32, n)
	var es []versionEdge
	seen := map[versionEdge]struct{}{}
	// The union of the successors' lists for a key takes each transaction once: mark[y]
	// is the stamp of the last (transaction, key) whose list y joined.
	mark := make([]int32, n)
	stamp := int32(0)
	type succTouch struct {
		b   int32
		own []uint32
	}
	var succs []succTouch
	var keys []uint32
	for id := int32(n - 1); id >= 0; id-- {
		if id%4096 == 0 && ctx.Err() != nil {
			return es
		}
		succs, keys = succs[:0], keys[:0]
		for _, b := range succ(id) {
			if b < 0 {
				continue
			}
			st := succTouch{b, touches(b)}
			succs = append(succs, st)
			for _, k := range st.own {
				if needed(k, id) && !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
			for k := range first[b] {
				if needed(k, id) && !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		m := make(map[uint32][]int32, len(keys))
		for _, k := range keys {
			if stamp == math.MaxInt32 {
				clear(mark)
				stamp = 0
			}
			stamp++
			var list []int32
			add := func(y int32) {
				if mark[y] != stamp {
					mark[y] = stamp
					list = append(list, y)
				}
			}
			for _, st := range succs {
				if slices.Contains(st.own, k) {
					add(st.b)
					continue
				}
				for _, y := range first[st.b][k] {
					add(y)
				}
			}
			m[k] = list
		}
		for _, st := range succs {
			if lastPred[st.b] == id {
				first[st.b] = nil
			}
		}
		first[id] = m
		es = rr.appendOrderEdges(es, seen, h, x, id, m)
	}
	return es
}

// appendOrderEdges appends the version edges from transaction a's last value of each
// key to the first values of the transactions first[a] names for it, each edge once:
// readers of one version share its edges, three to four times over in Elle's
// histories.
func (rr *rwRegister) appendOrderEdges(es []versionEdge, seen map[versionEdge]struct{}, h *txnHistory, x *rwIndex, a int32, first map[uint32][]int32) []versionEdge {
	for k, bs := range first {
		v1, ok := rr.lastValue(h, x, a, k)
		if !ok {
			continue
		}
		for _, b := range bs {
			if v2, ok := rr.firstValue(h, x, b, k); ok && v2 != v1 {
				e := versionEdge{k, v1, v2}
				if _, dup := seen[e]; !dup {
					seen[e] = struct{}{}
					es = append(es, e)
				}
			}
		}
	}
	return es
}

// lastValue is the version of k a transaction left: its last write, else what it read.
func (rr *rwRegister) lastValue(h *txnHistory, x *rwIndex, id int32, k uint32) (int64, bool) {
	switch h.txns[id].status {
	case txnOK:
		if v, ok := lookup(x.writes(id), k); ok {
			return v, true
		}
		return lookup(x.reads(id), k)
	case txnInfo:
		return lookup(x.writes(id), k)
	}
	return 0, false
}

// firstValue is the version of k a transaction first saw: its external read, else its
// write.
func (rr *rwRegister) firstValue(h *txnHistory, x *rwIndex, id int32, k uint32) (int64, bool) {
	switch h.txns[id].status {
	case txnOK:
		if v, ok := lookup(x.reads(id), k); ok {
			return v, true
		}
		return lookup(x.writes(id), k)
	case txnInfo:
		return lookup(x.writes(id), k)
	}
	return 0, false
}

// cases adds internal, G1a, G1b and lost-update.
func (rr *rwRegister) cases(h *txnHistory, an *txnAnalysis) {
	for _, c := range rr.internal {
		m := h.txnMops(c.txn)[c.mop]
		an.add("internal", txnAnomaly{txns: []int32{c.txn},
			text: fmt.Sprintf("%s read %s = %s, but its own earlier micro-ops mean it should have read %s",
				h.name(c.txn), h.in.keyString(m.key), h.in.valueString(m.val), h.in.valueString(c.expected))})
	}
	// The writes of failed transactions, and the intermediate ones (a transaction
	// that wrote the key again after), each (key, value) with the last transaction
	// that made it so; Go maps of the same took a third of this on long histories.
	var failed, intermediate kvOwners
	for id, t := range h.txns {
		mops := h.txnMops(int32(id))
		for i, m := range mops {
			if m.kind != mopWrite {
				continue
			}
			if t.status == txnFail {
				failed.set(m.key, m.val, int32(id))
			}
			for _, n := range mops[i+1:] {
				if n.kind == mopWrite && n.key == m.key {
					intermediate.set(m.key, m.val, int32(id))
					break
				}
			}
		}
	}
	// Lost update candidates: each (key, value) read before a write of the key, in
	// the order first seen (lost.vals's entries), and the transactions, in order.
	var lost kvOwners
	var cands []kvOwner
	var readFirst []kv
	var written []uint32
	for id, t := range h.txns {
		if t.status != txnOK {
			continue
		}
		mops := h.txnMops(int32(id))
		for _, m := range mops {
			if m.kind != mopRead || m.val == valueNil {
				continue
			}
			if w := failed.get(m.key, m.val); w >= 0 {
				an.add("G1a", txnAnomaly{txns: []int32{int32(id), w},
					text: fmt.Sprintf("%s read %s = %s, which %s wrote, and that transaction failed: it read aborted state",
						h.name(int32(id)), h.in.keyString(m.key), h.in.valueString(m.val), h.name(w))})
			}
			if w := intermediate.get(m.key, m.val); w >= 0 && w != int32(id) {
				an.add("G1b", txnAnomaly{txns: []int32{int32(id), w},
					text: fmt.Sprintf("%s read %s = %s, an intermediate write of %s, which wrote %s again after it",
						h.name(int32(id)), h.in.keyString(m.key), h.in.valueString(m.val), h.name(w), h.in.keyString(m.key))})
			}
		}
		// Lost update: the value read of a key before the transaction first wrote it.
		readFirst, written = readFirst[:0], written[:0]
		for _, m := range mops {
			switch {
			case m.kind == mopWrite && !slices.Contains(written, m.key):
				written = append(written, m.key)
				if v, ok := lookup(readFirst, m.key); ok {
					cands = append(cands, kvOwner{lost.entry(m.key, v), int32(id)})
				}
			case m.kind == mopRead && !slices.Contains(written, m.key):
				if _, ok := lookup(readFirst, m.key); !ok {
					readFirst = append(readFirst, kv{m.key, m.val})
				}
			}
		}
	}
	at, txnsOf := group(len(lost.vals.entries), kvEnts(cands), kvTxns(cands))
	for e, en := range lost.vals.entries {
		txns := txnsOf[at[e]:at[e+1]]
		if len(txns) < 2 {
			continue
		}
		names := make([]string, len(txns))
		for i, t := range txns {
			names[i] = h.name(t)
		}
		an.add("lost-update", txnAnomaly{txns: slices.Clone(txns),
			text: fmt.Sprintf("%s all read %s = %s and then wrote %s: each built on a version the others also replaced",
				strings.Join(names, ", "), h.in.keyString(en.key), h.in.valueString(en.elem), h.in.keyString(en.key))})
	}
}

// kvOwners maps (key, value) pairs to a transaction, the last one set.
type kvOwners struct {
	vals  elemTable
	owner []int32
}

// entry returns the entry of (k, v), adding one when absent.
func (o *kvOwners) entry(k uint32, v int64) int32 {
	e := o.vals.get(k, v)
	if e < 0 {
		e = o.vals.add(k, v)
		o.vals.index(e)
		o.owner = append(o.owner, -1)
	}
	return e
}

func (o *kvOwners) set(k uint32, v int64, txn int32) { o.owner[o.entry(k, v)] = txn }

// get returns the transaction set for (k, v), or -1.
func (o *kvOwners) get(k uint32, v int64) int32 {
	if e := o.vals.get(k, v); e >= 0 {
		return o.owner[e]
	}
	return -1
}

// kvOwner is an entry of a kvOwners and a transaction.
type kvOwner struct{ ent, txn int32 }

func kvEnts(c []kvOwner) []int32 {
	out := make([]int32, len(c))
	for i, x := range c {
		out[i] = x.ent
	}
	return out
}

func kvTxns(c []kvOwner) []int32 {
	out := make([]int32, len(c))
	for i, x := range c {
		out[i] = x.txn
	}
	return out
}

// explainEdge says why a precedes b by rel.
func (rr *rwRegister) explainEdge(h *txnHistory, a, b int32, rel edgeBits, an, bn string) (string, cycleStep) {
	step := cycleStep{Type: rel.String(), FromMop: -1, ToMop: -1}
	am, bm := h.txnMops(a), h.txnMops(b)
	ar, aw := extOf(am, nil, nil)
	br, bw := extOf(bm, nil, nil)
	mopOf := func(mops []txnMop, kind mopKind, k uint32, v int64) int {
		for i, m := range mops {
			if m.kind == kind && m.key == k && m.val == v {
				return i
			}
		}
		return -1
	}
	show := func(v int64) string {
		if v == valueNil {
			return "null (never written)"
		}
		return h.in.valueString(v)
	}
	switch rel {
	case relWR:
		for _, r := range br {
			if v, ok := lookup(aw, r.key); ok && v == r.val && r.val != valueNil {
				step.Key, step.Value = h.in.keyJSON(r.key), h.in.valueJSON(r.val)
				step.FromMop, step.ToMop = mopOf(am, mopWrite, r.key, r.val), mopOf(bm, mopRead, r.key, r.val)
				return fmt.Sprintf("%s read %s = %s, which %s wrote", bn, h.in.keyString(r.key), h.in.valueString(r.val), an), step
			}
		}
	case relWW, relRW:
		from, kind := aw, mopWrite
		if rel == relRW {
			from, kind = ar, mopRead
		}
		for _, x := range from {
			v2, ok := lookup(bw, x.key)
			if !ok || !(x.val == valueNil && v2 != valueNil || rr.vg[versionEdge{x.key, x.val, v2}]) {
				continue
			}
			step.Key, step.Value, step.Value2 = h.in.keyJSON(x.key), h.in.valueJSON(x.val), h.in.valueJSON(v2)
			step.FromMop, step.ToMop = mopOf(am, kind, x.key, x.val), mopOf(bm, mopWrite, x.key, v2)
			verb := "wrote"
			if rel == relRW {
				verb = "read"
			}
			return fmt.Sprintf("%s %s %s = %s, and %s wrote %s, a later version of %s", an, verb, h.in.keyString(x.key), show(x.val), bn, h.in.valueString(v2), h.in.keyString(x.key)), step
		}
	}
	return "", step
}
