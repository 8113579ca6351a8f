package checker

import (
	"encoding/binary"
	"slices"
)

// The register checker decides each key with a search of its own rather than with
// porcupine's, which keeps, for every state it reaches, the set of operations it has
// linearized: a bitset as long as the key's history, so that a long history of one key
// costs memory and time quadratic in its length (a million writes one after another
// took 8 GB and minutes). porcupine stays for what it does well, the visualization and
// the explanation of a short key that cannot be linearized.
//
// The search walks the key's events in history order and keeps the set of
// configurations a linearization of what came so far can be in: the register's state,
// which operations in flight have not taken effect yet, and which operations of
// unknown outcome have. It linearizes an operation only when it must, at its
// completion (Lowe's "just in time" linearization): any linearization can be moved to
// one where each operation takes effect as late as it can, so nothing is lost.
//   - An invocation adds the operation to every configuration as not yet taken effect.
//   - A completion of an operation with a known outcome keeps the configurations where
//     it has taken effect, and extends the others by every order of operations in
//     flight that ends with it taking effect: those that do not let it (a read of a
//     value the register cannot hold there) die. No configuration left: the key cannot
//     be linearized, and the operation completing is where it fails.
//   - An operation of unknown outcome (info, or never completed) may take effect at any
//     point after its invocation, or never, so it is never forced: it is used only
//     where an operation with a known outcome needs it, just before that operation (a
//     read of the value it wrote; a cas from the value it wrote or swapped in), and a
//     configuration records which it used. Two such operations with the same effect
//     (a write of 3) are interchangeable once both are invoked, so a configuration
//     counts effects used, not operations.
//   - Configurations that agree on the state and on what is in flight, one of which
//     used a subset of the other's unknown effects, are one: the first can do
//     everything the second can.
//
// At a point where nothing is in flight but operations of unknown outcome, the set
// holds one configuration per state the register can be in (and per set of unknown
// effects used, when that matters), so a long history of few concurrent operations is
// checked in time and memory linear in its length. A history of many concurrent
// operations with known outcomes can still need exponentially many configurations,
// the search's bounds (searchBounds) stop it then, and the key is undecided.
// TestRegisterJITAgainstPorcupine holds the search to porcupine on thousands of random
// histories, and the brute-force checker holds both.

// jitEffect is what an operation of unknown outcome does if it takes effect: a write
// of a, or a cas from a to b.
type jitEffect struct {
	cas  bool
	a, b int64
}

// jitUse counts how many operations of effect e a configuration used.
type jitUse struct{ e, n int32 }

// jitConfig is one configuration: the state, the operations in flight not yet taken
// effect (bits by slot), and the unknown effects used (sorted by e). used is never
// changed in place: configurations share it.
type jitConfig struct {
	s    registerState
	pend []uint64
	used []jitUse
}

// jitResult is the search's finding for one key.
type jitResult struct {
	// decided is false when a bound stopped the search.
	decided, ok bool
	// failed is the index in the key's operations of the one whose completion no
	// configuration allowed, when ok is false; before, the states the register could
	// be in just before that completion.
	failed int
	before []registerState
}

type jitSearch struct {
	ops      []registerOp
	b        *searchBounds
	words    int
	slotOp   []int
	slotOf   []int
	freeSlot []int

	effects []jitEffect
	effect  map[jitEffect]int32
	count   []int32
	writeOf map[int64]int32   // the effect id of a write of v, once one is invoked
	casFrom map[int64][]int32 // the effect ids of cas from v

	configs []jitConfig
	before  []jitConfig // configs just before the completion that failed
	out     []jitConfig
	arena   [2][]uint64 // the pend words of configs and of out, swapped each completion
	gen     int
	memo    map[string]struct{}
	key     []byte
	steps   int
}

// registerJIT searches one key's operations, starting from init, within b.
func registerJIT(ops []registerOp, init registerState, b *searchBounds) jitResult {
	s := &jitSearch{ops: ops, b: b, effect: map[jitEffect]int32{}, writeOf: map[int64]int32{},
		casFrom: map[int64][]int32{}, memo: map[string]struct{}{}}
	calls, rets := s.events()
	s.configs = []jitConfig{{s: init, pend: s.alloc(0)}}
	for c, r := 0, 0; r < len(rets); {
		if b.stopped() {
			return jitResult{}
		}
		if c < len(calls) && ops[calls[c]].call < ops[rets[r]].ret {
			s.invoke(calls[c])
			c++
			continue
		}
		if !s.complete(rets[r]) {
			if b.stopped() {
				return jitResult{}
			}
			res := jitResult{decided: true, failed: rets[r]}
			for _, c := range s.before {
				if !slices.Contains(res.before, c.s) {
					res.before = append(res.before, c.s)
				}
			}
			slices.SortFunc(res.before, registerStateCompare)
			return res
		}
		r++
	}
	if b.stopped() {
		return jitResult{}
	}
	// What is left are invocations of unknown outcome: they need not take effect.
	return jitResult{decided: true, ok: true}
}

// definite reports whether an operation has a known outcome, and so a completion that
// forces it; blind reads constrain nothing and take no part.
func (s *jitSearch) definite(i int) bool {
	return s.ops[i].out.outcome != registerMaybe
}

// events returns the operations in the order of their invocations, and those with a
// known outcome in the order of their completions, and sizes the slots.
func (s *jitSearch) events() (calls, rets []int) {
	calls = make([]int, 0, len(s.ops))
	for i, op := range s.ops {
		if op.out.outcome == registerBlind {
			continue
		}
		calls = append(calls, i)
		if s.definite(i) {
			rets = append(rets, i)
		}
	}
	// Operations are listed as they completed: their completions are in order, their
	// invocations nearly so.
	slices.SortFunc(calls, func(a, b int) int { return int(s.ops[a].call - s.ops[b].call) })
	slices.SortFunc(rets, func(a, b int) int { return int(s.ops[a].ret - s.ops[b].ret) })
	inFlight, most := 0, 0
	for c, r := 0, 0; c < len(calls); {
		if r < len(rets) && s.ops[rets[r]].ret < s.ops[calls[c]].call {
			inFlight--
			r++
			continue
		}
		if s.definite(calls[c]) {
			inFlight++
			most = max(most, inFlight)
		}
		c++
	}
	s.words = max(1, (most+63)/64)
	s.slotOf = make([]int, len(s.ops))
	return calls, rets
}

// alloc returns zeroed pend words from the arena of generation g.
func (s *jitSearch) alloc(g int) []uint64 {
	a := s.arena[g]
	if len(a)+s.words > cap(a) {
		a = make([]uint64, 0, max(1024, 2*cap(a)))
	}
	n := len(a)
	a = append(a, make([]uint64, s.words)...)
	s.arena[g] = a
	return a[n : n+s.words : n+s.words]
}

// invoke adds operation i to every configuration, as not taken effect.
func (s *jitSearch) invoke(i int) {
	op := &s.ops[i]
	if !s.definite(i) {
		e := jitEffect{a: op.in.a}
		if op.in.f == registerCAS {
			e = jitEffect{cas: true, a: op.in.a, b: op.in.b}
		}
		id, ok := s.effect[e]
		if !ok {
			id = int32(len(s.effects))
			s.effect[e] = id
			s.effects = append(s.effects, e)
			s.count = append(s.count, 0)
			if e.cas {
				s.casFrom[e.a] = append(s.casFrom[e.a], id)
			} else {
				s.writeOf[e.a] = id
			}
		}
		s.count[id]++
		return
	}
	var slot int
	if n := len(s.freeSlot); n > 0 {
		slot = s.freeSlot[n-1]
		s.freeSlot = s.freeSlot[:n-1]
	} else {
		slot = len(s.slotOp)
		s.slotOp = append(s.slotOp, 0)
	}
	s.slotOp[slot], s.slotOf[i] = i, slot
	for _, c := range s.configs {
		c.pend[slot/64] |= 1 << (slot % 64)
	}
}

// complete forces operation i to have taken effect in every configuration; false
// when none can.
func (s *jitSearch) complete(i int) bool {
	slot := s.slotOf[i]
	g := 1 - s.gen
	s.arena[g] = s.arena[g][:0]
	s.out = s.out[:0]
	if len(s.memo) > 0 {
		clear(s.memo)
	}
	for _, c := range s.configs {
		if c.pend[slot/64]&(1<<(slot%64)) == 0 {
			s.keep(c, g)
			continue
		}
		s.closure(c, slot, g)
		if s.b.stopped() {
			return false
		}
	}
	s.freeSlot = append(s.freeSlot, slot)
	if len(s.memo) > 4096 {
		s.memo = map[string]struct{}{} // clearing a large map costs its size every time
	}
	s.gen = g
	if len(s.out) == 0 {
		s.before = s.configs
	}
	s.configs, s.out = s.merge(s.out), s.configs
	return len(s.configs) > 0
}

// keep adds c to out, its pend words copied into generation g.
func (s *jitSearch) keep(c jitConfig, g int) {
	p := s.alloc(g)
	copy(p, c.pend)
	s.out = append(s.out, jitConfig{s: c.s, pend: p, used: c.used})
}

// closure adds to out every configuration reached from c by operations in flight
// taking effect, one after another, the last being the one in slot target.
func (s *jitSearch) closure(c jitConfig, target, g int) {
	for w, word := range c.pend {
		for word != 0 {
			bit := word & -word
			word &^= bit
			slot := w*64 + bitIndex(bit)
			op := &s.ops[s.slotOp[slot]]
			s.step(c, op, func(st registerState, used []jitUse) {
				s.steps++
				if s.steps%1024 == 0 && s.b.stopped() {
					return
				}
				n := jitConfig{s: st, used: used, pend: s.alloc(g)}
				copy(n.pend, c.pend)
				n.pend[w] &^= bit
				if slot == target {
					s.out = append(s.out, n)
					return
				}
				k := s.encode(n)
				if _, seen := s.memo[string(k)]; seen {
					s.arena[g] = s.arena[g][:len(s.arena[g])-s.words]
					return
				}
				s.memo[string(k)] = struct{}{}
				s.closure(n, target, g)
			})
			if s.b.stopped() {
				return
			}
		}
	}
}

func bitIndex(bit uint64) int {
	n := 0
	for bit > 1 {
		bit >>= 1
		n++
	}
	return n
}

// step calls next with every state and set of unknown effects used that op taking
// effect from c can lead to, with the unknown effects it needs just before it.
func (s *jitSearch) step(c jitConfig, op *registerOp, next func(registerState, []jitUse)) {
	switch op.in.f {
	case registerRead:
		target := op.out.read
		s.reach(c, target, func(used []jitUse) { next(target, used) })
	case registerWrite:
		next(registerState{v: op.in.a, present: true}, c.used)
	case registerCAS:
		from := registerState{v: op.in.a, present: true}
		to := registerState{v: op.in.b, present: true}
		if op.out.outcome == registerSwapped {
			s.reach(c, from, func(used []jitUse) { next(to, used) })
			return
		}
		// Not swapped: the register did not hold from. One unknown effect that leaves
		// it is enough; any further one can come before the next operation.
		if c.s != from {
			next(c.s, c.used)
			return
		}
		for id, e := range s.effects {
			if !s.available(int32(id), c.used) {
				continue
			}
			switch {
			case !e.cas && e.a != from.v:
				next(registerState{v: e.a, present: true}, jitAdd(c.used, int32(id)))
			case e.cas && e.a == from.v && e.b != from.v:
				next(registerState{v: e.b, present: true}, jitAdd(c.used, int32(id)))
			}
		}
	}
}

// reach calls found with each least set of unknown effects used that brings c's
// state to target: none when it is there, else a write of target, or a chain of cas
// from the state or from a write, each a distinct step.
func (s *jitSearch) reach(c jitConfig, target registerState, found func([]jitUse)) {
	if c.s == target {
		found(c.used)
		return
	}
	if !target.present {
		return // nothing of unknown outcome makes a register absent
	}
	var sets [][]jitUse
	add := func(u []jitUse) {
		for _, o := range sets {
			if jitSubset(o, u) {
				return
			}
		}
		sets = slices.DeleteFunc(sets, func(o []jitUse) bool { return jitSubset(u, o) })
		sets = append(sets, u)
	}
	if id, ok := s.writeOf[target.v]; ok && s.available(id, c.used) {
		add(jitAdd(c.used, id))
	}
	if len(s.casFrom) > 0 {
		visited := map[int64]bool{}
		if c.s.present {
			s.chain(c.s.v, target.v, c.used, visited, add)
		}
		for from := range s.casFrom {
			if id, ok := s.writeOf[from]; ok && from != target.v && s.available(id, c.used) && !(c.s.present && c.s.v == from) {
				s.chain(from, target.v, jitAdd(c.used, id), visited, add)
			}
		}
	}
	for _, u := range sets {
		found(u)
	}
}

// chain finds the cas of unknown outcome that lead from v to target, each value once.
func (s *jitSearch) chain(v, target int64, used []jitUse, visited map[int64]bool, add func([]jitUse)) {
	if visited[v] || s.b.stopped() {
		return
	}
	visited[v] = true
	defer delete(visited, v)
	for _, id := range s.casFrom[v] {
		e := s.effects[id]
		if e.b == v || !s.available(id, used) {
			continue
		}
		u := jitAdd(used, id)
		if e.b == target {
			add(u)
			continue
		}
		s.chain(e.b, target, u, visited, add)
	}
}

// available reports whether an operation of effect id is invoked and not used.
func (s *jitSearch) available(id int32, used []jitUse) bool {
	n := s.count[id]
	for _, u := range used {
		if u.e == id {
			return u.n < n
		}
	}
	return n > 0
}

// jitAdd returns used with one more of effect id, leaving used as it is.
func jitAdd(used []jitUse, id int32) []jitUse {
	out := make([]jitUse, 0, len(used)+1)
	done := false
	for _, u := range used {
		switch {
		case u.e == id:
			u.n++
			done = true
		case u.e > id && !done:
			out = append(out, jitUse{id, 1})
			done = true
		}
		out = append(out, u)
	}
	if !done {
		out = append(out, jitUse{id, 1})
	}
	return out
}

// jitSubset reports whether a used no more of any effect than b.
func jitSubset(a, b []jitUse) bool {
	j := 0
	for _, u := range a {
		for j < len(b) && b[j].e < u.e {
			j++
		}
		if j == len(b) || b[j].e != u.e || b[j].n < u.n {
			return false
		}
	}
	return true
}

// encode writes c's identity (state, in flight, used) into s.key.
func (s *jitSearch) encode(c jitConfig) []byte {
	k := s.encodeHead(c)
	for _, u := range c.used {
		k = binary.LittleEndian.AppendUint32(k, uint32(u.e))
		k = binary.LittleEndian.AppendUint32(k, uint32(u.n))
	}
	s.key = k
	return k
}

// encodeHead writes c's state and operations in flight into s.key.
func (s *jitSearch) encodeHead(c jitConfig) []byte {
	k := s.key[:0]
	if c.s.present {
		k = append(k, 1)
	} else {
		k = append(k, 0)
	}
	k = binary.LittleEndian.AppendUint64(k, uint64(c.s.v))
	for _, w := range c.pend {
		k = binary.LittleEndian.AppendUint64(k, w)
	}
	s.key = k
	return k
}

// merge makes configs that agree on state and operations in flight one, keeping those
// with the least sets of unknown effects used.
func (s *jitSearch) merge(cs []jitConfig) []jitConfig {
	if len(cs) <= 1 {
		return cs
	}
	// Each group is a list through next, from the index groups holds.
	groups := make(map[string]int, len(cs))
	next := make([]int, 0, len(cs))
	out := cs[:0]
	for _, c := range cs {
		k := s.encodeHead(c)
		first, ok := groups[string(k)]
		if !ok {
			groups[string(k)] = len(out)
			out = append(out, c)
			next = append(next, -1)
			continue
		}
		dominated, last := false, first
		for j := first; j >= 0; j = next[j] {
			last = j
			if jitSubset(out[j].used, c.used) {
				dominated = true
				break
			}
			if jitSubset(c.used, out[j].used) {
				out[j].used = c.used // c does all out[j] did
				dominated = true
				break
			}
		}
		if !dominated {
			next[last] = len(out)
			out = append(out, c)
			next = append(next, -1)
		}
	}
	return out
}

// registerStateCompare orders states: absent first, then by value.
func registerStateCompare(a, b registerState) int {
	switch {
	case a.present != b.present && !a.present:
		return -1
	case a.present != b.present:
		return 1
	case a.v < b.v:
		return -1
	case a.v > b.v:
		return 1
	}
	return 0
}
