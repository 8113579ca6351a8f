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
	main   []int64
	alts   [][]int64
	dupAt  int32 // first position of main that repeats an earlier element; -1 if none
	failed bool  // a failed transaction appended to it
	order  []int64
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
	seen       []laSeen
	first      []laFirst
}

type keyElem struct {
	key  uint32
	elem int64
}

func newListAppend() *listAppend { return &listAppend{} }

func (la *listAppend) key(k uint32) *laKey {
	for int(k) >= len(la.keys) {
		la.keys = append(la.keys, laKey{dupAt: -1})
	}
	return &la.keys[k]
}

// take records a completed transaction.
func (la *listAppend) take(h *txnHistory, id int32, d *txnDecoder) error {
	status := h.txns[id].status
	la.scratch.lastAppend = la.scratch.lastAppend[:0]
	for _, m := range d.mops {
		switch m.kind {
		case mopWrite:
			return fmt.Errorf("history index %d: list-append transaction has a write [w %s %s] (want append or r)", h.at(id), h.in.keyString(m.key), h.in.valueString(m.val))
		case mopAppend:
			ks := la.key(m.key)
			e := la.elems.upsert(m.key, m.val)
			if e.writer >= 0 {
				return fmt.Errorf("history index %d: %s appended to %s by two transactions (the other at history index %d): list-append needs every appended value unique per key",
					h.at(id), h.in.valueString(m.val), h.in.keyString(m.key), h.at(e.writer))
			}
			e.writer = id
			if status == txnFail {
				ks.failed = true
			}
			// An earlier append of this transaction to the same key was intermediate.
			found := false
			for i, ke := range la.scratch.lastAppend {
				if ke.key == m.key {
					if prev := la.elems.get(ke.key, ke.elem); prev != nil {
						prev.im = id
					}
					la.scratch.lastAppend[i].elem = m.val
					found = true
					break
				}
			}
			if !found {
				la.scratch.lastAppend = append(la.scratch.lastAppend, keyElem{m.key, m.val})
			}
		case mopRead:
			if m.hasValue && !m.isList {
				return fmt.Errorf("history index %d: list-append read of %s returned %s, not a list", h.at(id), h.in.keyString(m.key), h.in.valueString(m.val))
			}
			la.key(m.key)
		}
	}
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
		for i := len(ks.main); i < len(list); i++ {
			e := la.elems.upsert(k, list[i])
			if e.pos >= 0 {
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

// laState is a transaction's own idea of a key's list, for the internal check: absent,
// null (read nil), known, or known only at its end (suffix, after appends to a list
// it never read).
type laState struct {
	key    uint32
	null   bool
	suffix bool
	elems  []int64
}

type laSeen struct {
	key  uint32
	elem int64
	mop  int
}

type laFirst struct {
	key     uint32
	read    int32 // first read of the key, -1 if none before the first append
	written bool
}

// checkTxn looks within one committed transaction: internal consistency, future
// reads, and the reads that lost-update compares.
func (la *listAppend) checkTxn(h *txnHistory, id int32, d *txnDecoder) {
	sc := &la.scratch
	sc.states, sc.seen, sc.first = sc.states[:0], sc.seen[:0], sc.first[:0]
	mops := h.txnMops(id)
	internalDone, futureDone := false, false
	for i, m := range d.mops {
		list := d.list[m.list : m.list+m.len]
		// Internal consistency: the transaction's own view of the key.
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
				sc.states = append(sc.states, laState{key: m.key, suffix: true, elems: []int64{m.val}})
			case sc.states[st].null:
				sc.states[st] = laState{key: m.key, elems: []int64{m.val}}
			default:
				sc.states[st].elems = append(sc.states[st].elems, m.val)
			}
			if !futureDone {
				for _, s := range sc.seen {
					if s.key == m.key && s.elem == m.val {
						la.futureRead = append(la.futureRead, laFuture{txn: id, mop: s.mop, elem: m.val})
						futureDone = true
						break
					}
				}
			}
		case mopRead:
			if st >= 0 && !sc.states[st].null && !internalDone {
				s := sc.states[st]
				bad := false
				if s.suffix {
					i := len(list) - len(s.elems)
					bad = !m.hasValue && len(s.elems) > 0 || i < 0 || !slices.Equal(s.elems, list[i:])
				} else {
					bad = !m.hasValue || !slices.Equal(s.elems, list)
				}
				if bad {
					la.internal = append(la.internal, laInternal{txn: id, mop: i, expected: la.stateText(h, s)})
					internalDone = true
				}
			}
			next := laState{key: m.key, null: !m.hasValue, elems: slices.Clone(list)}
			if st >= 0 {
				sc.states[st] = next
			} else {
				sc.states = append(sc.states, next)
			}
			for _, e := range list {
				dup := false
				for _, s := range sc.seen {
					if s.key == m.key && s.elem == e {
						dup = true
						break
					}
				}
				if !dup {
					sc.seen = append(sc.seen, laSeen{key: m.key, elem: e, mop: i})
				}
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
func (la *listAppend) stateText(h *txnHistory, s laState) string {
	var b strings.Builder
	b.WriteByte('[')
	if s.suffix {
		b.WriteString("...")
		if len(s.elems) > 0 {
			b.WriteByte(' ')
		}
	}
	for i, e := range s.elems {
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
	la.readers()
	la.edges(h, an)
	la.cases(h, an)
	return an, nil
}

// orders sets each key's version order: its longest read, without repeats, and the
// position of each element in it.
func (la *listAppend) orders() {
	for k := range la.keys {
		ks := &la.keys[k]
		if len(ks.alts) == 0 && ks.dupAt < 0 {
			ks.order = ks.main
			continue
		}
		longest := ks.main
		for _, alt := range ks.alts {
			if len(alt) > len(longest) {
				longest = alt
			}
		}
		for _, l := range append([][]int64{ks.main}, ks.alts...) {
			for _, e := range l {
				if en := la.elems.get(uint32(k), e); en != nil {
					en.pos = -1
				}
			}
		}
		ks.order = nil
		for _, e := range longest {
			en := la.elems.upsert(uint32(k), e)
			if en.pos < 0 {
				en.pos = int32(len(ks.order))
				ks.order = append(ks.order, e)
			}
		}
	}
}

// readers groups the transactions of ok and unknown reads by the state they saw (see
// readersOf).
func (la *listAppend) readers() {
	base := make([]int32, len(la.keys)+1)
	for k := range la.keys {
		base[k+1] = base[k] + int32(len(la.keys[k].order)) + 1
	}
	slot := func(r laRead) int32 {
		if r.n == 0 {
			return base[r.key]
		}
		last := la.readList(r)[r.n-1]
		if en := la.elems.get(r.key, last); en != nil && en.pos >= 0 {
			return base[r.key] + en.pos + 1
		}
		return -1
	}
	count := make([]int32, base[len(la.keys)]+1)
	for _, r := range la.reads {
		if s := slot(r); s >= 0 {
			count[s+1]++
		}
	}
	for i := 1; i < len(count); i++ {
		count[i] += count[i-1]
	}
	txns := make([]int32, count[len(count)-1])
	fill := slices.Clone(count)
	for _, r := range la.reads {
		if s := slot(r); s >= 0 {
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

// prevPos is the position in key k's order of the element appended just before e: the
// one before it, or for an element no read saw, the last any read saw (-1: none).
func (la *listAppend) prevPos(k uint32, e int64) int32 {
	if en := la.elems.get(k, e); en != nil && en.pos >= 0 {
		return en.pos - 1
	}
	return int32(len(la.keys[k].order)) - 1
}

// writerOf returns the committed or unknown transaction that appended e to k, or -1.
func (la *listAppend) writerOf(h *txnHistory, k uint32, e int64) int32 {
	en := la.elems.get(k, e)
	if en == nil || en.writer < 0 || h.txns[en.writer].status == txnFail {
		return -1
	}
	return en.writer
}

// edges adds the ww, wr and rw dependencies.
func (la *listAppend) edges(h *txnHistory, an *txnAnalysis) {
	for _, r := range la.reads {
		if r.n == 0 {
			continue
		}
		if w := la.writerOf(h, r.key, la.readList(r)[r.n-1]); w >= 0 && w != r.txn {
			an.edge(w, r.txn, relWR)
		}
	}
	for id := range h.txns {
		t := h.txns[id]
		if t.status == txnFail {
			continue
		}
		for _, m := range h.txnMops(int32(id)) {
			if m.kind != mopAppend {
				continue
			}
			p := la.prevPos(m.key, m.val)
			if p >= 0 {
				if w := la.writerOf(h, m.key, la.keys[m.key].order[p]); w >= 0 && w != int32(id) {
					an.edge(w, int32(id), relWW)
				}
			}
			for _, r := range la.readersOf(m.key, p) {
				if r != int32(id) {
					an.edge(r, int32(id), relRW)
				}
			}
		}
	}
}
