package checker

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// listAppend is the list-append model: what it keeps of each key and read while the
// history streams in, and the analysis after.
//
// A read returns a whole list, so a key's reads should all be prefixes of one list:
// its version order. Each key keeps that list (main) as the reads reveal it, and each
// read keeps only which list it read a prefix of and how long: a read costs the
// comparison with the list and a few bytes, however long the list grew. A read that
// is neither a prefix of main nor an extension of it starts another list (alts) and
// makes the key's orders incompatible.
type listAppend struct {
	keys  []laKey
	elems elemTable
	reads []laRead
	// appendEnt holds, for each micro-op of the history (txnHistory.mops), the element
	// entry of an append, -1 for a read.
	appendEnt []int32

	internal   []laInternal
	futureRead []laFuture
	lostCand   []laLost

	// The readers of each state, grouped by readers(): the transactions that read key
	// k up to position p of its order are readerTxns[readerOff[s]:readerOff[s+1]] for
	// s = readerBase[k]+p+1.
	readerTxns, readerOff, readerBase []int32

	scratch laScratch
}

// laKey is what is known of one key.
type laKey struct {
	// vals and ents index the key's elements while it has few (localElems): a scan of
	// them is quicker than a hash table that misses the cache. big: the key outgrew
	// them and its elements are in the element table's index.
	vals []int64
	ents []int32
	big  bool

	main    []int64
	mainEnt []int32 // the element entry of each position of main
	alts    [][]int64
	dupAt   int32 // first position of main that repeats an earlier element; -1 if none
	failed  bool  // a failed transaction appended to it
	// order is the version order (main without repeats, or the longest list when reads
	// disagree), orderEnt its entries.
	order    []int64
	orderEnt []int32
}

// laRead is one read of a list: the first n elements of list chain of key.
type laRead struct {
	txn   int32
	key   uint32
	n     int32
	chain int32 // 0: the key's main list; i: alts[i-1]
	null  bool  // read null rather than a list
}

// laInternal is a read that disagrees with its own transaction's earlier micro-ops.
type laInternal struct {
	txn      int32
	mop      int
	expected string
}

// laFuture is a read of a value its own transaction appends later.
type laFuture struct {
	txn  int32
	mop  int
	elem int64
}

// laLost is an ok transaction that read a key (the read's identity in ident) before it
// first appended to it.
type laLost struct {
	key   uint32
	ident uint64
	txn   int32
	read  int32
}

// laScratch holds per-transaction state reused across transactions.
type laScratch struct {
	lastAppend []keyElem
	states     []laState
	pool       []int64
	first      []laFirst
}

type keyElem struct {
	key  uint32
	elem int64
}

func newListAppend() *listAppend { return &listAppend{} }

// localElems is how many elements a key indexes itself before it uses the element
// table's hash index.
const localElems = 64

// find returns the entry of element e of key k, or -1.
func (la *listAppend) find(k uint32, e int64) int32 {
	ks := &la.keys[k]
	if ks.big {
		return la.elems.get(k, e)
	}
	for i, v := range ks.vals {
		if v == e {
			return ks.ents[i]
		}
	}
	return -1
}

// intern returns the entry of element e of key k, adding one when absent.
func (la *listAppend) intern(k uint32, e int64) int32 {
	if ei := la.find(k, e); ei >= 0 {
		return ei
	}
	ei := la.elems.add(k, e)
	ks := &la.keys[k]
	if !ks.big {
		if len(ks.vals) < localElems {
			if ks.vals == nil {
				// Most keys take a few dozen elements: grown from one, each of its
				// two slices was allocated six times.
				ks.vals, ks.ents = make([]int64, 0, 8), make([]int32, 0, 8)
			}
			ks.vals = append(ks.vals, e)
			ks.ents = append(ks.ents, ei)
			return ei
		}
		ks.big = true
		for _, x := range ks.ents {
			la.elems.index(x)
		}
		ks.vals, ks.ents = nil, nil
	}
	la.elems.index(ei)
	return ei
}

// key returns key k's record, adding records up to it, the table grown to want
// records when it must grow (grownTo).
func (la *listAppend) key(k uint32, want int) *laKey {
	for int(k) >= len(la.keys) {
		la.keys = grownTo(la.keys, 1, want)
		la.keys = append(la.keys, laKey{dupAt: -1})
	}
	return &la.keys[k]
}

// take records a completed transaction.
func (la *listAppend) take(h *txnHistory, id int32, d *txnValue) error {
	status := h.txns[id].status
	for _, m := range d.mops {
		switch {
		case m.kind == mopWrite:
			return fmt.Errorf("history index %d: list-append transaction has a write [w %s %s] (want append or r)", h.at(id), h.in.keyString(m.key), h.in.valueString(m.val))
		case m.kind == mopRead && m.hasValue && !m.isList:
			return fmt.Errorf("history index %d: list-append read of %s returned %s, not a list", h.at(id), h.in.keyString(m.key), h.in.valueString(m.val))
		}
		la.key(m.key, h.expect(int(m.key)+1))
	}
	first := len(h.mops)
	la.reads = grownTo(la.reads, len(d.mops), h.expect(len(la.reads)+len(d.mops)))
	la.appendEnt = grownTo(la.appendEnt, len(d.mops), h.expect(len(la.appendEnt)+len(d.mops)))
	la.elems.entries = grownTo(la.elems.entries, len(d.mops), h.expect(len(la.elems.entries)+len(d.mops)))
	h.appendMops(id, d, func(_ int, m rawMop) int64 {
		if status == txnFail || status == txnInfo && !m.hasValue {
			// What a failed transaction read says nothing; an unknown one's read of
			// nothing is no read at all.
			return -1
		}
		list := d.list[m.list : m.list+m.len]
		chain := la.chainRef(m.key, list)
		la.reads = append(la.reads, laRead{txn: id, key: m.key, n: int32(len(list)), chain: chain, null: !m.hasValue})
		return int64(len(la.reads) - 1)
	})
	la.scratch.lastAppend = la.scratch.lastAppend[:0]
	for _, m := range h.mops[first:] {
		if m.kind != mopAppend {
			la.appendEnt = append(la.appendEnt, -1)
			continue
		}
		ei := la.intern(m.key, m.val)
		la.appendEnt = append(la.appendEnt, ei)
		e := &la.elems.entries[ei]
		if e.writer >= 0 {
			return fmt.Errorf("history index %d: %s appended to %s by two transactions (the other at history index %d): list-append needs every appended value unique per key",
				h.at(id), h.in.valueString(m.val), h.in.keyString(m.key), h.at(e.writer))
		}
		e.writer = id
		if status == txnFail {
			la.keys[m.key].failed = true
		}
		// An earlier append of this transaction to the same key was intermediate.
		found := false
		for i, ke := range la.scratch.lastAppend {
			if ke.key == m.key {
				if prev := la.find(ke.key, ke.elem); prev >= 0 {
					la.elems.entries[prev].im = id
				}
				la.scratch.lastAppend[i].elem = m.val
				found = true
				break
			}
		}
		if !found {
			la.scratch.lastAppend = append(la.scratch.lastAppend, keyElem{m.key, m.val})
		}
	}
	if status == txnOK {
		la.checkTxn(h, id, d)
	}
	return nil
}

// isPrefix reports whether a is a prefix of b.
func isPrefix(a, b []int64) bool {
	return len(a) <= len(b) && slices.Equal(a, b[:len(a)])
}

// chainRef returns the list of key k that list is a prefix of, extending one when list
// extends it, starting another when it is neither.
func (la *listAppend) chainRef(k uint32, list []int64) int32 {
	ks := &la.keys[k]
	if isPrefix(list, ks.main) {
		return 0
	}
	if isPrefix(ks.main, list) {
		if ks.main == nil {
			// As for intern's slices: a key's list grows a few elements at a time.
			ks.main, ks.mainEnt = make([]int64, 0, max(8, len(list))), make([]int32, 0, max(8, len(list)))
		}
		for i := len(ks.main); i < len(list); i++ {
			ei := la.intern(k, list[i])
			ks.mainEnt = append(ks.mainEnt, ei)
			if e := &la.elems.entries[ei]; e.pos >= 0 {
				if ks.dupAt < 0 {
					ks.dupAt = int32(i)
				}
			} else {
				e.pos = int32(i)
			}
		}
		ks.main = append(ks.main, list[len(ks.main):]...)
		return 0
	}
	for j, alt := range ks.alts {
		if isPrefix(list, alt) {
			return int32(j + 1)
		}
		if isPrefix(alt, list) {
			ks.alts[j] = append(alt, list[len(alt):]...)
			return int32(j + 1)
		}
	}
	ks.alts = append(ks.alts, slices.Clone(list))
	return int32(len(ks.alts))
}

// chain returns list c of key k.
func (ks *laKey) chain(c int32) []int64 {
	if c == 0 {
		return ks.main
	}
	return ks.alts[c-1]
}

// readList returns the elements read r saw.
func (la *listAppend) readList(r laRead) []int64 {
	return la.keys[r.key].chain(r.chain)[:r.n]
}

// lastEnt returns the element entry of the last element read r saw, or -1.
func (la *listAppend) lastEnt(r laRead) int32 {
	if r.n == 0 {
		return -1
	}
	if r.chain == 0 {
		return la.keys[r.key].mainEnt[r.n-1]
	}
	return la.find(r.key, la.readList(r)[r.n-1])
}

// laState is a transaction's own idea of a key's list, for the internal check: null
// (read nil), known, or known only at its end (suffix, after appends to a list it
// never read). Its elements are pool[start : start+n] of the scratch.
type laState struct {
	key      uint32
	null     bool
	suffix   bool
	start, n int
}

type laFirst struct {
	key     uint32
	read    int32 // first read of the key, -1 if none before the first append
	written bool
}

// checkTxn looks within one committed transaction: internal consistency, future
// reads, and the reads that lost-update compares. None of them can happen in a
// transaction that touches every key once.
func (la *listAppend) checkTxn(h *txnHistory, id int32, d *txnValue) {
	repeated := false
	for i := 1; i < len(d.mops) && !repeated; i++ {
		for j := 0; j < i; j++ {
			if d.mops[i].key == d.mops[j].key {
				repeated = true
				break
			}
		}
	}
	if !repeated {
		return
	}
	sc := &la.scratch
	sc.states, sc.pool, sc.first = sc.states[:0], sc.pool[:0], sc.first[:0]
	mops := h.txnMops(id)
	internalDone, futureDone := false, false
	for i, m := range d.mops {
		list := d.list[m.list : m.list+m.len]
		st := -1
		for j := range sc.states {
			if sc.states[j].key == m.key {
				st = j
				break
			}
		}
		switch m.kind {
		case mopAppend:
			switch {
			case st < 0:
				sc.states = append(sc.states, laState{key: m.key, suffix: true, start: len(sc.pool), n: 1})
				sc.pool = append(sc.pool, m.val)
			case sc.states[st].null:
				sc.states[st] = laState{key: m.key, start: len(sc.pool), n: 1}
				sc.pool = append(sc.pool, m.val)
			default:
				s := &sc.states[st]
				if s.start+s.n != len(sc.pool) {
					start := len(sc.pool)
					sc.pool = append(sc.pool, sc.pool[s.start:s.start+s.n]...)
					s.start = start
				}
				sc.pool = append(sc.pool, m.val)
				s.n++
			}
			// A future read: an earlier read of this key saw what is only appended now.
			if !futureDone {
				for j, r := range d.mops[:i] {
					if r.kind == mopRead && r.key == m.key && slices.Contains(d.list[r.list:r.list+r.len], m.val) {
						la.futureRead = append(la.futureRead, laFuture{txn: id, mop: j, elem: m.val})
						futureDone = true
						break
					}
				}
			}
		case mopRead:
			if st >= 0 && !sc.states[st].null && !internalDone {
				s := sc.states[st]
				want := sc.pool[s.start : s.start+s.n]
				bad := false
				if s.suffix {
					i := len(list) - len(want)
					bad = i < 0 || !slices.Equal(want, list[i:])
				} else {
					bad = !m.hasValue || !slices.Equal(want, list)
				}
				if bad {
					la.internal = append(la.internal, laInternal{txn: id, mop: i, expected: la.stateText(h, s.suffix, want)})
					internalDone = true
				}
			}
			next := laState{key: m.key, null: !m.hasValue, start: len(sc.pool), n: len(list)}
			sc.pool = append(sc.pool, list...)
			if st >= 0 {
				sc.states[st] = next
			} else {
				sc.states = append(sc.states, next)
			}
		}
		// Lost update: the first read of a key before the transaction first appends.
		f := -1
		for j := range sc.first {
			if sc.first[j].key == m.key {
				f = j
				break
			}
		}
		if f < 0 {
			sc.first = append(sc.first, laFirst{key: m.key, read: -1})
			f = len(sc.first) - 1
		}
		fs := &sc.first[f]
		switch {
		case m.kind == mopRead && fs.read < 0 && !fs.written:
			fs.read = int32(mops[i].val)
		case m.kind == mopAppend && !fs.written:
			fs.written = true
			if fs.read >= 0 {
				r := la.reads[fs.read]
				ident := uint64(r.chain)<<33 | uint64(r.n)<<1
				if r.null {
					ident |= 1
				}
				la.lostCand = append(la.lostCand, laLost{key: m.key, ident: ident, txn: id, read: fs.read})
			}
		}
	}
}

// stateText shows what a transaction expected a key to hold: a list, or the end of one.
func (la *listAppend) stateText(h *txnHistory, suffix bool, elems []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	if suffix {
		b.WriteString("...")
		if len(elems) > 0 {
			b.WriteByte(' ')
		}
	}
	for i, e := range elems {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(h.in.valueString(e))
	}
	b.WriteByte(']')
	return b.String()
}

// listText shows a list read, long ones by their last elements.
func listText(h *txnHistory, l []int64, null bool) string {
	if null {
		return "null"
	}
	const most = 8
	var b strings.Builder
	b.WriteByte('[')
	start := 0
	if len(l) > most {
		start = len(l) - most
		fmt.Fprintf(&b, "... (%d more) ", start)
	}
	for i, e := range l[start:] {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(h.in.valueString(e))
	}
	b.WriteByte(']')
	return b.String()
}

// analyze works out every key's version order, the dependencies between transactions,
// and the anomalies that need no cycle.
func (la *listAppend) analyze(ctx context.Context, h *txnHistory, c *txnCheck) (*txnAnalysis, error) {
	an := newTxnAnalysis(h, c, la)
	la.orders()
	if ctx.Err() != nil {
		return an, nil
	}
	// The anomalies of single reads and keys need no graph.
	an.aside(func(side *txnAnalysis) { la.cases(h, side) })
	la.readers()
	an.graph = la.graph(h, c)
	return an, nil
}

// orders sets each key's version order: its longest read, without repeats, and the
// position of each element in it.
func (la *listAppend) orders() {
	for k := range la.keys {
		ks := &la.keys[k]
		if len(ks.alts) == 0 && ks.dupAt < 0 {
			ks.order, ks.orderEnt = ks.main, ks.mainEnt
			continue
		}
		longest := ks.main
		for _, alt := range ks.alts {
			if len(alt) > len(longest) {
				longest = alt
			}
		}
		for _, ei := range ks.mainEnt {
			la.elems.entries[ei].pos = -1
		}
		for _, alt := range ks.alts {
			for _, e := range alt {
				if ei := la.find(uint32(k), e); ei >= 0 {
					la.elems.entries[ei].pos = -1
				}
			}
		}
		ks.order, ks.orderEnt = nil, nil
		for _, e := range longest {
			ei := la.intern(uint32(k), e)
			if en := &la.elems.entries[ei]; en.pos < 0 {
				en.pos = int32(len(ks.order))
				ks.order = append(ks.order, e)
				ks.orderEnt = append(ks.orderEnt, ei)
			}
		}
	}
}

// statePos returns the position in its key's order of the last element read r saw: -1
// for the empty list, -2 for an element not in the order.
func (la *listAppend) statePos(r laRead) int32 {
	if r.n == 0 {
		return -1
	}
	ks := &la.keys[r.key]
	if r.chain == 0 && ks.dupAt < 0 && len(ks.alts) == 0 {
		return r.n - 1
	}
	if ei := la.lastEnt(r); ei >= 0 && la.elems.entries[ei].pos >= 0 {
		return la.elems.entries[ei].pos
	}
	return -2
}

// readers groups the transactions of ok and unknown reads by the state they saw (see
// readersOf).
func (la *listAppend) readers() {
	base := make([]int32, len(la.keys)+1)
	for k := range la.keys {
		base[k+1] = base[k] + int32(len(la.keys[k].order)) + 1
	}
	count := make([]int32, base[len(la.keys)]+1)
	for _, r := range la.reads {
		if p := la.statePos(r); p >= -1 {
			count[base[r.key]+p+2]++
		}
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	txns := make([]int32, count[len(count)-1])
	fill := slices.Clone(count)
	for _, r := range la.reads {
		if p := la.statePos(r); p >= -1 {
			s := base[r.key] + p + 1
			txns[fill[s]] = r.txn
			fill[s]++
		}
	}
	la.readerTxns, la.readerOff, la.readerBase = txns, count, base
}

// readersOf returns the transactions that read key k up to position p of its order
// (p = -1: the empty list).
func (la *listAppend) readersOf(k uint32, p int32) []int32 {
	s := la.readerBase[k] + p + 1
	return la.readerTxns[la.readerOff[s]:la.readerOff[s+1]]
}

// prevPos is the position in key k's order of the element appended just before the
// element of entry ei: the one before it, or for an element no read saw, the last any
// read saw (-1: none).
func (la *listAppend) prevPos(k uint32, ei int32) int32 {
	if p := la.elems.entries[ei].pos; p >= 0 {
		return p - 1
	}
	return int32(len(la.keys[k].order)) - 1
}

// writer returns the committed or unknown transaction that appended the element of
// entry ei, or -1.
func (la *listAppend) writer(h *txnHistory, ei int32) int32 {
	if ei < 0 {
		return -1
	}
	w := la.elems.entries[ei].writer
	if w < 0 || h.txns[w].status == txnFail {
		return -1
	}
	return w
}

// graph builds the dependency graph: the ww, wr and rw dependencies into each
// transaction (incoming), with process or real-time order as the check needs.
func (la *listAppend) graph(h *txnHistory, c *txnCheck) *txnGraph {
	return buildGraph(h, c, func(g *txnGraph, prev []int32, in *incoming) { la.incoming(h, g, prev, in) })
}

// incoming finds the dependencies into each transaction of in's range: wr from the
// append each of its reads saw last, ww from the append before each of its own, rw
// from the reads of the state each of its appends replaced; and from prev[id], when
// prev is given, the process order.
func (la *listAppend) incoming(h *txnHistory, g *txnGraph, prev []int32, in *incoming) {
	in.off = make([]int32, in.hi-in.lo+1)
	share := float64(in.hi-in.lo) / float64(max(1, len(h.txns)))
	in.src = make([]int32, 0, int(share*float64(len(la.reads)+2*len(la.elems.entries))))
	in.bits = make([]edgeBits, 0, cap(in.src))
	for id := in.lo; id < in.hi; id++ {
		t := &h.txns[id]
		start := len(in.src)
		in.off[id-in.lo] = int32(start)
		if t.status == txnFail {
			continue
		}
		for i := t.mop; i < t.mop+t.nmop; i++ {
			m := &h.mops[i]
			if m.kind == mopRead {
				if m.val >= 0 {
					if w := la.writer(h, la.lastEnt(la.reads[m.val])); w >= 0 {
						in.add(g, int32(id), start, w, relWR)
					}
				}
				continue
			}
			ei := la.appendEnt[i]
			if ei < 0 {
				continue
			}
			k := m.key
			p := la.prevPos(k, ei)
			if p >= 0 {
				if w := la.writer(h, la.keys[k].orderEnt[p]); w >= 0 {
					in.add(g, int32(id), start, w, relWW)
				}
			}
			for _, r := range la.readersOf(k, p) {
				in.add(g, int32(id), start, r, relRW)
			}
		}
		if prev != nil && prev[id] >= 0 {
			in.add(g, int32(id), start, prev[id], relProcess)
		}
	}
	in.off[in.hi-in.lo] = int32(len(in.src))
}
