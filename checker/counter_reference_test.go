package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// The counter checker as it was before it read histories as streams: every operation
// kept, sorted and swept at the end. It holds the streaming checker to its results,
// verdict, figures, anomalies and explanations alike (TestCounterStreamEqualsReference).

// counterReference checks ops with the whole-history checker.
func counterReference(ops []histories.Op, before int64) (Result, error) {
	all, _, err := counterOps(ops)
	if err != nil {
		return Result{}, err
	}
	c := counterCheck{before: before}
	c.run(all)
	return c.build(), nil
}

// counterOps pairs a counter history's events into operations, in completion order
// followed by the operations left open (unknown increments, reads without a value). It
// also returns the number of client events.
func counterOps(ops []histories.Op) (*counterOpList, int64, error) {
	var p counterPairer
	for _, op := range ops {
		if err := p.add(op); err != nil {
			return nil, 0, err
		}
	}
	all, pos := p.close()
	return all, pos, nil
}

// counterPairer is counterOps one event at a time, for a history read as a stream: it
// keeps the operations, not the events.
type counterPairer struct {
	p    histories.Pairer[counterOp]
	done counterOpList
	pos  int64
}

func (c *counterPairer) add(op histories.Op) error {
	if !op.IsClient() {
		return nil
	}
	p := c.pos
	c.pos++
	if op.Type == histories.Invoke {
		if op.F != "increment" && op.F != "read" {
			return fmt.Errorf("history index %d: counter history has unknown function %q", op.Index, op.F)
		}
		return c.p.Invoke(op, counterOp{opRef: invoked(op), read: op.F == "read", inv: p, ret: -1})
	}
	o, err := c.p.Complete(op)
	if err != nil {
		return err
	}
	if err := o.complete(op); err != nil {
		return fmt.Errorf("history index %d: %w", op.Index, err)
	}
	o.ret, o.retIndex = p, op.Index
	c.done.add(o)
	return nil
}

// close ends the history and returns the operations and the number of client events.
func (c *counterPairer) close() (*counterOpList, int64) {
	for _, o := range c.p.Open() {
		o.kind = counterUnknown
		if o.read {
			o.kind = counterNoRead
		}
		c.done.add(o)
	}
	return &c.done, c.pos
}

// counterOpList is a list of operations kept in blocks: appending never moves what is
// already there (at millions of operations, growing one slice spent a tenth of the
// check copying), and the spare room is at most one block.
type counterOpList struct {
	blocks [][]counterOp
	n      int
}

const counterBlock = 1 << 12

func (l *counterOpList) add(o counterOp) {
	if l.n%counterBlock == 0 {
		l.blocks = append(l.blocks, make([]counterOp, 0, counterBlock))
	}
	b := &l.blocks[len(l.blocks)-1]
	*b = append(*b, o)
	l.n++
}

// at returns operation i, 0 <= i < len.
func (l *counterOpList) at(i int) *counterOp { return &l.blocks[i/counterBlock][i%counterBlock] }

func (l *counterOpList) len() int { return l.n }

// counterCheck is one run of the exact checker.
type counterCheck struct {
	before int64
	findings

	acked, failed, unknown, reads, readsLost int64
	lostUpdates                              int64 // acknowledged increments beyond the first per written value
	unexplained                              int64 // holes no unknown increment could fill
	unknownUsed                              int64 // unknown increments that must have taken effect
	final                                    *counterOp
	k                                        int64 // slots: increments that must have taken effect
	all                                      *counterOpList
	slots                                    refSlots
}

// refSlot gathers the constraints on one slot. Operations are named by their
// position in the check's operations, which a slot outlives no longer than they do.
type refSlot struct {
	release    int64 // -1 for none
	deadline   int64 // -1 for none
	relFrom    int32
	dlFrom     int32
	claims     int32 // acknowledged increments that wrote this slot's value
	filledHole bool  // the release is an unknown increment's, filling a hole
}

// refSlots holds the slots by number. Every slot a valid history constrains is at
// most the number of its operations (each slot up to K is an increment that took
// effect), so those sit in a slice; the map keeps the few that only an invalid
// history's outlandish values reach, so that memory follows the operations and never
// the values written.
type refSlots struct {
	dense  []refSlot // slot k at dense[k]; dense[0] is unused
	sparse map[int64]*refSlot
}

func newRefSlots(n int64) refSlots {
	s := refSlots{dense: make([]refSlot, n+1)}
	for i := range s.dense {
		s.dense[i] = refSlot{release: -1, deadline: -1}
	}
	return s
}

// at returns the constraints of slot k (k >= 1), creating them unconstrained.
func (s *refSlots) at(k int64) *refSlot {
	if k < int64(len(s.dense)) {
		return &s.dense[k]
	}
	if s.sparse == nil {
		s.sparse = map[int64]*refSlot{}
	}
	sl, ok := s.sparse[k]
	if !ok {
		sl = &refSlot{release: -1, deadline: -1}
		s.sparse[k] = sl
	}
	return sl
}

// each calls fn on every slot in order, the unconstrained ones included.
func (s *refSlots) each(fn func(k int64, sl *refSlot)) {
	for k := 1; k < len(s.dense); k++ {
		fn(int64(k), &s.dense[k])
	}
	keys := make([]int64, 0, len(s.sparse))
	for k := range s.sparse {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fn(k, s.sparse[k])
	}
}

// run is the exact check: slots are the values 1..k above the start an increment may
// write; acknowledged increments and unknown ones fill them, reads bound when, and
// the slots are then walked in order for a write or read that came too early.
func (c *counterCheck) run(all *counterOpList) {
	c.all = all
	c.slots = newRefSlots(min(c.highest(), int64(all.len())))
	t := c.tally()
	c.reportLostUpdates()
	c.fillHoles(t)
	c.constrainByReads(t.readsOK)
	c.checkOrder()
}

// highest is the highest slot an acknowledged increment or a read names.
func (c *counterCheck) highest() int64 {
	var m int64
	for i := range c.all.len() {
		if o := c.all.at(i); o.kind == counterAcked || o.kind == counterRead {
			if k, ok := counterSlotOf(o.value, c.before); ok {
				m = max(m, k)
			}
		}
	}
	return m
}

// counterTally is what one pass over the operations finds: how many slots
// acknowledged increments claim, the unknown increments and usable reads (as positions
// in the operations), and the highest slot any operation shows (with the operation
// that shows it).
type counterTally struct {
	claimed           int64
	unknowns, readsOK []int32
	maxSlot           int64
	maxBy             *counterOp
}

// tally counts the operations by kind, reports those that are wrong on their own, and
// constrains the slots acknowledged increments wrote. Slots claimed more than once are
// lost updates (reported by reportLostUpdates); the rest of the check keeps one
// lenient stand-in per slot (the earliest invocation, the latest completion) so that
// the loss is reported once, not again as an ordering violation.
func (c *counterCheck) tally() counterTally {
	var t counterTally
	for i := range c.all.len() {
		o := c.all.at(i)
		switch o.kind {
		case counterAcked:
			c.acked++
			if o.hasReadVal && (o.value == math.MinInt64 || o.readVal != o.value-1) {
				c.anomaly("inconsistent-increment", o.events(), fmt.Sprintf(
					"%s read %d but wrote %d: an increment writes what it read plus 1", o.name(), o.readVal, o.value))
			}
			k, ok := counterSlotOf(o.value, c.before)
			if !ok && o.value > c.before {
				c.anomaly("impossible-write", o.events(), fmt.Sprintf(
					"%s wrote %d, more than 2^63 increments above the start %d: no history counts that far", o.name(), o.value, c.before))
				continue
			}
			if k < 1 {
				c.anomaly("impossible-write", o.events(), fmt.Sprintf(
					"%s wrote %d, but the counter started at %d and an increment writes more than that", o.name(), o.value, c.before))
				continue
			}
			s := c.slots.at(k)
			switch {
			case s.claims == 0:
				t.claimed++
				s.release, s.relFrom = o.inv, int32(i)
				s.deadline, s.dlFrom = o.ret-1, int32(i)
			default:
				c.lostUpdates++
				if o.inv < s.release {
					s.release, s.relFrom = o.inv, int32(i)
				}
				if o.ret-1 > s.deadline {
					s.deadline, s.dlFrom = o.ret-1, int32(i)
				}
			}
			s.claims++
			if k > t.maxSlot {
				t.maxSlot, t.maxBy = k, o
			}
		case counterFailed:
			c.failed++
		case counterUnknown:
			c.unknown++
			t.unknowns = append(t.unknowns, int32(i))
		case counterRead:
			c.reads++
			if c.final == nil || o.ret > c.final.ret {
				c.final = o
			}
			m, ok := counterSlotOf(o.value, c.before)
			if !ok && o.value > c.before {
				c.anomaly("impossible-read", o.events(), fmt.Sprintf(
					"%s returned %d, more than 2^63 increments above the start %d: no history counts that far", o.name(), o.value, c.before))
				continue
			}
			if !ok {
				c.anomaly("impossible-read", o.events(), fmt.Sprintf(
					"%s returned %d, below the value %d the counter started at", o.name(), o.value, c.before))
				continue
			}
			t.readsOK = append(t.readsOK, int32(i))
			if m > t.maxSlot {
				t.maxSlot, t.maxBy = m, o
			}
		case counterNoRead:
			c.readsLost++
		}
	}
	return t
}

// reportLostUpdates reports, in slot order, the acknowledged increments that wrote one
// value, in the order of the operations.
func (c *counterCheck) reportLostUpdates() {
	if c.lostUpdates == 0 {
		return
	}
	groups := map[int64][]*counterOp{}
	for i := range c.all.len() {
		o := c.all.at(i)
		if k, ok := counterSlotOf(o.value, c.before); ok && o.kind == counterAcked && k >= 1 && c.slots.at(k).claims > 1 {
			groups[k] = append(groups[k], o)
		}
	}
	keys := make([]int64, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		c.lostUpdate(k, groups[k])
	}
}

// fillHoles fills the slots no acknowledged increment claimed, in slot order, with
// the unknown increments in invocation order; holes left over are increments no
// operation accounts for.
func (c *counterCheck) fillHoles(t counterTally) {
	c.k = t.maxSlot
	holes := c.k - t.claimed
	unknowns := t.unknowns
	slices.SortFunc(unknowns, func(a, b int32) int { return cmp.Compare(c.all.at(int(a)).inv, c.all.at(int(b)).inv) })
	if holes > int64(len(unknowns)) {
		c.unexplained = holes - int64(len(unknowns))
		c.anomaly("unexplained-increments", t.maxBy.events(), fmt.Sprintf(
			"%s shows the counter at %d, %d above the start %d, but only %s wrote distinct values and %d had an unknown outcome: %s took effect that no operation accounts for",
			t.maxBy.what(), c.before+c.k, c.k, c.before, counterPlural(t.claimed, "acknowledged increment"), len(unknowns), counterPlural(c.unexplained, "increment")))
	}
	fill := min(holes, int64(len(unknowns)))
	c.unknownUsed = fill
	next := int64(1)
	for i := int64(0); i < fill; i++ {
		for c.slots.at(next).claims > 0 {
			next++
		}
		u := unknowns[i]
		s := c.slots.at(next)
		s.release, s.relFrom, s.filledHole = c.all.at(int(u)).inv, u, true
		next++
	}
}

// constrainByReads puts a deadline on the slot each read counted up to, and a release
// on the one above it.
func (c *counterCheck) constrainByReads(readsOK []int32) {
	for _, i := range readsOK {
		r := c.all.at(int(i))
		m, _ := counterSlotOf(r.value, c.before) // a usable read's is valid
		if m >= 1 {
			s := c.slots.at(m)
			if s.deadline < 0 || r.ret-1 < s.deadline {
				s.deadline, s.dlFrom = r.ret-1, i
			}
		}
		if m < c.k {
			s := c.slots.at(m + 1)
			if r.inv > s.release {
				s.release, s.relFrom, s.filledHole = r.inv, i, false
			}
		}
	}
}

// checkOrder walks the slots in order and reports each slot whose deadline comes
// before the latest release of a slot at or below it, once per releasing operation.
func (c *counterCheck) checkOrder() {
	var rel int64 = -1
	var relK int64
	var relSlot *refSlot
	var reported map[int32]bool
	c.slots.each(func(k int64, s *refSlot) {
		if s.release > rel {
			rel, relK, relSlot = s.release, k, s
		}
		if s.deadline < 0 || rel <= s.deadline || reported[relSlot.relFrom] {
			return
		}
		if reported == nil {
			reported = map[int32]bool{}
		}
		reported[relSlot.relFrom] = true
		c.order(relK, relSlot, k, s)
	})
}

// lostUpdate reports the acknowledged increments that wrote one value.
func (c *counterCheck) lostUpdate(k int64, group []*counterOp) {
	var ev []int64
	var names []string
	for i, o := range group {
		if i < counterMaxOps {
			ev = append(ev, o.events()...)
			names = append(names, o.what())
		}
	}
	if len(group) > counterMaxOps {
		names = append(names, fmt.Sprintf("%d more", len(group)-counterMaxOps))
	}
	w := c.before + k
	c.anomaly("lost-update", ev, fmt.Sprintf(
		"%d acknowledged increments each wrote %d: %s; only one of them can have taken effect, so %d acknowledged updates were lost",
		len(group), w, strings.Join(names, ", "), len(group)-1))
}

// order explains why slot at's deadline comes before the release that reached it from
// slot from (fromK <= atK).
func (c *counterCheck) order(fromK int64, from *refSlot, atK int64, at *refSlot) {
	rel, dl := c.all.at(int(from.relFrom)), c.all.at(int(at.dlFrom))
	ev := append(rel.events(), dl.events()...)
	vFrom, vAt := c.before+fromK, c.before+atK
	switch {
	case from.filledHole:
		c.anomaly("unexplained-increments", ev, fmt.Sprintf(
			"%s completed when the counter had reached at least %d, but no acknowledged increment wrote %d, and the unknown increments that could have (the earliest, %s) were invoked only after it completed",
			dl.what(), vAt, vFrom, rel.name()))
	case rel.read && dl.read:
		c.anomaly("stale-read", ev, fmt.Sprintf(
			"%s was invoked after %s had completed, yet returned less: the counter only grows", rel.what(), dl.what()))
	case rel.read:
		c.anomaly("stale-read", ev, fmt.Sprintf(
			"%s was invoked after %s had completed, so it must count that increment, yet returned less than %d", rel.what(), dl.what(), vAt))
	case dl.read:
		c.anomaly("future-read", ev, fmt.Sprintf(
			"%s counted %d increments, including the one that wrote %d, but %s was invoked only after the read completed",
			dl.what(), atK, vFrom, rel.what()))
	default:
		c.anomaly("stale-write", ev, fmt.Sprintf(
			"%s wrote %d, but %s had completed before it was invoked: it read a value already overwritten",
			rel.name(), vFrom, dl.what()))
	}
}

func (c *counterCheck) build() Result {
	r := Result{Checker: "counter", Anomalies: c.anomalies}
	d := map[string]any{
		"before":              c.before,
		"acknowledged":        c.acked,
		"failed":              c.failed,
		"unknown":             c.unknown,
		"unknown_applied_min": c.unknownUsed,
		"lost_updates":        c.lostUpdates,
		"unexplained":         c.unexplained,
		"increments_min":      c.k,
		"reads":               c.reads,
		"reads_unknown":       c.readsLost,
		"anomalies":           c.found,
	}
	if c.final != nil {
		d["final_read"] = c.final.value
	}
	r.Details = encodeDetails(d)
	if c.found == 0 {
		r.Verdict = Valid
		r.Anomalies = []Anomaly{}
		var b strings.Builder
		fmt.Fprintf(&b, "linearizable: %s acknowledged, each writing a value of its own, %d failed, %d unknown (at least %d of them applied)",
			counterPlural(c.acked, "increment"), c.failed, c.unknown, c.unknownUsed)
		if c.final != nil {
			fmt.Fprintf(&b, "; the counter went from %d to %d", c.before, c.final.value)
		}
		r.Summary = b.String()
		return r
	}
	r.Verdict = Invalid
	if c.lostUpdates > 0 {
		r.Summary = fmt.Sprintf("%s lost: of %s, some wrote a value another had already written (%s in all)",
			counterPlural(c.lostUpdates, "update"), counterPlural(c.acked, "acknowledged increment"), counterPlural(int64(c.found), "anomal"))
		return r
	}
	r.Summary = firstOf(r.Anomalies[0], c.found)
	return r
}
