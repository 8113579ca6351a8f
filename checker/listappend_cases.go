package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// cases adds the list-append anomalies that need no cycle.
func (la *listAppend) cases(h *txnHistory, an *txnAnalysis) {
	for _, c := range la.internal {
		m := h.txnMops(c.txn)[c.mop]
		an.add("internal", txnAnomaly{txns: []int32{c.txn},
			text: fmt.Sprintf("%s read %s = %s, but its own earlier micro-ops mean it should have read %s",
				h.name(c.txn), h.in.keyString(m.key), la.mopReadText(h, m), c.expected)})
	}
	for _, c := range la.futureRead {
		m := h.txnMops(c.txn)[c.mop]
		an.add("future-read", txnAnomaly{txns: []int32{c.txn},
			text: fmt.Sprintf("%s read %s = %s, which holds %s, a value it appends to %s only later",
				h.name(c.txn), h.in.keyString(m.key), la.mopReadText(h, m), h.in.valueString(c.elem), h.in.keyString(m.key))})
	}
	la.readCases(h, an)
	la.dirtyUpdates(h, an)
	la.incompatible(h, an)
	la.lostUpdates(h, an)
}

// mopReadText shows what read micro-op m saw.
func (la *listAppend) mopReadText(h *txnHistory, m txnMop) string {
	if m.val < 0 {
		return "null"
	}
	r := la.reads[m.val]
	return listText(h, la.readList(r), r.null)
}

// readCases adds the anomalies of single reads: aborted reads (G1a), intermediate
// reads (G1b), repeated elements, and elements nobody appended.
func (la *listAppend) readCases(h *txnHistory, an *txnAnalysis) {
	// Per list, the first position that repeats an element, the first that no
	// transaction appended and the first that a failed one did: a read no longer
	// than that has none of them.
	type chainFacts struct{ dup, garbage, failed int32 }
	facts := func(l []int64, ent func(i int) int32) chainFacts {
		n := int32(len(l))
		f := chainFacts{dup: n, garbage: n, failed: n}
		for i := range l {
			ei := ent(i)
			w := int32(-1)
			if ei >= 0 {
				w = la.elems.entries[ei].writer
			}
			switch {
			case w < 0 && f.garbage == n:
				f.garbage = int32(i)
			case w >= 0 && h.txns[w].status == txnFail && f.failed == n:
				f.failed = int32(i)
			}
		}
		return f
	}
	mainFacts := make([]chainFacts, len(la.keys))
	for k := range la.keys {
		ks := &la.keys[k]
		f := facts(ks.main, func(i int) int32 { return ks.mainEnt[i] })
		if ks.dupAt >= 0 {
			f.dup = ks.dupAt
		}
		mainFacts[k] = f
	}
	altFacts := map[[2]uint32]chainFacts{}
	altFactsOf := func(k uint32, c int32) chainFacts {
		id := [2]uint32{k, uint32(c)}
		if f, ok := altFacts[id]; ok {
			return f
		}
		l := la.keys[k].chain(c)
		f := facts(l, func(i int) int32 { return la.find(k, l[i]) })
		seen := make(map[int64]bool, len(l))
		for i, e := range l {
			if seen[e] {
				f.dup = int32(i)
				break
			}
			seen[e] = true
		}
		altFacts[id] = f
		return f
	}
	for _, r := range la.reads {
		if r.n == 0 {
			continue
		}
		f := mainFacts[r.key]
		if r.chain > 0 {
			f = altFactsOf(r.key, r.chain)
		}
		if f.dup < r.n {
			la.duplicates(h, an, r)
		}
		if h.txns[r.txn].status != txnOK {
			continue
		}
		if f.garbage < r.n || f.failed < r.n {
			la.badElements(h, an, r)
		}
		if ei := la.lastEnt(r); ei >= 0 {
			if im := la.elems.entries[ei].im; im >= 0 && im != r.txn {
				l := la.readList(r)
				last := l[len(l)-1]
				key := h.in.keyString(r.key)
				an.add("G1b", txnAnomaly{txns: []int32{r.txn, im},
					text: fmt.Sprintf("%s read %s = %s, which ends with %s, an intermediate state of %s: that transaction appended to %s again after %s",
						h.name(r.txn), key, listText(h, l, false), h.in.valueString(last), h.name(im), key, h.in.valueString(last))})
			}
		}
	}
}

// duplicates reports a read that saw an element more than once.
func (la *listAppend) duplicates(h *txnHistory, an *txnAnalysis, r laRead) {
	l := la.readList(r)
	count := map[int64]int{}
	for _, e := range l {
		count[e]++
	}
	var dups []string
	for _, e := range l {
		if count[e] > 1 {
			dups = append(dups, fmt.Sprintf("%s (%d times)", h.in.valueString(e), count[e]))
			count[e] = 0
		}
	}
	an.add("duplicate-elements", txnAnomaly{txns: []int32{r.txn},
		text: fmt.Sprintf("%s read %s = %s, with %s", h.name(r.txn), h.in.keyString(r.key), listText(h, l, false), strings.Join(dups, ", "))})
}

// badElements reports the elements of a committed read that no transaction appended
// (garbage-read) or that a failed one did (G1a).
func (la *listAppend) badElements(h *txnHistory, an *txnAnalysis, r laRead) {
	l := la.readList(r)
	key := h.in.keyString(r.key)
	for i, e := range l {
		var ei int32
		if r.chain == 0 {
			ei = la.keys[r.key].mainEnt[i]
		} else {
			ei = la.find(r.key, e)
		}
		w := int32(-1)
		if ei >= 0 {
			w = la.elems.entries[ei].writer
		}
		switch {
		case w < 0:
			an.add("garbage-read", txnAnomaly{txns: []int32{r.txn},
				text: fmt.Sprintf("%s read %s = %s, but no transaction of the history appended %s to %s",
					h.name(r.txn), key, listText(h, l, false), h.in.valueString(e), key)})
		case h.txns[w].status == txnFail:
			an.add("G1a", txnAnomaly{txns: []int32{r.txn, w},
				text: fmt.Sprintf("%s read %s = %s, which holds %s, appended by %s, which failed: it read aborted state",
					h.name(r.txn), key, listText(h, l, false), h.in.valueString(e), h.name(w))})
		}
	}
}

// dirtyUpdates walks each key with an aborted append along its version order: a
// committed append built on the state a failed one left is a dirty update.
func (la *listAppend) dirtyUpdates(h *txnHistory, an *txnAnalysis) {
	for k := range la.keys {
		ks := &la.keys[k]
		if !ks.failed {
			continue
		}
		// from is the last writer whose state the walk is on (-1: the initial
		// state, committed); since holds the values from its append on.
		from, fromStatus := int32(-1), txnOK
		var since []int64
		for i, e := range ks.order {
			to, toStatus := la.elems.entries[ks.orderEnt[i]].writer, txnInfo
			if to >= 0 {
				toStatus = h.txns[to].status
			}
			switch {
			case toStatus == txnOK && fromStatus == txnFail:
				vals := append(slices.Clone(since), e)
				an.add("dirty-update", txnAnomaly{txns: []int32{from, to},
					text: fmt.Sprintf("%s's version order has %s, appended by %s, which committed, after %s, appended by %s, which failed: a committed append built on aborted state",
						h.in.keyString(uint32(k)), h.in.valueString(e), h.name(to), valuesText(h, vals[:len(vals)-1]), h.name(from))})
				from, fromStatus, since = to, toStatus, append(since[:0], e)
			case toStatus == txnOK || toStatus == txnFail && fromStatus != txnFail:
				from, fromStatus, since = to, toStatus, append(since[:0], e)
			default:
				// After an unknown transaction, or a failed one after a failed one, the
				// walk stays on the state it was on.
				since = append(since, e)
			}
		}
	}
}

// valuesText shows values separated by spaces.
func valuesText(h *txnHistory, vs []int64) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = h.in.valueString(v)
	}
	return strings.Join(s, " ")
}

// incompatible reports each key whose reads no single order of appends explains: the
// first two of its distinct reads, by length, of which the shorter is not a prefix of
// the longer.
func (la *listAppend) incompatible(h *txnHistory, an *txnAnalysis) {
	type seen struct {
		chain, n int32
		txn      int32
	}
	var keys []uint32
	byKey := map[uint32][]seen{}
	for k := range la.keys {
		if len(la.keys[k].alts) > 0 {
			keys = append(keys, uint32(k))
		}
	}
	if len(keys) == 0 {
		return
	}
	for _, r := range la.reads {
		if len(la.keys[r.key].alts) == 0 || r.n == 0 {
			continue
		}
		ss := byKey[r.key]
		if !slices.ContainsFunc(ss, func(s seen) bool { return s.chain == r.chain && s.n == r.n }) {
			byKey[r.key] = append(ss, seen{r.chain, r.n, r.txn})
		}
	}
	for _, k := range keys {
		ks := &la.keys[k]
		ss := byKey[k]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].n < ss[j].n })
		for i := 0; i+1 < len(ss); i++ {
			a := ks.chain(ss[i].chain)[:ss[i].n]
			b := ks.chain(ss[i+1].chain)[:ss[i+1].n]
			if isPrefix(a, b) {
				continue
			}
			an.add("incompatible-order", txnAnomaly{txns: []int32{ss[i].txn, ss[i+1].txn},
				text: fmt.Sprintf("%s read %s = %s and %s read %s = %s: no single order of appends to %s gives both",
					h.name(ss[i].txn), h.in.keyString(k), listText(h, a, false), h.name(ss[i+1].txn), h.in.keyString(k), listText(h, b, false), h.in.keyString(k))})
			break
		}
	}
}

// lostUpdates reports committed transactions that read the same version of a key and
// then appended to it: all but one of their updates were built on a version another
// had already replaced.
func (la *listAppend) lostUpdates(h *txnHistory, an *txnAnalysis) {
	c := la.lostCand
	sort.Slice(c, func(i, j int) bool {
		if c[i].key != c[j].key {
			return c[i].key < c[j].key
		}
		if c[i].ident != c[j].ident {
			return c[i].ident < c[j].ident
		}
		return c[i].txn < c[j].txn
	})
	for i := 0; i < len(c); {
		j := i + 1
		for j < len(c) && c[j].key == c[i].key && c[j].ident == c[i].ident {
			j++
		}
		if j-i >= 2 {
			txns := make([]int32, 0, j-i)
			names := make([]string, 0, j-i)
			for _, x := range c[i:j] {
				txns = append(txns, x.txn)
				names = append(names, h.name(x.txn))
			}
			r := la.reads[c[i].read]
			an.add("lost-update", txnAnomaly{txns: txns,
				text: fmt.Sprintf("%s all read %s = %s and then appended to %s: each built on a version the others also replaced",
					strings.Join(names, ", "), h.in.keyString(c[i].key), listText(h, la.readList(r), r.null), h.in.keyString(c[i].key))})
		}
		i = j
	}
}

// explainEdge says why a precedes b by rel, naming them an and bn, with the data of
// the step.
func (la *listAppend) explainEdge(h *txnHistory, a, b int32, rel edgeBits, an, bn string) (string, cycleStep) {
	step := cycleStep{Type: rel.String(), FromMop: -1, ToMop: -1}
	t := h.txns[b]
	for i, m := range h.txnMops(b) {
		key := h.in.keyString(m.key)
		switch {
		case rel == relWR && m.kind == mopRead && m.val >= 0:
			r := la.reads[m.val]
			if r.n == 0 || la.writer(h, la.lastEnt(r)) != a {
				continue
			}
			l := la.readList(r)
			last := l[len(l)-1]
			step.Key, step.Value, step.ToMop = h.in.keyJSON(m.key), h.in.valueJSON(last), i
			step.FromMop = la.appendMop(h, a, m.key, last)
			return fmt.Sprintf("%s read %s = %s, which ends with %s's append of %s", bn, key, listText(h, l, r.null), an, h.in.valueString(last)), step
		case (rel == relWW || rel == relRW) && m.kind == mopAppend:
			ks := &la.keys[m.key]
			ei := la.appendEnt[int(t.mop)+i]
			p := la.prevPos(m.key, ei)
			unread := la.elems.entries[ei].pos < 0
			v := h.in.valueString(m.val)
			if rel == relWW {
				if p < 0 || la.writer(h, ks.orderEnt[p]) != a {
					continue
				}
				prev := ks.order[p]
				step.Key, step.Value, step.Value2 = h.in.keyJSON(m.key), h.in.valueJSON(prev), h.in.valueJSON(m.val)
				step.FromMop, step.ToMop = la.appendMop(h, a, m.key, prev), i
				if unread {
					return fmt.Sprintf("%s appended %s to %s, which no read saw, so after %s's append of %s, the last any read of %s saw", bn, v, key, an, h.in.valueString(prev), key), step
				}
				return fmt.Sprintf("%s appended %s to %s right after %s's append of %s", bn, v, key, an, h.in.valueString(prev)), step
			}
			if !slices.Contains(la.readersOf(m.key, p), a) {
				continue
			}
			step.Key, step.Value2, step.ToMop = h.in.keyJSON(m.key), h.in.valueJSON(m.val), i
			seen := "[]"
			if p >= 0 {
				step.Value = h.in.valueJSON(ks.order[p])
				seen = listText(h, ks.order[:p+1], false)
			}
			step.FromMop = la.readMop(h, a, m.key, p)
			switch {
			case unread:
				return fmt.Sprintf("%s read %s = %s and did not see %s's append of %s, which no read saw and so came after every read", an, key, seen, bn, v), step
			case p < 0:
				return fmt.Sprintf("%s read %s = [] and did not see %s's append of %s, the first to %s", an, key, bn, v, key), step
			}
			return fmt.Sprintf("%s read %s = %s and did not see %s's append of %s, the next to %s", an, key, seen, bn, v, key), step
		}
	}
	return "", step
}

// appendMop returns the index of txn's append of e to k, or -1.
func (la *listAppend) appendMop(h *txnHistory, txn int32, k uint32, e int64) int {
	for i, m := range h.txnMops(txn) {
		if m.kind == mopAppend && m.key == k && m.val == e {
			return i
		}
	}
	return -1
}

// readMop returns the index of txn's first read of k that saw the list up to position p
// of its order, or -1.
func (la *listAppend) readMop(h *txnHistory, txn int32, k uint32, p int32) int {
	for i, m := range h.txnMops(txn) {
		if m.kind == mopRead && m.key == k && m.val >= 0 && la.statePos(la.reads[m.val]) == p {
			return i
		}
	}
	return -1
}
