package checker

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
)

// This file decides snapshot isolation and serializability (and their variants with
// process or real-time order) on rw-register histories completely, where the reads do
// not reveal the order of a key's versions. The Elle-class analysis (rwregister.go)
// finds the cycles of the dependencies it can infer and is silent on the rest: a
// register's read names the write it saw, never which writes came before it.
//
// A history satisfies serializability (Adya's PL-3) when some version order of each
// key, a total order of the transactions that wrote it, gives a direct serialization
// graph (ww between consecutive versions, wr from a version's writer to its readers,
// rw from a reader to the next version's writer) without a cycle; snapshot isolation
// when the graph has no cycle without two adjacent rw edges (Cerone and Gotsman,
// "Analysing snapshot isolation", J. ACM 2018: the graph of (ww ∪ wr) ; rw? is
// acyclic), which is Elle's reading of PL-SI (G1c, G-single and G-nonadjacent
// forbidden); the strong-session and strong (strict) variants add process or
// real-time order to ww and wr. Cobra (Tan et al., OSDI 2020) and PolySI (Huang et
// al., VLDB 2023) encode the choice as a polygraph: for each two writes of a key,
// either the first precedes the second (an edge between them, and one from each
// reader of the first to the second) or the other way round; the history satisfies the
// model when some choice for every pair leaves the graph acyclic.
//
// The search here is lazy and local. It starts from the order of the completions,
// which is the commit order of a database that applied each transaction as it
// completed: every key's versions in that order, and when every edge then goes
// forward (the common case of a valid history) the model holds, decided in time
// linear in the history. Otherwise the graph of that choice is built and its cyclic
// strongly connected components are regions: each region's pairs of writes are
// decided by a search of its own (txn_search_solve.go) over the edges among the
// region's transactions, a relaxation of the whole history's problem, so a region
// with no choice is proof the history has none; a region's choice rearranges its
// transactions among the places they held in the order, and the graph is built
// again. A cycle that appears then passes through a transaction outside the region
// (the region's choice has none of its own), so regions only grow or merge, and the
// loop ends: with an order under which nothing the model forbids occurs (valid), a
// region with no choice, explained as a tree of the cycles every choice closes
// (invalid), or out of steps or time (unknown).

// orderSpec is a model the search decides: serializability or snapshot isolation,
// with process or real-time order or neither.
type orderSpec struct {
	model string   // canonical
	si    bool     // snapshot isolation: a cycle with two adjacent rw edges is allowed
	order edgeBits // relProcess, relRealtime or 0
}

// orderSpecs are the models the search decides, each after every model stronger than
// it.
var orderSpecs = []orderSpec{
	{model: "PL-SS", order: relRealtime},
	{model: "strong-snapshot-isolation", si: true, order: relRealtime},
	{model: "strong-session-serializable", order: relProcess},
	{model: "strong-session-snapshot-isolation", si: true, order: relProcess},
	{model: "PL-3"},
	{model: "PL-SI", si: true},
}

// orderCycleSuffix ends the name of the anomaly that no version order avoids a cycle
// a model forbids: PL-3-cycle-every-order.
const orderCycleSuffix = "-cycle-every-order"

// kind is the anomaly of spec's model having no version order.
func (s orderSpec) kind() string { return s.model + orderCycleSuffix }

func (s orderSpec) forbids() string {
	what := "a cycle of ww, wr and rw dependencies"
	if s.si {
		what = "a cycle of ww, wr and rw dependencies without two adjacent rw edges"
	}
	switch s.order {
	case relProcess:
		what += " (and process order)"
	case relRealtime:
		what += " (and real-time order)"
	}
	return what
}

// orderWrite is a write of a key by a transaction that takes part.
type orderWrite struct {
	txn int32
	ent int32 // its entry in the index's values
	val int64
}

// orderProblem is an rw-register history as the search sees it.
type orderProblem struct {
	h    *txnHistory
	x    *rwIndex
	vg   []versionEdge // version order edges the options' assumptions gave
	spec orderSpec
	part []bool
	txns []int32 // the transactions that take part
	// pos orders the transactions: the candidate commit order. Every value is
	// distinct.
	pos []int64
	// kw[kAt[k]:kAt[k+1]] are the writes of key k, by pos once sorted.
	kAt []int32
	kw  []orderWrite
	// prev is each ok transaction's ok predecessor in its process, -1 for none.
	prev []int32
	// loc maps a transaction to its place in the region being searched, -1 else.
	loc []int32
}

// newOrderProblem reads what the search needs of the analysed history.
func newOrderProblem(h *txnHistory, x *rwIndex, vg []versionEdge, spec orderSpec) *orderProblem {
	n := len(h.txns)
	p := &orderProblem{h: h, x: x, vg: vg, spec: spec, part: make([]bool, n), pos: make([]int64, n)}
	for id, t := range h.txns {
		p.part[id] = t.status == txnOK
		switch {
		case t.comp >= 0:
			p.pos[id] = t.comp
		default:
			// Never completed: after every completion, in invocation order.
			p.pos[id] = math.MaxInt64/2 + t.inv
		}
	}
	for _, w := range x.writers {
		p.part[w] = true
	}
	for id := range h.txns {
		if p.part[id] {
			p.txns = append(p.txns, int32(id))
		}
	}
	nk := h.in.nkeys()
	p.kAt = make([]int32, nk+1)
	for _, t := range p.txns {
		for _, w := range x.writes(t) {
			if w.val != valueNil {
				p.kAt[w.key+1]++
			}
		}
	}
	for k := 1; k <= nk; k++ {
		p.kAt[k] += p.kAt[k-1]
	}
	p.kw = make([]orderWrite, p.kAt[nk])
	fill := slices.Clone(p.kAt[:nk])
	// In the order of pos, so that each key's writes need no sorting: the ok
	// transactions by their completions, then the others that take part.
	byPos := h.okOrder()
	var others []int32
	for _, t := range p.txns {
		if h.txns[t].status != txnOK {
			others = append(others, t)
		}
	}
	slices.SortFunc(others, func(a, b int32) int { return cmpInt64(p.pos[a], p.pos[b]) })
	byPos = mergeByPos(byPos, others, p.pos)
	for _, t := range byPos {
		ents := x.writeEnts(t)
		for i, w := range x.writes(t) {
			if w.val != valueNil {
				p.kw[fill[w.key]] = orderWrite{txn: t, ent: ents[i], val: w.val}
				fill[w.key]++
			}
		}
	}
	if spec.order == relProcess {
		p.prev = h.processPrev(h.okOrder())
	}
	return p
}

// ensureLoc makes loc, for the searches of regions: no transaction in one yet.
func (p *orderProblem) ensureLoc() {
	if p.loc != nil {
		return
	}
	p.loc = make([]int32, len(p.h.txns))
	for i := range p.loc {
		p.loc[i] = -1
	}
}

// mergeByPos merges two lists of transactions sorted by pos.
func mergeByPos(a, b []int32, pos []int64) []int32 {
	if len(b) == 0 {
		return a
	}
	out := make([]int32, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		if j == len(b) || i < len(a) && pos[a[i]] < pos[b[j]] {
			out = append(out, a[i])
			i++
		} else {
			out = append(out, b[j])
			j++
		}
	}
	return out
}

// sortWrites puts each key's writes in the order of pos.
func (p *orderProblem) sortWrites() {
	for k := 0; k+1 < len(p.kAt); k++ {
		ws := p.kw[p.kAt[k]:p.kAt[k+1]]
		if len(ws) > 1 {
			slices.SortFunc(ws, func(a, b orderWrite) int { return cmpInt64(p.pos[a.txn], p.pos[b.txn]) })
		}
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// edges calls emit with every edge of the graph under the version orders of pos
// (sortWrites first), until emit returns false; it returns false then.
func (p *orderProblem) edges(emit func(a, b int32, rel edgeBits) bool) bool {
	return p.edgesOf(true, emit)
}

// edgesOf is edges, with process and real-time order only when order is set.
func (p *orderProblem) edgesOf(order bool, emit func(a, b int32, rel edgeBits) bool) bool {
	x := p.x
	ed := func(a, b int32, rel edgeBits) bool {
		if a == b {
			return true
		}
		return emit(a, b, rel)
	}
	for _, t := range p.txns {
		if p.h.txns[t].status != txnOK {
			continue
		}
		ents := x.readEnts(t)
		for i, r := range x.reads(t) {
			if r.val == valueNil || ents[i] < 0 {
				continue
			}
			e := ents[i]
			for _, w := range x.writers[x.wAt[e]:x.wAt[e+1]] {
				if !ed(w, t, relWR) {
					return false
				}
			}
		}
	}
	for k := 0; k+1 < len(p.kAt); k++ {
		ws := p.kw[p.kAt[k]:p.kAt[k+1]]
		if len(ws) == 0 {
			continue
		}
		for _, r := range x.readersOf(uint32(k), valueNil) {
			if !ed(r, ws[0].txn, relRW) {
				return false
			}
		}
		for i := 0; i+1 < len(ws); i++ {
			if !ed(ws[i].txn, ws[i+1].txn, relWW) {
				return false
			}
			if e := ws[i].ent; e >= 0 {
				for _, r := range x.readers[x.rAt[e]:x.rAt[e+1]] {
					if !ed(r, ws[i+1].txn, relRW) {
						return false
					}
				}
			}
		}
	}
	for _, v := range p.vg {
		for _, b := range x.writersOf(v.key, v.to) {
			for _, a := range x.writersOf(v.key, v.from) {
				if !ed(a, b, relWW) {
					return false
				}
			}
			for _, a := range x.readersOf(v.key, v.from) {
				if !ed(a, b, relRW) {
					return false
				}
			}
		}
	}
	if !order {
		return true
	}
	switch p.spec.order {
	case relProcess:
		for _, t := range p.txns {
			if q := p.prev[t]; q >= 0 && !ed(q, t, relProcess) {
				return false
			}
		}
	case relRealtime:
		ok := true
		realtimeReduction(p.h, p.txns, func(a, b int32) {
			if ok {
				ok = ed(a, b, relRealtime)
			}
		})
		return ok
	}
	return true
}

// realtimeReduction calls emit with the edges of real-time order among txns (an ok
// transaction precedes every transaction invoked after it completed) that no third
// transaction of txns implies: from each ok transaction to those invoked after its
// completion and before the earliest completion of one of them that is ok.
func realtimeReduction(h *txnHistory, txns []int32, emit func(a, b int32)) {
	var byInv []int32
	for _, t := range txns {
		if h.txns[t].inv >= 0 {
			byInv = append(byInv, t)
		}
	}
	byInvocation := func(a, b int32) int { return cmpInt64(h.txns[a].inv, h.txns[b].inv) }
	if !slices.IsSortedFunc(byInv, byInvocation) {
		slices.SortFunc(byInv, byInvocation)
	}
	// sufMin[i]: the earliest ok completion among byInv[i:].
	sufMin := make([]int64, len(byInv)+1)
	sufMin[len(byInv)] = math.MaxInt64
	for i := len(byInv) - 1; i >= 0; i-- {
		sufMin[i] = sufMin[i+1]
		if t := h.txns[byInv[i]]; t.status == txnOK {
			sufMin[i] = min(sufMin[i], t.comp)
		}
	}
	for _, a := range txns {
		ta := h.txns[a]
		if ta.status != txnOK || ta.comp < 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(byInv, ta.comp, func(t int32, c int64) int { return cmpInt64(h.txns[t].inv, c+1) })
		limit := sufMin[i]
		for ; i < len(byInv) && h.txns[byInv[i]].inv <= limit; i++ {
			emit(a, byInv[i])
		}
	}
}

// forward reports whether every edge goes forward in pos: then the graph has no
// cycle.
//
// Process and real-time order are left out: with pos the order of the completions,
// as forward is called, they go forward always (a transaction completes after it was
// invoked, which real-time order puts after the completions it follows).
func (p *orderProblem) forward() bool {
	return p.edgesOf(false, func(a, b int32, _ edgeBits) bool { return p.pos[a] < p.pos[b] })
}

// layers is how many vertices a transaction has in the search's graphs: for snapshot
// isolation a second, t + n, which an rw edge enters and which leaves only by the ww,
// wr and order edges that leave t, so that no path takes two rw edges in a row.
func (s orderSpec) layers() int {
	if s.si {
		return 2
	}
	return 1
}

// cyclicRegions builds the graph under pos's version orders and returns the
// transactions of each of its cyclic strongly connected components.
func (p *orderProblem) cyclicRegions(ctx context.Context) [][]int32 {
	n := int32(len(p.h.txns))
	nodes := int(n) * p.spec.layers()
	var from, to []int32
	add := func(a, b int32) {
		from, to = append(from, a), append(to, b)
	}
	p.edges(func(a, b int32, rel edgeBits) bool {
		switch {
		case !p.spec.si:
			add(a, b)
		case rel == relRW:
			add(a, b+n)
		default:
			add(a, b)
			add(a+n, b)
		}
		return ctx.Err() == nil
	})
	if ctx.Err() != nil {
		return nil
	}
	at := make([]int32, nodes+1)
	for _, a := range from {
		at[a+1]++
	}
	for i := 1; i <= nodes; i++ {
		at[i] += at[i-1]
	}
	adj := make([]int32, len(from))
	fill := slices.Clone(at[:nodes])
	for i, a := range from {
		adj[fill[a]] = to[i]
		fill[a]++
	}
	from, to = nil, nil
	comp, count := tarjan(nodes, func(v, i int32) int32 {
		if at[v]+i >= at[v+1] {
			return -1
		}
		return adj[at[v]+i]
	})
	size := make([]int32, count)
	for _, c := range comp {
		size[c]++
	}
	byComp := map[int32][]int32{}
	var order []int32
	seen := map[[2]int32]bool{}
	for v, c := range comp {
		if size[c] < 2 {
			continue
		}
		t := int32(v) % n
		if seen[[2]int32{c, t}] {
			continue
		}
		seen[[2]int32{c, t}] = true
		if _, ok := byComp[c]; !ok {
			order = append(order, c)
		}
		byComp[c] = append(byComp[c], t)
	}
	out := make([][]int32, 0, len(order))
	for _, c := range order {
		out = append(out, p.withCauses(byComp[c]))
	}
	return out
}

// withCauses adds to the transactions of a component the writers of what they read
// of a key that one of them writes: an rw edge from a reader to a writer is there
// because the version the reader saw comes before the writer's, a choice between that
// version's writer and this one, which the region must hold to decide it.
func (p *orderProblem) withCauses(ts []int32) []int32 {
	x := p.x
	in := map[int32]bool{}
	written := map[uint32]bool{}
	for _, t := range ts {
		in[t] = true
		for _, w := range x.writes(t) {
			written[w.key] = true
		}
	}
	out := ts
	for _, t := range ts {
		if p.h.txns[t].status != txnOK {
			continue
		}
		ents := x.readEnts(t)
		for i, r := range x.reads(t) {
			if r.val == valueNil || ents[i] < 0 || !written[r.key] {
				continue
			}
			for _, w := range x.writers[x.wAt[ents[i]]:x.wAt[ents[i]+1]] {
				if !in[w] {
					in[w] = true
					out = append(out, w)
				}
			}
		}
	}
	return out
}

// orderOutcome is what a search decided.
type orderOutcome uint8

const (
	orderFound   orderOutcome = 1 + iota // a version order under which nothing forbidden occurs
	orderNone                            // no version order: witness says why
	orderStopped                         // out of time or memory
)

func (o orderOutcome) String() string {
	switch o {
	case orderFound:
		return "found"
	case orderNone:
		return "none"
	}
	return "stopped"
}

// orderFigures are what one search did, as Details' version_order_search reports
// it: the model, whether an order was found, none exists or the search stopped, the
// graphs of the whole history it built, the regions it searched and the transactions
// of the largest. No time: the same history gives the same Result.
type orderFigures struct {
	Model   string `json:"model"`
	Outcome string `json:"outcome"`
	Graphs  int    `json:"graphs"`
	Regions int    `json:"regions"`
	Largest int    `json:"largest_region"`
	Steps   int64  `json:"steps"` // most steps one region's search took
}

// orderResult is a search's outcome, the witness of orderNone, and figures.
type orderResult struct {
	outcome orderOutcome
	witness *orderWitness
	rounds  int   // graphs built
	regions int   // regions searched
	largest int   // transactions of the largest region
	steps   int64 // most steps a region's search took
}

// search looks for a version order of every key under which nothing the spec forbids
// occurs, each region's search bounded by steps, the whole by ctx.
func (p *orderProblem) search(ctx context.Context, steps int64) orderResult {
	if p.forward() {
		return orderResult{outcome: orderFound}
	}
	p.ensureLoc()
	// Regions, as sets of transactions: region[t] is t's, -1 for none.
	region := make([]int32, len(p.h.txns))
	for i := range region {
		region[i] = -1
	}
	members := map[int32][]int32{}
	nextID := int32(0)
	var res orderResult
	for round := 0; round <= len(p.txns)+1; round++ {
		if ctx.Err() != nil {
			res.outcome = orderStopped
			return res
		}
		res.rounds++
		comps := p.cyclicRegions(ctx)
		if ctx.Err() != nil {
			res.outcome = orderStopped
			return res
		}
		if len(comps) == 0 {
			res.outcome = orderFound
			return res
		}
		// Each component joins the regions it meets into one.
		var changed []int32
		for _, c := range comps {
			id := nextID
			nextID++
			var ms []int32
			merged := map[int32]bool{}
			for _, t := range c {
				if r := region[t]; r >= 0 {
					if !merged[r] {
						merged[r] = true
						ms = append(ms, members[r]...)
						delete(members, r)
					}
					continue
				}
				ms = append(ms, t)
			}
			for _, t := range ms {
				region[t] = id
			}
			members[id] = ms
			changed = slices.DeleteFunc(changed, func(r int32) bool { return merged[r] })
			changed = append(changed, id)
		}
		for _, r := range changed {
			ms := members[r]
			res.regions++
			res.largest = max(res.largest, len(ms))
			out, order, w, n := p.solveRegion(ctx, ms, steps)
			res.steps = max(res.steps, n)
			switch out {
			case orderStopped:
				res.outcome = orderStopped
				return res
			case orderNone:
				res.outcome, res.witness = orderNone, w
				return res
			}
			// The region's transactions take the places they held, in the order found.
			places := make([]int64, len(ms))
			for i, t := range ms {
				places[i] = p.pos[t]
			}
			slices.Sort(places)
			for i, t := range order {
				p.pos[t] = places[i]
			}
		}
		p.sortWrites()
	}
	// The regions grow every round; more rounds than transactions cannot happen.
	res.outcome = orderStopped
	return res
}

// searchVersionOrders decides, on an rw-register history, each model of orderSpecs
// that the check asks for (or that one it asks for implies) and that nothing found
// already rules out, strongest first, by searching for a version order: a model
// with none gets the anomaly of its kind, with the witness; a search that runs out of
// steps is a cycle-search-timeout (unknown); a model with one is decided, and so is
// every model it implies (an.complete).
func searchVersionOrders(ctx context.Context, h *txnHistory, an *txnAnalysis, c *txnCheck, m txnModel) {
	rr, ok := m.(*rwRegister)
	if !ok || ctx.Err() != nil || len(h.txns) == 0 {
		return
	}
	asked := c.opt.ConsistencyModels
	if len(asked) == 0 && len(c.opt.Anomalies) == 0 {
		asked = []string{"strict-serializable"}
	}
	var canon []string
	for _, a := range asked {
		canon = append(canon, canonical(a))
		canon = append(canon, askAlso[a]...)
	}
	wanted := closure(modelImplies, canon...)
	vg := make([]versionEdge, 0, len(rr.vg))
	for e := range rr.vg {
		vg = append(vg, e)
	}
	slices.SortFunc(vg, func(a, b versionEdge) int {
		if a.key != b.key {
			return int(a.key) - int(b.key)
		}
		if c := cmpInt64(a.from, b.from); c != 0 {
			return c
		}
		return cmpInt64(a.to, b.to)
	})
	steps := c.opt.OrderSearchSteps
	if steps == 0 {
		steps = DefaultOrderSearchSteps
	}
	var holds []string
	type violation struct {
		kind string
		a    txnAnomaly
	}
	var violations []violation
	defer func() {
		// A model that has no version order rules out every stronger one: of the
		// anomalies found, those another implies are left out.
		for _, v := range violations {
			if !slices.ContainsFunc(violations, func(o violation) bool { return o.kind != v.kind && closure(anomalyImplies, o.kind)[v.kind] }) {
				an.add(v.kind, v.a)
			}
		}
	}()
	// Strongest first: one order found decides every model below. Once one has
	// none, weakest first: the weakest with none rules out the rest.
	queue := slices.Clone(orderSpecs)
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if !wanted[s.model] {
			continue
		}
		var kinds []string
		for k := range an.found {
			kinds = append(kinds, k)
		}
		for _, e := range an.cycleExists {
			kinds = append(kinds, e.kind)
		}
		for _, v := range violations {
			kinds = append(kinds, v.kind)
		}
		if impossibleModels(kinds)[s.model] {
			continue
		}
		if slices.ContainsFunc(holds, func(m string) bool { return closure(modelImplies, m)[s.model] }) {
			continue
		}
		p := newOrderProblem(h, rr.index(h), vg, s)
		r := p.search(ctx, steps)
		an.searches = append(an.searches, orderFigures{Model: friendly(s.model), Outcome: r.outcome.String(),
			Graphs: r.rounds, Regions: r.regions, Largest: r.largest, Steps: r.steps})
		switch r.outcome {
		case orderFound:
			holds = append(holds, s.model)
		case orderNone:
			if len(violations) == 0 {
				slices.Reverse(queue)
			}
			violations = append(violations, violation{s.kind(), r.witness.anomaly(h, s)})
		case orderStopped:
			if ctx.Err() != nil {
				return
			}
			an.add("cycle-search-timeout", txnAnomaly{text: fmt.Sprintf(
				"the search for a version order of every key avoiding %s (%s) ran out of steps (--order-search-steps %d for each region of transactions; the largest had %d): undecided",
				s.forbids(), friendly(s.model), steps, r.largest)})
			return
		}
	}
	if len(holds) == 0 {
		return
	}
	decided := map[string]bool{}
	for _, m := range holds {
		for w := range closure(modelImplies, m) {
			decided[w] = true
		}
	}
	an.complete = nil
	all := true
	for _, a := range incompleteModels(h.model, c.opt) {
		if decided[canonical(a)] {
			an.complete = append(an.complete, a)
		} else {
			all = false
		}
	}
	if all && len(an.complete) > 0 {
		// Every model asked is decided: a dependency graph with no edge, or a cycle
		// search cut short, leaves nothing undecided.
		delete(an.found, "empty-transaction-graph")
		delete(an.found, "cycle-search-timeout")
	}
}

// completeText says, in a verdict, which models the search decided.
func completeText(ms []string) string {
	return fmt.Sprintf("complete for %s: a version order of every key was found under which nothing it forbids occurs", strings.Join(ms, ", "))
}
