package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// This file checks the axiomatic isolation levels of Biswas and Enea ("On the
// Complexity of Checking Transactional Consistency", CONCUR 2019), which Cerone,
// Bernardi and Gotsman's read atomic and causal consistency (CONCUR 2015) agree with:
// read committed, read atomic and transactional causal consistency. A history is the
// committed transactions, each process's session order (so) and the write-read
// relation (wr: which transaction each read saw; values are unique per key, so a
// register read names its writer). It satisfies a level when some commit order co, a
// total order of the transactions that contains so and wr and puts the initial state
// first, meets the level's axiom, for every key x, t1 writing x, and read of x in t3
// from t2 ≠ t1:
//
//   - read committed: t1 wrote a value that t3 read before that read of x ⇒ t1 co t2;
//   - read atomic: t1 wr t3 or t1 so t3 ⇒ t1 co t2;
//   - causal: t1 (so ∪ wr)+ t3 ⇒ t1 co t2.
//
// None of the premises mentions co, so a level holds exactly when so, wr and the
// edges its axiom forces are acyclic: the check builds those edges, no more of them
// than reachability needs (Mathur et al.'s AWDIT, PLDI 2025, shows which), and
// looks for a cycle. Each cycle found is explained one edge per line, each edge by
// the reads that force it. Reads the axioms cannot place at all — of an aborted
// write, of a value never written, of a transaction's own later write, or of a value
// other than the transaction's own last write of the key — fail every level.

// axLevel is an axiomatic level, weakest first.
type axLevel uint8

const (
	axRC axLevel = 1 + iota
	axRA
	axCC
)

// Model names of the axiomatic levels (canonical), and the anomalies they forbid.
const (
	axModelRC = "axiomatic-read-committed"
	axModelRA = "axiomatic-read-atomic"
	axModelCC = "axiomatic-causal"

	// axCausalityCycle is a cycle of session order and write-read alone.
	axCausalityCycle = "causality-cycle"
	// axRCCycle, axRACycle and axCCCycle are cycles that need edges of the level's
	// axiom: the weakest level whose axiom closes the cycle names it.
	axRCCycle = "read-committed-cycle"
	axRACycle = "read-atomic-cycle"
	axCCCycle = "causal-cycle"
	// axNotOwnWrite is a read, after the transaction's own write of the key, of
	// another value than that write.
	axNotOwnWrite = "not-own-write"
	// axSessionlessCycle is a cycle of write-read and read atomic's axiom with
	// every transaction in a session of its own: no session order in it. Under
	// every version order each axiom edge t1 → t2 in it is either a write-write
	// edge or closes a cycle t1 wr t3 rw t1 with one anti-dependency, so it fails
	// Adya's levels that forbid G1c and G-single (PL-2+ and PL-2.99 and every
	// stronger one), which ignore session order.
	axSessionlessCycle = "sessionless-read-atomic-cycle"
)

func (l axLevel) model() string {
	switch l {
	case axRC:
		return axModelRC
	case axRA:
		return axModelRA
	}
	return axModelCC
}

func (l axLevel) cycleKind() string {
	switch l {
	case axRC:
		return axRCCycle
	case axRA:
		return axRACycle
	}
	return axCCCycle
}

func (l axLevel) String() string {
	switch l {
	case axRC:
		return "read committed"
	case axRA:
		return "read atomic"
	}
	return "causal consistency"
}

// axLevelOf returns the strongest axiomatic level the prohibited anomalies include, 0
// for none.
func axLevelOf(prohibited map[string]bool) axLevel {
	switch {
	case prohibited[axCCCycle]:
		return axCC
	case prohibited[axRACycle]:
		return axRA
	case prohibited[axRCCycle]:
		return axRC
	}
	return 0
}

// axRead is an external read of a committed transaction: the key, the transaction it
// read from (axInit for the initial state) and the micro-op (its position in the
// reader's value).
type axRead struct {
	key  uint32
	from int32
	mop  int32
	val  int64 // the value read (a list's last element), valueNil for none
}

// axWrite is a transaction's last write of a key, and its micro-op.
type axWrite struct {
	key uint32
	mop int32
	val int64
}

// axInit names the initial state, which writes every key before every transaction.
const axInit int32 = -2

// axHistory is a history as the axioms see it: the transactions that take part
// (committed ones, and unknown ones a committed read proves committed), each with its
// external reads, in order, and its last write of each key, sorted by key; each
// session in order.
type axHistory struct {
	h      *txnHistory
	lists  bool  // list-append: a read is of its list's last element
	n      int32 // transactions of h; node n of the graphs is the initial state
	part   []bool
	reads  []axRead
	rAt    []int32 // reads of t: reads[rAt[t]:rAt[t+1]]
	writes []axWrite
	wAt    []int32
	// sessions holds each session's transactions in order.
	sessions [][]int32
	sessOf   []int32 // the session of a taking part transaction, -1 otherwise
	posOf    []int32 // its position in its session
}

func (x *axHistory) readsOf(t int32) []axRead   { return x.reads[x.rAt[t]:x.rAt[t+1]] }
func (x *axHistory) writesOf(t int32) []axWrite { return x.writes[x.wAt[t]:x.wAt[t+1]] }

// writes reports whether t wrote key k, and its last write of it.
func (x *axHistory) writeOf(t int32, k uint32) (axWrite, bool) {
	ws := x.writesOf(t)
	i, ok := slices.BinarySearchFunc(ws, k, func(w axWrite, k uint32) int {
		switch {
		case w.key < k:
			return -1
		case w.key > k:
			return 1
		}
		return 0
	})
	if !ok {
		return axWrite{}, false
	}
	return ws[i], true
}

type axWriter struct {
	txn  int32
	mop  int32
	last bool // the transaction's last write of the key
}

// newAxHistory reads the axioms' view of an rw-register history, or of a list-append
// one (la) as registers: an append is a write, and a read of a list a read of its
// last element, which the transaction that appended it wrote last among those the
// reader saw (the list is the appends it saw in commit order). Reads that no commit
// order can explain are added to an as anomalies of their own kind (not-own-write;
// on registers future-read and garbage-read) or left to the Elle-class analysis,
// which finds them as G1a and G1b (and on lists future-read and garbage-read).
func newAxHistory(h *txnHistory, an *txnAnalysis, la *listAppend) *axHistory {
	n := int32(len(h.txns))
	x := &axHistory{h: h, n: n, part: make([]bool, n), lists: la != nil}
	isWrite := func(m txnMop) bool { return m.kind == mopWrite || m.kind == mopAppend }
	// readVal is the value a read saw, false when nothing is known of it.
	readVal := func(m txnMop) (int64, bool) {
		if la == nil {
			return m.val, true
		}
		if m.val < 0 {
			return 0, false
		}
		r := la.reads[m.val]
		if l := la.readList(r); !r.null && len(l) > 0 {
			return l[len(l)-1], true
		}
		return valueNil, true
	}
	// Who wrote each value: the last writer of a value written twice, as the
	// Elle-class analysis refuses a read of one; and the failed transaction that
	// wrote it, if one did.
	var vals elemTable
	var writers []axWriter
	var failedBy []int32
	nw := 0
	for id := range h.txns {
		nw += len(h.txnMops(int32(id)))
	}
	vals.reserve(nw)
	entry := func(k uint32, v int64) int32 {
		e := vals.get(k, v)
		if e < 0 {
			e = vals.add(k, v)
			vals.index(e)
			writers = append(writers, axWriter{txn: -1})
			failedBy = append(failedBy, -1)
		}
		return e
	}
	for id, t := range h.txns {
		mops := h.txnMops(int32(id))
		for i, m := range mops {
			if !isWrite(m) {
				continue
			}
			e := entry(m.key, m.val)
			if t.status == txnFail {
				failedBy[e] = int32(id)
				continue
			}
			last := true
			for _, o := range mops[i+1:] {
				if isWrite(o) && o.key == m.key {
					last = false
					break
				}
			}
			writers[e] = axWriter{txn: int32(id), mop: int32(i), last: last}
		}
	}
	writerOf := func(k uint32, v int64) (axWriter, bool) {
		if e := vals.get(k, v); e >= 0 && writers[e].txn >= 0 {
			return writers[e], true
		}
		return axWriter{}, false
	}
	abortedWrite := func(k uint32, v int64) bool {
		e := vals.get(k, v)
		return e >= 0 && failedBy[e] >= 0
	}
	// Committed transactions' external reads, and the unknown transactions they
	// prove committed.
	x.rAt = make([]int32, n+1)
	var own []axWrite
	for id, t := range h.txns {
		x.rAt[id] = int32(len(x.reads))
		if t.status != txnOK {
			continue
		}
		x.part[id] = true
		own = own[:0]
		for i, m := range h.txnMops(int32(id)) {
			if isWrite(m) {
				j := slices.IndexFunc(own, func(w axWrite) bool { return w.key == m.key })
				if j < 0 {
					own = append(own, axWrite{key: m.key, mop: int32(i), val: m.val})
				} else {
					own[j] = axWrite{key: m.key, mop: int32(i), val: m.val}
				}
				continue
			}
			if m.kind != mopRead {
				continue
			}
			v, known := readVal(m)
			if !known {
				continue
			}
			if j := slices.IndexFunc(own, func(w axWrite) bool { return w.key == m.key }); j >= 0 {
				if v != own[j].val {
					an.add(axNotOwnWrite, txnAnomaly{txns: []int32{int32(id)},
						text: fmt.Sprintf("%s read %s = %s after writing %s there itself (micro-op %d): a transaction reads its own last write",
							h.name(int32(id)), h.in.keyString(m.key), x.valueText(v), h.in.valueString(own[j].val), own[j].mop)})
				}
				continue
			}
			if v == valueNil {
				x.reads = append(x.reads, axRead{key: m.key, from: axInit, mop: int32(i), val: v})
				continue
			}
			w, ok := writerOf(m.key, v)
			switch {
			case ok && w.txn == int32(id) && la != nil:
				continue // future-read, found by the Elle-class analysis
			case ok && w.txn == int32(id):
				an.add("future-read", txnAnomaly{txns: []int32{int32(id)},
					text: fmt.Sprintf("%s read %s = %s (micro-op %d), which it wrote itself only later (micro-op %d)",
						h.name(int32(id)), h.in.keyString(m.key), h.in.valueString(m.val), i, w.mop)})
				continue
			case ok:
				// An intermediate write read is G1b, found by the Elle-class
				// analysis; the read still orders its writer first.
				x.reads = append(x.reads, axRead{key: m.key, from: w.txn, mop: int32(i), val: v})
				x.part[w.txn] = true
				continue
			}
			if abortedWrite(m.key, v) || la != nil {
				continue // G1a (or on lists garbage-read), found by the Elle-class analysis
			}
			an.add("garbage-read", txnAnomaly{txns: []int32{int32(id)},
				text: fmt.Sprintf("%s read %s = %s (micro-op %d), a value no transaction wrote",
					h.name(int32(id)), h.in.keyString(m.key), h.in.valueString(m.val), i)})
		}
	}
	x.rAt[n] = int32(len(x.reads))
	// Each taking part transaction's last write of each key, sorted by key.
	x.wAt = make([]int32, n+1)
	for id := range h.txns {
		x.wAt[id] = int32(len(x.writes))
		if !x.part[id] {
			continue
		}
		start := len(x.writes)
		mops := h.txnMops(int32(id))
		for i := len(mops) - 1; i >= 0; i-- {
			m := mops[i]
			if !isWrite(m) || slices.ContainsFunc(x.writes[start:], func(w axWrite) bool { return w.key == m.key }) {
				continue
			}
			x.writes = append(x.writes, axWrite{key: m.key, mop: int32(i), val: m.val})
		}
		slices.SortFunc(x.writes[start:], func(a, b axWrite) int { return int(a.key) - int(b.key) })
	}
	x.wAt[n] = int32(len(x.writes))
	// Sessions: each process's taking part transactions, in invocation order (the
	// order of their ids).
	x.sessOf = make([]int32, n)
	x.posOf = make([]int32, n)
	sessionOf := map[int32]int32{}
	for id, t := range h.txns {
		x.sessOf[id] = -1
		if !x.part[id] {
			continue
		}
		s, ok := sessionOf[t.process]
		if !ok {
			s = int32(len(x.sessions))
			sessionOf[t.process] = s
			x.sessions = append(x.sessions, nil)
		}
		x.sessOf[id] = s
		x.posOf[id] = int32(len(x.sessions[s]))
		x.sessions[s] = append(x.sessions[s], int32(id))
	}
	return x
}

// Edge kinds of the axioms' graph.
const (
	axSO    uint8 = 1 + iota // session order
	axWR                     // write-read
	axInit0                  // the initial state precedes every transaction
	axRCE                    // read committed's axiom
	axRAWR                   // read atomic's, t1 wr t3
	axRASO                   // read atomic's, t1 so t3
	axCCE                    // causal consistency's, t1 (so ∪ wr)+ t3
)

// axWhy is why an edge t1 → t2 is there: its kind, and for an axiom's edge the
// reader t3, its read of x from t2 and (read committed, read atomic by wr) its
// earlier read from t1.
type axWhy struct {
	kind   uint8
	reader int32
	rx     int32 // index of the read of x from t2 in reads
	r1     int32 // index of the read from t1 in reads, -1 when none
}

// axGraph is the edges of so, wr and an axiom, as parallel arrays.
type axGraph struct {
	from, to []int32
	why      []axWhy
}

func (g *axGraph) add(a, b int32, w axWhy) {
	if a == b {
		return
	}
	g.from = append(g.from, a)
	g.to = append(g.to, b)
	g.why = append(g.why, w)
}

// node maps a transaction (or axInit) to its node.
func (x *axHistory) node(t int32) int32 {
	if t == axInit {
		return x.n
	}
	return t
}

// base adds so, wr, and the initial state's edges.
func (x *axHistory) base(g *axGraph) {
	for _, s := range x.sessions {
		for i := 1; i < len(s); i++ {
			g.add(s[i-1], s[i], axWhy{kind: axSO, r1: -1, rx: -1})
		}
		if len(s) > 0 {
			g.add(x.n, s[0], axWhy{kind: axInit0, r1: -1, rx: -1})
		}
	}
	seen := map[int32]bool{}
	for t := int32(0); t < x.n; t++ {
		rs := x.readsOf(t)
		big := len(rs) > axBigTxn
		if big {
			clear(seen)
		}
		for i, r := range rs {
			if r.from == axInit {
				continue
			}
			if big {
				if seen[r.from] {
					continue
				}
				seen[r.from] = true
			} else if slices.ContainsFunc(rs[:i], func(o axRead) bool { return o.from == r.from }) {
				continue
			}
			g.add(r.from, t, axWhy{kind: axWR, reader: t, rx: x.rAt[t] + int32(i), r1: -1})
		}
	}
}

// axBigTxn is the number of reads beyond which a transaction's reads are indexed by
// key, and each writer it read from walked by the writer's keys when it has fewer.
var axBigTxn = 16

// axTxnIndex indexes the reads of a large transaction: its keys in the order first
// read, the positions of each key's reads, each key's reads of distinct writers (one
// position per writer), and each writer's first position.
type axTxnIndex struct {
	keys     []uint32
	pos      map[uint32][]int32
	distinct map[uint32][]int32
	first    map[int32]int32
}

func newAxTxnIndex(rs []axRead) *axTxnIndex {
	ix := &axTxnIndex{pos: map[uint32][]int32{}, distinct: map[uint32][]int32{}, first: map[int32]int32{}}
	for i, r := range rs {
		ps, ok := ix.pos[r.key]
		if !ok {
			ix.keys = append(ix.keys, r.key)
		}
		ix.pos[r.key] = append(ps, int32(i))
		if !slices.ContainsFunc(ix.distinct[r.key], func(q int32) bool { return rs[q].from == r.from }) {
			ix.distinct[r.key] = append(ix.distinct[r.key], int32(i))
		}
		if _, ok := ix.first[r.from]; !ok {
			ix.first[r.from] = int32(i)
		}
	}
	return ix
}

// firstFrom reports whether rs[p] is the first read in rs from its writer.
func firstFrom(rs []axRead, ix *axTxnIndex, p int) bool {
	if ix != nil {
		return ix.first[rs[p].from] == int32(p)
	}
	return !slices.ContainsFunc(rs[:p], func(o axRead) bool { return o.from == rs[p].from })
}

// readCommitted adds the edges of read committed's axiom: for each read of x in t3
// from t2, from each t1 ≠ t2 that wrote x and that t3 read from earlier. Only the
// first read of each t1 in t3 is needed (its later ones have fewer reads after
// them), and of the reads of x after it only the first: the reads of x that follow
// are ordered one after the other (each writer of a read of x precedes the writer of
// the next read of x). Of t1's keys and the keys t3 reads, whichever are fewer are
// walked, the others looked up.
func (x *axHistory) readCommitted(g *axGraph) {
	for t3 := int32(0); t3 < x.n; t3++ {
		rs := x.readsOf(t3)
		if len(rs) < 2 {
			continue
		}
		base := x.rAt[t3]
		var ix *axTxnIndex
		if len(rs) > axBigTxn {
			ix = newAxTxnIndex(rs)
		}
		// Consecutive reads of each key, of different writers: the first's writer
		// commits before the second's.
		edge := func(p, q int32) {
			if rs[p].from != rs[q].from {
				g.add(x.node(rs[p].from), x.node(rs[q].from), axWhy{kind: axRCE, reader: t3, rx: base + q, r1: base + p})
			}
		}
		if ix != nil {
			for _, ps := range ix.pos {
				for i := 1; i < len(ps); i++ {
					edge(ps[i-1], ps[i])
				}
			}
		} else {
			for q := range rs {
				for p := q - 1; p >= 0; p-- {
					if rs[p].key == rs[q].key {
						edge(int32(p), int32(q))
						break
					}
				}
			}
		}
		// next returns the first read of k after position p, -1 for none.
		next := func(k uint32, p int) int32 {
			if ix == nil {
				for q := p + 1; q < len(rs); q++ {
					if rs[q].key == k {
						return int32(q)
					}
				}
				return -1
			}
			ps := ix.pos[k]
			j, _ := slices.BinarySearch(ps, int32(p)+1)
			if j < len(ps) {
				return ps[j]
			}
			return -1
		}
		for p, r1 := range rs {
			t1 := r1.from
			if t1 == axInit || !firstFrom(rs, ix, p) {
				continue
			}
			from := func(q int32) {
				if q >= 0 && rs[q].from != t1 {
					g.add(t1, x.node(rs[q].from), axWhy{kind: axRCE, reader: t3, rx: base + q, r1: base + int32(p)})
				}
			}
			ws := x.writesOf(t1)
			if ix == nil || len(ws) < len(ix.keys) {
				for _, w := range ws {
					from(next(w.key, p))
				}
				continue
			}
			for _, k := range ix.keys {
				if _, ok := x.writeOf(t1, k); ok {
					from(next(k, p))
				}
			}
		}
	}
}

// readAtomic adds the edges of read atomic's axiom: for each read of x in t3 from t2,
// from each t1 ≠ t2 that wrote x and that t3 read from (each writer a transaction
// reads from, against the keys it reads: whichever of the two is fewer is walked),
// and from the last transaction before t3 in its session that wrote x (those before
// that one precede it in session order).
func (x *axHistory) readAtomic(g *axGraph) {
	for t3 := int32(0); t3 < x.n; t3++ {
		rs := x.readsOf(t3)
		if len(rs) < 2 {
			continue
		}
		base := x.rAt[t3]
		var ix *axTxnIndex
		if len(rs) > axBigTxn {
			ix = newAxTxnIndex(rs)
		}
		for p, r1 := range rs {
			t1 := r1.from
			if t1 == axInit || !firstFrom(rs, ix, p) {
				continue
			}
			add := func(q int32) {
				if rs[q].from != t1 {
					g.add(t1, x.node(rs[q].from), axWhy{kind: axRAWR, reader: t3, rx: base + q, r1: base + int32(p)})
				}
			}
			if ix == nil {
				for q, r := range rs {
					if _, ok := x.writeOf(t1, r.key); ok && r.from != t1 {
						add(int32(q))
					}
				}
				continue
			}
			ws := x.writesOf(t1)
			if len(ws) < len(ix.keys) {
				for _, w := range ws {
					for _, q := range ix.distinct[w.key] {
						add(q)
					}
				}
				continue
			}
			for _, k := range ix.keys {
				if _, ok := x.writeOf(t1, k); ok {
					for _, q := range ix.distinct[k] {
						add(q)
					}
				}
			}
		}
	}
	// Session order: the last writer of each key so far in the session.
	lastWriter := map[uint32]int32{}
	for _, s := range x.sessions {
		clear(lastWriter)
		for _, t3 := range s {
			base := x.rAt[t3]
			for i, r := range x.readsOf(t3) {
				if t1, ok := lastWriter[r.key]; ok && t1 != r.from {
					g.add(t1, x.node(r.from), axWhy{kind: axRASO, reader: t3, rx: base + int32(i), r1: -1})
				}
			}
			for _, w := range x.writesOf(t3) {
				lastWriter[w.key] = t3
			}
		}
	}
}

// causal adds the edges of causal consistency's axiom: for each read of x in t3 from
// t2, from each t1 ≠ t2 that wrote x and happens before t3 by (so ∪ wr)+. Of those,
// only the last of each chain is needed: the writers that some transaction follows
// are covered by chains, each totally ordered by happens-before (taken greedily in a
// topological order: a writer continues its session predecessor's chain when that
// one ends it, else any chain whose end happens before it, else a new one), and a
// vector clock per transaction holds the last of each chain that happens before it.
// With c chains and n transactions this is O(n·c) time (c is at least the number of
// writers no transaction orders, and grows with sessions that end on a write nobody
// read); a clock is freed once the transactions that follow it have taken it. It
// returns false when so ∪ wr is cyclic: the cycle itself is then the violation.
func (x *axHistory) causal(ctx context.Context, g *axGraph) bool {
	n := x.n
	// Successors in so ∪ wr, and in-degrees, for a topological order.
	succAt := make([]int32, n+1)
	var predCount = make([]int32, n)
	nextInSession := func(t int32) int32 {
		s := x.sessions[x.sessOf[t]]
		if p := x.posOf[t] + 1; int(p) < len(s) {
			return s[p]
		}
		return -1
	}
	// wr sources of each transaction, distinct.
	srcAt := make([]int32, n+1)
	var srcs []int32
	for t := int32(0); t < n; t++ {
		srcAt[t] = int32(len(srcs))
		if !x.part[t] {
			continue
		}
		start := len(srcs)
		for _, r := range x.readsOf(t) {
			if r.from != axInit && r.from != t && !slices.Contains(srcs[start:], r.from) {
				srcs = append(srcs, r.from)
			}
		}
	}
	srcAt[n] = int32(len(srcs))
	for t := int32(0); t < n; t++ {
		if !x.part[t] {
			continue
		}
		if x.posOf[t] > 0 {
			predCount[t]++
		}
		predCount[t] += srcAt[t+1] - srcAt[t]
		for _, s := range srcs[srcAt[t]:srcAt[t+1]] {
			succAt[s+1]++
		}
	}
	for t := int32(0); t < n; t++ {
		succAt[t+1] += succAt[t]
	}
	succ := make([]int32, succAt[n])
	fill := slices.Clone(succAt[:n])
	for t := int32(0); t < n; t++ {
		for _, s := range srcs[srcAt[t]:srcAt[t+1]] {
			succ[fill[s]] = t
			fill[s]++
		}
	}
	// users counts the transactions yet to take each one's clock.
	users := make([]int32, n)
	for t := int32(0); t < n; t++ {
		if !x.part[t] {
			continue
		}
		users[t] = succAt[t+1] - succAt[t]
		if nextInSession(t) >= 0 {
			users[t]++
		}
	}
	// Chains: each transaction's chain and position in it.
	// Only writers that some transaction follows need a place in a chain: a
	// transaction without writes passes on its past, and only a writer can be t1.
	chainOf := make([]int32, n)
	for i := range chainOf {
		chainOf[i] = -1
	}
	chainPos := make([]int32, n)
	var chainLen []int32
	// Per key, per chain, its writers so far, in chain order.
	type chainWrites struct {
		chain int32
		pos   []int32 // positions in the chain
		txn   []int32
	}
	perKey := map[uint32][]chainWrites{}
	clock := make([][]int32, n)
	var free [][]int32
	// Ready transactions, the earliest in the history first: a clock is freed soon
	// after the transactions that follow it in the history take it.
	queue := &axHeap{}
	for t := int32(0); t < n; t++ {
		if x.part[t] && predCount[t] == 0 {
			queue.push(t)
		}
	}
	done := 0
	for len(*queue) > 0 {
		if done%checkEvery == 0 && ctx.Err() != nil {
			return true
		}
		t3 := queue.pop()
		done++
		// The clock: the join of its predecessors', and themselves.
		var vc []int32
		var take = func(p int32) {
			pc := clock[p]
			if len(vc) < len(pc) {
				for len(vc) < len(pc) {
					vc = append(vc, -1)
				}
			}
			for i, v := range pc {
				if v > vc[i] {
					vc[i] = v
				}
			}
			if c := chainOf[p]; c >= 0 && chainPos[p] > vc[c] {
				vc[c] = chainPos[p]
			}
		}
		// release frees the clocks of t3's predecessors that nothing else needs,
		// once its reads are done with them.
		release := func(p int32) {
			users[p]--
			if users[p] == 0 {
				free = append(free, clock[p])
				clock[p] = nil
			}
		}
		var soPrev int32 = -1
		if p := x.posOf[t3]; p > 0 {
			soPrev = x.sessions[x.sessOf[t3]][p-1]
		}
		stolen := soPrev >= 0 && users[soPrev] == 1
		if stolen {
			// Its session predecessor's clock, which nothing else will take.
			vc, clock[soPrev], users[soPrev] = clock[soPrev], nil, 0
			if c := chainOf[soPrev]; c >= 0 && chainPos[soPrev] > vc[c] {
				vc[c] = chainPos[soPrev]
			}
		} else if len(free) > 0 {
			vc = free[len(free)-1][:0]
			free = free[:len(free)-1]
		}
		for len(vc) < len(chainLen) {
			vc = append(vc, -1)
		}
		if soPrev >= 0 && !stolen {
			take(soPrev)
		}
		for _, s := range srcs[srcAt[t3]:srcAt[t3+1]] {
			take(s)
		}
		// Its chain: none when nothing follows it (no transaction can have it in its
		// past); else its session predecessor's, if that ends the chain, or any
		// chain whose end happens before it, or a new one.
		c := int32(-1)
		if users[t3] > 0 && len(x.writesOf(t3)) > 0 {
			if soPrev >= 0 && chainOf[soPrev] >= 0 && chainPos[soPrev] == chainLen[chainOf[soPrev]]-1 {
				c = chainOf[soPrev]
			} else {
				for i, l := range chainLen {
					if vc[i] == l-1 {
						c = int32(i)
						break
					}
				}
			}
			if c < 0 {
				c = int32(len(chainLen))
				chainLen = append(chainLen, 0)
				vc = append(vc, -1)
			}
			chainOf[t3], chainPos[t3] = c, chainLen[c]
			chainLen[c]++
		}
		// The axiom's edges into each writer t2 t3 read from: from the last writer
		// of the key in each chain that happens before t3, unless it happens before
		// t2 too (its clock, still held, says so), which orders it first already;
		// into the initial state one edge is a violation enough.
		base := x.rAt[t3]
		for i, r := range x.readsOf(t3) {
			var c2 []int32
			if r.from != axInit && !(stolen && r.from == soPrev) {
				c2 = clock[r.from]
			}
			for _, cw := range perKey[r.key] {
				if int(cw.chain) >= len(vc) {
					continue
				}
				bound := vc[cw.chain]
				j, found := slices.BinarySearch(cw.pos, bound)
				if found {
					j++
				}
				if j == 0 {
					continue
				}
				t1 := cw.txn[j-1]
				if t1 == r.from || int(cw.chain) < len(c2) && c2[cw.chain] >= cw.pos[j-1] ||
					r.from != axInit && chainOf[r.from] == cw.chain && chainPos[r.from] >= cw.pos[j-1] {
					continue
				}
				g.add(t1, x.node(r.from), axWhy{kind: axCCE, reader: t3, rx: base + int32(i), r1: -1})
				if r.from == axInit {
					break
				}
			}
		}
		if soPrev >= 0 && !stolen {
			release(soPrev)
		}
		for _, s := range srcs[srcAt[t3]:srcAt[t3+1]] {
			release(s)
		}
		for _, w := range x.writesOf(t3) {
			if c < 0 {
				break
			}
			cws := perKey[w.key]
			j := slices.IndexFunc(cws, func(cw chainWrites) bool { return cw.chain == c })
			if j < 0 {
				cws = append(cws, chainWrites{chain: c})
				j = len(cws) - 1
			}
			cws[j].pos = append(cws[j].pos, chainPos[t3])
			cws[j].txn = append(cws[j].txn, t3)
			perKey[w.key] = cws
		}
		clock[t3] = vc
		if users[t3] == 0 {
			free = append(free, vc)
			clock[t3] = nil
		}
		if nt := nextInSession(t3); nt >= 0 {
			if predCount[nt]--; predCount[nt] == 0 {
				queue.push(nt)
			}
		}
		for _, nt := range succ[succAt[t3]:succAt[t3+1]] {
			if predCount[nt]--; predCount[nt] == 0 {
				queue.push(nt)
			}
		}
	}
	parts := 0
	for _, p := range x.part {
		if p {
			parts++
		}
	}
	return done == parts
}

// valueText names a value read: a register's, or the last element of a list.
func (x *axHistory) valueText(v int64) string {
	switch {
	case v == valueNil && x.lists:
		return "[] (empty)"
	case v == valueNil:
		return "null"
	case x.lists:
		return "a list ending in " + x.h.in.valueString(v)
	}
	return x.h.in.valueString(v)
}

// axHeap is a min-heap of transactions.
type axHeap []int32

func (q *axHeap) push(t int32) {
	h := append(*q, t)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	*q = h
}

func (q *axHeap) pop() int32 {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if l+1 < len(h) && h[l+1] < h[m] {
			m = l + 1
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// axCycle is a cycle of the axioms' graph: its edges (indices into the graph), in
// order.
type axCycle []int32

// graphFor returns so, wr, the initial state's edges and those of level's axiom.
func (x *axHistory) graphFor(ctx context.Context, level axLevel) *axGraph {
	g := &axGraph{}
	x.base(g)
	switch level {
	case axRC:
		x.readCommitted(g)
	case axRA:
		x.readAtomic(g)
	case axCC:
		x.causal(ctx, g)
	}
	return g
}

// cycles returns up to limit cycles of g, one per strongly connected component, each
// a shortest one through some transaction of the component, and how many components
// have a cycle.
func (x *axHistory) cycles(ctx context.Context, g *axGraph, limit int) ([]axCycle, int) {
	nodes := int(x.n) + 1
	at := make([]int32, nodes+1)
	for _, a := range g.from {
		at[a+1]++
	}
	for i := 1; i <= nodes; i++ {
		at[i] += at[i-1]
	}
	out := make([]int32, len(g.from)) // edge indices, by source
	fill := slices.Clone(at[:nodes])
	for e, a := range g.from {
		out[fill[a]] = int32(e)
		fill[a]++
	}
	comp, count := tarjan(nodes, func(v, i int32) int32 {
		if at[v]+i >= at[v+1] {
			return -1
		}
		return g.to[out[at[v]+i]]
	})
	size := make([]int32, count)
	for v := range comp {
		size[comp[v]]++
	}
	var res []axCycle
	found := 0
	seen := make([]bool, count)
	parent := map[int32]int32{} // node → the edge BFS reached it by
	for v := int32(0); int(v) < nodes; v++ {
		c := comp[v]
		if size[c] < 2 || seen[c] {
			continue
		}
		seen[c] = true
		found++
		if len(res) >= limit || ctx.Err() != nil {
			continue
		}
		// Breadth first from v, within its component, back to v.
		clear(parent)
		queue := []int32{v}
		var closing int32 = -1
	bfs:
		for len(queue) > 0 {
			u := queue[0]
			queue = queue[1:]
			for _, e := range out[at[u]:at[u+1]] {
				w := g.to[e]
				if comp[w] != c {
					continue
				}
				if w == v {
					closing = e
					break bfs
				}
				if _, ok := parent[w]; !ok {
					parent[w] = e
					queue = append(queue, w)
				}
			}
		}
		if closing < 0 {
			continue // cannot happen: v is in a component with a cycle
		}
		cy := axCycle{closing}
		for u := g.from[closing]; u != v; u = g.from[parent[u]] {
			cy = append(cy, parent[u])
		}
		slices.Reverse(cy)
		res = append(res, cy)
	}
	return res, found
}

// axCheck checks the rw-register history of h for the axiomatic level want, adding
// what violates it to an: the reads no commit order explains (newAxHistory) and the
// cycles, named by the weakest level whose axiom closes them.
// It returns the history as the axioms see it, and whether it found a cycle.
func axCheck(ctx context.Context, h *txnHistory, an *txnAnalysis, la *listAppend, want axLevel) (*axHistory, bool) {
	x := newAxHistory(h, an, la)
	if ctx.Err() != nil {
		return x, false
	}
	g := x.graphFor(ctx, want)
	cys, count := x.cycles(ctx, g, maxListed)
	if count == 0 || ctx.Err() != nil {
		return x, false
	}
	level := want
	for l := want - 1; l >= axRC; l-- {
		lg := x.graphFor(ctx, l)
		lc, ln := x.cycles(ctx, lg, maxListed)
		if ln == 0 || ctx.Err() != nil {
			break
		}
		g, cys, count, level = lg, lc, ln, l
	}
	for i, cy := range cys {
		kind := axCausalityCycle
		for _, e := range cy {
			if g.why[e].kind > axInit0 {
				kind = level.cycleKind()
			}
		}
		a := x.explain(g, cy, kind, level)
		if i == len(cys)-1 && count > len(cys) {
			a.text += fmt.Sprintf("\n(%d more components of the graph hold cycles)", count-len(cys))
		}
		an.add(kind, a)
	}
	return x, true
}

// withoutSessions returns x with every taking part transaction in a session of its
// own: the history as Adya's levels see it, which ignore session order.
func (x *axHistory) withoutSessions() *axHistory {
	y := *x
	y.sessions = make([][]int32, 0, len(x.sessions))
	y.sessOf = make([]int32, x.n)
	y.posOf = make([]int32, x.n)
	ids := make([]int32, 0, x.n)
	for t := int32(0); t < x.n; t++ {
		y.sessOf[t] = -1
		if x.part[t] {
			ids = append(ids, t)
		}
	}
	for i := range ids {
		y.sessOf[ids[i]] = int32(len(y.sessions))
		y.sessions = append(y.sessions, ids[i:i+1:i+1])
	}
	return &y
}

// axSessionless adds to an the cycles of read atomic's axiom in x with sessions
// erased that need an axiom's edge (a cycle of write-read alone is G1c, which the
// Elle-class analysis names): violations of Adya's levels from PL-2+ and PL-2.99 up,
// whatever the version order.
func axSessionless(ctx context.Context, x *axHistory, an *txnAnalysis) {
	y := x.withoutSessions()
	g := y.graphFor(ctx, axRA)
	cys, count := y.cycles(ctx, g, maxListed)
	if count == 0 || ctx.Err() != nil {
		return
	}
	var kept []txnAnomaly
	for _, cy := range cys {
		if slices.ContainsFunc(cy, func(e int32) bool { return g.why[e].kind > axInit0 }) {
			kept = append(kept, y.explain(g, cy, axSessionlessCycle, axRA))
		}
	}
	for i, a := range kept {
		if i == len(kept)-1 && count > len(cys) {
			a.text += fmt.Sprintf("\n(%d more components of the graph hold cycles)", count-len(cys))
		}
		an.add(axSessionlessCycle, a)
	}
}

// explain turns a cycle into an anomaly, one line per edge.
func (x *axHistory) explain(g *axGraph, cy axCycle, kind string, level axLevel) txnAnomaly {
	h := x.h
	k := len(cy)
	nodes := make([]int32, k)
	for i, e := range cy {
		nodes[i] = g.from[e]
	}
	names := make([]string, k)
	var bind []string
	var txns []int32
	for i, v := range nodes {
		if v == x.n {
			names[i] = "the initial state"
			continue
		}
		names[i] = fmt.Sprintf("T%d", len(txns)+1)
		bind = append(bind, fmt.Sprintf("%s = %s", names[i], h.name(v)))
		txns = append(txns, v)
	}
	data := &cycleData{Type: kind}
	what := "session order and write-read"
	switch kind {
	case axSessionlessCycle:
		what = "write-read and the commit order " + level.String() + " requires, with no session order (so under every version order a cycle of Adya's dependencies)"
	case axCausalityCycle:
	default:
		what = "the commit order " + level.String() + " requires"
	}
	of := fmt.Sprintf("%d transactions", len(txns))
	switch {
	case len(txns) == 1 && len(txns) < k:
		of = "a transaction and the initial state"
	case len(txns) < k:
		of += " and the initial state"
	}
	lines := []string{fmt.Sprintf("a cycle of %s in %s, %s:", of, what, strings.Join(bind, ", "))}
	at := func(v int32) int64 {
		if v == x.n {
			return -1
		}
		return h.at(v)
	}
	for i, e := range cy {
		a, b := nodes[i], nodes[(i+1)%k]
		an1, bn := names[i], names[(i+1)%k]
		line, step := x.explainEdge(g.why[e], a, b, an1, bn)
		step.From, step.To = at(a), at(b)
		data.Steps = append(data.Steps, step)
		data.Ops = append(data.Ops, at(a))
		lines = append(lines, fmt.Sprintf("%s < %s: %s", an1, bn, line))
	}
	return txnAnomaly{txns: txns, text: strings.Join(lines, "\n"), cycle: data}
}

// explainEdge says why a precedes b.
func (x *axHistory) explainEdge(w axWhy, a, b int32, an, bn string) (string, cycleStep) {
	h := x.h
	step := cycleStep{FromMop: -1, ToMop: -1}
	readText := func(ri int32) (string, axRead) {
		r := x.reads[ri]
		return fmt.Sprintf("%s = %s (micro-op %d)", h.in.keyString(r.key), x.valueText(r.val), r.mop), r
	}
	wrote := func(t int32, k uint32) string {
		wr, _ := x.writeOf(t, k)
		return fmt.Sprintf("wrote %s too (%s, micro-op %d)", h.in.keyString(k), h.in.valueString(wr.val), wr.mop)
	}
	reader := h.name(w.reader)
	switch w.kind {
	case axSO:
		p := h.txns[a].process
		step.Type, step.Process = "so", &p
		return fmt.Sprintf("process %d ran %s, then %s", p, an, bn), step
	case axInit0:
		step.Type = "init"
		return fmt.Sprintf("the initial state precedes every transaction, %s among them", bn), step
	case axWR:
		rt, r := readText(w.rx)
		step.Type, step.Key, step.ToMop = "wr", h.in.keyJSON(r.key), int(r.mop)
		return fmt.Sprintf("%s read %s, which %s wrote", bn, rt, an), step
	}
	rt, rx := readText(w.rx)
	step.Key, step.ToMop = h.in.keyJSON(rx.key), int(rx.mop)
	from := "which " + bn + " wrote"
	if b == x.n {
		from = "the initial state"
	}
	switch w.kind {
	case axRCE:
		r1t, _ := readText(w.r1)
		step.Type = "rc"
		return fmt.Sprintf("%s read %s from %s, and later %s, %s; %s %s: under read committed a later read does not see an older version",
			reader, r1t, an, rt, from, an, wrote(a, rx.key)), step
	case axRAWR:
		r1t, _ := readText(w.r1)
		step.Type = "ra"
		return fmt.Sprintf("%s read %s from %s, and %s, %s; %s %s: under read atomic a transaction sees all of another's writes or none",
			reader, r1t, an, rt, from, an, wrote(a, rx.key)), step
	case axRASO:
		step.Type = "ra"
		return fmt.Sprintf("%s ran before %s in process %d and %s; %s read %s, %s: under read atomic a session sees its own writes",
			an, reader, h.txns[a].process, wrote(a, rx.key), reader, rt, from), step
	}
	step.Type = "cc"
	return fmt.Sprintf("%s happens before %s (%s); %s read %s, %s; %s %s: under causal consistency a transaction sees all that happens before it",
		an, reader, x.pathText(a, w.reader), reader, rt, from, an, wrote(a, rx.key)), step
}

// pathText names a shortest chain of session order and write-read from a to b.
func (x *axHistory) pathText(a, b int32) string {
	h := x.h
	prev := map[int32]int32{b: -1}
	queue := []int32{b}
	for len(queue) > 0 && len(prev) < 1<<20 {
		u := queue[0]
		queue = queue[1:]
		if u == a {
			break
		}
		var preds []int32
		if p := x.posOf[u]; p > 0 {
			preds = append(preds, x.sessions[x.sessOf[u]][p-1])
		}
		for _, r := range x.readsOf(u) {
			if r.from != axInit {
				preds = append(preds, r.from)
			}
		}
		for _, p := range preds {
			if _, ok := prev[p]; !ok {
				prev[p] = u
				queue = append(queue, p)
			}
		}
	}
	if _, ok := prev[a]; !ok {
		return "by session order and write-read"
	}
	var parts []string
	for u := a; u >= 0; u = prev[u] {
		parts = append(parts, h.name(u))
	}
	return strings.Join(parts, " → ")
}

// axCheckFor checks the axiomatic level the check's models include, if any: of an
// rw-register history, or of a list-append one (model) as registers.
func axCheckFor(ctx context.Context, h *txnHistory, an *txnAnalysis, c *txnCheck, model txnModel) {
	if ctx.Err() != nil {
		return
	}
	la, _ := model.(*listAppend)
	if h.model != RWRegisterModel && la == nil {
		return
	}
	l := axLevelOf(c.prohibited)
	sessionless := asksSessionless(c.opt, an.found)
	if l == 0 {
		// No axiomatic level asked for, but the reads no commit order explains
		// are anomalies of other models too (a value never written is a G1a), and
		// so are the cycles of read atomic's axiom without session order.
		if sessionless || c.prohibited["garbage-read"] || c.prohibited["future-read"] || c.prohibited[axNotOwnWrite] {
			side := newTxnAnalysis(h, c, nil)
			x := newAxHistory(h, side, la)
			if sessionless && ctx.Err() == nil {
				axSessionless(ctx, x, side)
			}
			for kind := range side.found {
				if !c.prohibited[kind] {
					delete(side.found, kind)
				}
			}
			an.merge(side)
		}
		return
	}
	// The graph without session order is part of the graph with it, so the check
	// without is needed only where the check with found a cycle.
	if x, cyclic := axCheck(ctx, h, an, la, l); cyclic && asksSessionless(c.opt, an.found) && ctx.Err() == nil {
		axSessionless(ctx, x, an)
	}
	if len(incompleteModels(h.model, c.opt)) == 0 {
		// Nothing asked of the history needs the dependency graph: that it is
		// empty, or that a search in it ran out of time, leaves nothing undecided.
		delete(an.found, "empty-transaction-graph")
		delete(an.found, "cycle-search-timeout")
	}
}

// asksSessionless reports whether a model opt asks for forbids a cycle of read
// atomic's axiom without session order (one of Adya's levels from PL-2+ and PL-2.99
// up, or Elle's read atomic, which a check of the axiomatic levels alone does not
// decide) and is not yet ruled out by the anomalies found, or opt names the anomaly.
func asksSessionless(opt TxnOptions, found map[string]*foundAnomalies) bool {
	if slices.Contains(opt.Anomalies, axSessionlessCycle) {
		return true
	}
	asked := opt.ConsistencyModels
	if len(asked) == 0 && len(opt.Anomalies) == 0 {
		asked = []string{"strict-serializable"}
	}
	var kinds []string
	for k := range found {
		kinds = append(kinds, k)
	}
	ruledOut := impossibleModels(kinds)
	for _, m := range asked {
		if ruledOut[canonical(m)] {
			continue
		}
		for w := range closure(modelImplies, canonical(m)) {
			if slices.Contains(modelForbids[w], axSessionlessCycle) {
				return true
			}
		}
	}
	return false
}

// axModels are the models the axiomatic checks decide completely on rw-register
// histories.
var axModels = map[string]bool{axModelRC: true, axModelRA: true, axModelCC: true}

// incompleteModels returns, of the models opt asks for, those the check of model
// (rw-register or list-append) decides soundly but not completely: every model whose
// own anomalies or those of a model it implies are found only where the reads reveal
// them (Adya's and Elle's, and the axiomatic levels on list-append); an empty list
// when the check is complete. Anomalies asked for by name count as such a model.
func incompleteModels(model string, opt TxnOptions) []string {
	asked := opt.ConsistencyModels
	if len(asked) == 0 && len(opt.Anomalies) == 0 {
		asked = []string{"strict-serializable"}
	}
	var out []string
	for _, m := range asked {
		for w := range closure(modelImplies, canonical(m)) {
			if len(modelForbids[w]) > 0 && (!axModels[w] || model != RWRegisterModel) {
				out = append(out, m)
				break
			}
		}
	}
	if len(opt.Anomalies) > 0 {
		out = append(out, opt.Anomalies...)
	}
	return out
}
