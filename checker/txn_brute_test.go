package checker

import (
	"slices"
)

// A brute-force reference for the transactional checkers, on histories small enough to
// enumerate: it never infers anything, it tries every way the history could have
// happened, each model by its own definition, written without the checker's code.
//
//   - serializable: some set of the unknown transactions committed (with every ok
//     one, and no failed one), and some total order of those, run one at a time from
//     empty keys, gives every ok transaction's reads exactly (each read seeing the
//     state left by the transactions before it and the transaction's own earlier
//     micro-ops);
//   - strict-serializable: the same order also puts every ok transaction before
//     every transaction invoked after it completed;
//   - strong-session-serializable: it puts every ok transaction before the later ok
//     transactions of its process;
//   - snapshot-isolation (operational, Adya's and Cerone and Gotsman's): in a total
//     commit order, each transaction reads a snapshot, the state after some prefix of
//     the transactions committed before it, plus its own micro-ops; and no two
//     transactions that write a common key are concurrent (first committer wins:
//     none commits between another's snapshot and its commit). Each transaction takes
//     the latest snapshot that gives its reads, which leaves the fewest conflicts;
//   - strong-snapshot-isolation and strong-session-snapshot-isolation: the snapshot
//     also holds every transaction that completed before the transaction was invoked
//     (of its process);
//   - read-uncommitted, read-committed and repeatable-read (Adya's PL-1, PL-2 and
//     PL-2.99): some committed set and some version order of each key (an order of
//     the transactions that wrote it) in which every external read of an ok
//     transaction reads a version (a list is the appends of a prefix of the order;
//     a register the value of a prefix's last write, or null), such that the direct
//     serialization graph (ww between consecutive versions, wr from a version's
//     writer to its readers, rw from a reader to the next version's writer) has no
//     cycle of ww edges (PL-1), of ww and wr edges (PL-2), or at all (PL-2.99). A
//     transaction that reads its own later write is a wr edge to itself: a cycle. A
//     read after the transaction's own append reads its own version: the one before
//     it in the order, then its own appends.
//     These definitions take no part in internal consistency (Adya's transactions
//     always see their own writes), so the differential test compares them only on
//     histories without an internal anomaly; and reading a version presumes what
//     read-uncommitted allows (an aborted write seen), so read-uncommitted is
//     compared only where some version order gives every read.

// bModel names a model the reference decides.
const (
	bSerializable    = "serializable"
	bStrict          = "strict-serializable"
	bStrongSession   = "strong-session-serializable"
	bSI              = "snapshot-isolation"
	bStrongSI        = "strong-snapshot-isolation"
	bStrongSessionSI = "strong-session-snapshot-isolation"
	bRU              = "read-uncommitted"
	bRC              = "read-committed"
	bRR              = "repeatable-read"
)

var bModels = []string{bRU, bRC, bRR, bSI, bSerializable, bStrongSessionSI, bStrongSI, bStrongSession, bStrict}

// bMop is a micro-op of a reference transaction: an append or write of val to key,
// or a read of key that saw list (list-append) or val (registers; null when null).
type bMop struct {
	read bool
	key  int
	val  int
	list []int
	null bool
}

// bTxn is a transaction as the reference sees it.
type bTxn struct {
	mops      []bMop
	ok, info  bool // neither: failed
	inv, comp int  // event positions; comp is -1 for an unknown outcome
	process   int
}

// bruteResult is what the reference decides of a history: which models it violates,
// and which the comparison may hold the checker to.
type bruteResult struct {
	violates   map[string]bool
	comparable map[string]bool
}

// brute decides txns for every model of bModels; registers selects the rw-register
// data model.
func brute(txns []bTxn, registers bool) bruteResult {
	res := bruteResult{violates: map[string]bool{}, comparable: map[string]bool{}}
	holds := map[string]bool{}
	var infos []int
	for i, t := range txns {
		if t.info {
			infos = append(infos, i)
		}
	}
	internal := bInternalAnomaly(txns, registers)
	explained := false
	for mask := 0; mask < 1<<len(infos); mask++ {
		var c []int
		for i, t := range txns {
			if t.ok {
				c = append(c, i)
			}
		}
		for j, i := range infos {
			if mask&(1<<j) != 0 {
				c = append(c, i)
			}
		}
		slices.Sort(c)
		bOperational(txns, c, registers, holds)
		if e := bDSG(txns, c, registers, holds); e {
			explained = true
		}
	}
	for _, m := range bModels {
		res.violates[m] = !holds[m]
		res.comparable[m] = true
	}
	if internal {
		res.comparable[bRC], res.comparable[bRR], res.comparable[bRU] = false, false, false
	}
	if !explained {
		res.comparable[bRU] = false
	}
	return res
}

// bInternalAnomaly reports whether an ok transaction's read disagrees with its own
// earlier micro-ops on the key, as Elle's internal check has it.
func bInternalAnomaly(txns []bTxn, registers bool) bool {
	for _, t := range txns {
		if !t.ok {
			continue
		}
		type st struct {
			known  bool // a read fixed the whole state
			null   bool
			list   []int // list-append: the state or, unknown prefix, its end
			val    int
			regSet bool
		}
		state := map[int]*st{}
		for _, m := range t.mops {
			s := state[m.key]
			if registers {
				if m.read {
					if s != nil && s.regSet && !s.null && (m.null || m.val != s.val) {
						return true
					}
					state[m.key] = &st{regSet: true, null: m.null, val: m.val}
				} else {
					state[m.key] = &st{regSet: true, val: m.val}
				}
				continue
			}
			if !m.read {
				switch {
				case s == nil:
					state[m.key] = &st{list: []int{m.val}}
				case s.null:
					state[m.key] = &st{known: true, list: []int{m.val}}
				default:
					s.list = append(slices.Clone(s.list), m.val)
				}
				continue
			}
			if s != nil && !s.null {
				if s.known {
					if m.null || !slices.Equal(s.list, m.list) {
						return true
					}
				} else if len(m.list) < len(s.list) || !slices.Equal(s.list, m.list[len(m.list)-len(s.list):]) {
					return true
				}
			}
			state[m.key] = &st{known: true, null: m.null, list: slices.Clone(m.list)}
		}
	}
	return false
}

// bState is every key's value: a list, or a register (absent: null).
type bState map[int][]int

func (s bState) clone() bState {
	c := bState{}
	for k, v := range s {
		c[k] = slices.Clone(v)
	}
	return c
}

// bRun runs transaction t on state s (modified), and reports whether its reads saw
// what they did; a transaction whose reads are unknown (info) always does.
func bRun(t bTxn, s bState, registers, checkReads bool) bool {
	good := true
	for _, m := range t.mops {
		if !m.read {
			if registers {
				s[m.key] = []int{m.val}
			} else {
				s[m.key] = append(s[m.key], m.val)
			}
			continue
		}
		if !checkReads {
			continue
		}
		cur := s[m.key]
		if registers {
			if m.null != (len(cur) == 0) || !m.null && cur[0] != m.val {
				good = false
			}
		} else if !slices.Equal(cur, m.list) {
			good = false
		}
	}
	return good
}

// bOperational tries every order of the committed transactions c, recording in holds
// each operational model some order satisfies.
func bOperational(txns []bTxn, c []int, registers bool, holds map[string]bool) {
	n := len(c)
	// before[i][j]: c[i] must precede c[j] in real time / in its process.
	rt := make([][]bool, n)
	proc := make([][]bool, n)
	for i, a := range c {
		rt[i], proc[i] = make([]bool, n), make([]bool, n)
		for j, b := range c {
			ta, tb := txns[a], txns[b]
			if ta.ok && ta.comp < tb.inv {
				rt[i][j] = true
				if ta.process == tb.process && tb.ok {
					proc[i][j] = true
				}
			}
		}
	}
	order := make([]int, n)
	used := make([]bool, n)
	var rec func(depth int)
	rec = func(depth int) {
		if depth == n {
			bOrder(txns, c, order, rt, proc, registers, holds)
			return
		}
		for i := 0; i < n; i++ {
			if !used[i] {
				used[i] = true
				order[depth] = i
				rec(depth + 1)
				used[i] = false
			}
		}
	}
	rec(0)
}

// bOrder judges one commit order (order holds indices into c).
func bOrder(txns []bTxn, c, order []int, rt, proc [][]bool, registers bool, holds map[string]bool) {
	n := len(order)
	pos := make([]int, n)
	for p, i := range order {
		pos[i] = p
	}
	respects := func(before [][]bool) bool {
		for i := range before {
			for j := range before[i] {
				if before[i][j] && pos[i] > pos[j] {
					return false
				}
			}
		}
		return true
	}
	// states[p] is the state after the first p transactions of the order.
	states := make([]bState, n+1)
	states[0] = bState{}
	for p, i := range order {
		states[p+1] = states[p].clone()
		bRun(txns[c[i]], states[p+1], registers, false)
	}
	serial := true
	for p, i := range order {
		t := txns[c[i]]
		if t.ok && !bRun(t, states[p].clone(), registers, true) {
			serial = false
			break
		}
	}
	if serial {
		holds[bSerializable] = true
		if respects(rt) {
			holds[bStrict] = true
		}
		if respects(proc) {
			holds[bStrongSession] = true
		}
	}
	// Snapshot isolation: each transaction's latest snapshot that gives its reads, no
	// earlier than the transactions it must see.
	si := func(mustSee [][]bool) bool {
		snap := make([]int, n)
		for p, i := range order {
			lo := 0
			for j := range order {
				if mustSee != nil && mustSee[j][i] {
					lo = max(lo, pos[j]+1)
				}
			}
			if lo > p {
				return false
			}
			t := txns[c[i]]
			snap[i] = -1
			for s := p; s >= lo; s-- {
				if !t.ok || bRun(t, states[s].clone(), registers, true) {
					snap[i] = s
					break
				}
			}
			if snap[i] < 0 {
				return false
			}
		}
		// First committer wins: nothing that writes a key i writes commits between
		// i's snapshot and i's commit.
		for _, i := range order {
			for _, j := range order {
				if i == j || pos[j] < snap[i] || pos[j] >= pos[i] {
					continue
				}
				if bWriteConflict(txns[c[i]], txns[c[j]]) {
					return false
				}
			}
		}
		return true
	}
	if si(nil) {
		holds[bSI] = true
	}
	if si(rt) {
		holds[bStrongSI] = true
	}
	if si(proc) {
		holds[bStrongSessionSI] = true
	}
}

// bWriteConflict reports whether two transactions write a common key.
func bWriteConflict(a, b bTxn) bool {
	for _, m := range a.mops {
		if m.read {
			continue
		}
		for _, o := range b.mops {
			if !o.read && o.key == m.key {
				return true
			}
		}
	}
	return false
}

// bDSG tries every version order of the committed transactions c, recording in holds
// the DSG models some order satisfies; it reports whether some order gives every
// external read a version.
func bDSG(txns []bTxn, c []int, registers bool, holds map[string]bool) bool {
	// Each key's writers among c: the transactions of its versions.
	writers := map[int][]int{}
	var keys []int
	for _, i := range c {
		seen := map[int]bool{}
		for _, m := range txns[i].mops {
			if !m.read && !seen[m.key] {
				seen[m.key] = true
				if writers[m.key] == nil {
					keys = append(keys, m.key)
				}
				writers[m.key] = append(writers[m.key], i)
			}
		}
	}
	slices.Sort(keys)
	orders := map[int][]int{}
	explained := false
	var rec func(ki int)
	rec = func(ki int) {
		if ki == len(keys) {
			if bVersions(txns, c, orders, registers, holds) {
				explained = true
			}
			return
		}
		k := keys[ki]
		for _, perm := range bPermutations(writers[k]) {
			orders[k] = perm
			rec(ki + 1)
		}
	}
	rec(0)
	return explained
}

// bPermutations returns every order of xs.
func bPermutations(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{slices.Clone(xs)}
	}
	var out [][]int
	for i := range xs {
		rest := append(slices.Clone(xs[:i]), xs[i+1:]...)
		for _, p := range bPermutations(rest) {
			out = append(out, append([]int{xs[i]}, p...))
		}
	}
	return out
}

// bVersions judges one version order per key: every external read must read a
// version; then the graph decides PL-1, PL-2 and PL-2.99.
func bVersions(txns []bTxn, c []int, orders map[int][]int, registers bool, holds map[string]bool) bool {
	// value of key k after the first j versions.
	version := func(k, j int) []int {
		var l []int
		for _, w := range orders[k][:j] {
			last := 0
			for _, m := range txns[w].mops {
				if !m.read && m.key == k {
					if registers {
						last = m.val
					} else {
						l = append(l, m.val)
					}
				}
			}
			if registers {
				l = []int{last}
			}
		}
		return l
	}
	type edge struct {
		a, b int
		rel  edgeBits
	}
	var edges []edge
	for _, order := range orders {
		for j := 1; j < len(order); j++ {
			edges = append(edges, edge{order[j-1], order[j], relWW})
		}
	}
	for _, i := range c {
		t := txns[i]
		if !t.ok {
			continue
		}
		own := map[int][]int{}
		for _, m := range t.mops {
			if !m.read {
				own[m.key] = append(own[m.key], m.val)
				continue
			}
			if len(own[m.key]) > 0 {
				// A read of the transaction's own version: for a list, the version
				// before its own in the order, then its own appends so far. (A
				// register's is its own write, which internal consistency decides.)
				if !registers {
					at := slices.Index(orders[m.key], i)
					if m.null || !slices.Equal(append(version(m.key, at), own[m.key]...), m.list) {
						return false
					}
				}
				continue
			}
			order := orders[m.key]
			found := -1
			for j := 0; j <= len(order); j++ {
				v := version(m.key, j)
				var ok bool
				if registers {
					ok = m.null == (len(v) == 0) && (m.null || v[0] == m.val)
				} else {
					ok = !m.null && slices.Equal(v, m.list) || m.null && len(v) == 0
				}
				if ok {
					found = j
					break
				}
			}
			if found < 0 {
				return false
			}
			if found > 0 {
				edges = append(edges, edge{order[found-1], i, relWR})
			}
			if found < len(order) && order[found] != i {
				edges = append(edges, edge{i, order[found], relRW})
			}
		}
	}
	cyclic := func(mask edgeBits) bool {
		adj := map[int][]int{}
		for _, e := range edges {
			if e.rel&mask != 0 {
				if e.a == e.b {
					return true
				}
				adj[e.a] = append(adj[e.a], e.b)
			}
		}
		// A cycle exists iff a depth-first search meets a vertex on its stack.
		state := map[int]int{}
		var visit func(v int) bool
		visit = func(v int) bool {
			state[v] = 1
			for _, w := range adj[v] {
				if state[w] == 1 || state[w] == 0 && visit(w) {
					return true
				}
			}
			state[v] = 2
			return false
		}
		for v := range adj {
			if state[v] == 0 && visit(v) {
				return true
			}
		}
		return false
	}
	if !cyclic(relWW) {
		holds[bRU] = true
	}
	if !cyclic(relWW | relWR) {
		holds[bRC] = true
	}
	if !cyclic(relWW | relWR | relRW) {
		holds[bRR] = true
	}
	return true
}
