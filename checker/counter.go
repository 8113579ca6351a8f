package checker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// The counter object starts at a value B (the header's params.before) and only grows by
// 1. An increment reads the counter and writes it plus one in one transaction, so every
// acknowledged increment names the value it wrote. In a history:
//
//	increment  invoke (no value), then one completion:
//	           ok {"read":41,"wrote":42}  took effect, writing 42 (read is optional, but
//	                                      when present it must be wrote - 1)
//	           fail                       certainly no effect
//	           info, or no completion     unknown: took effect at some point after its
//	                                      invocation, or never
//	read       invoke, then ok {"value":N}; a failed, unknown or open read carries nothing
//
// Why the exact checker needs no search. In a linearization the increments that took
// effect are numbered 1, 2, ... K in order, and the k-th writes B + k: an acknowledged
// increment that wrote w claims slot w - B. Two acknowledged increments claiming one slot
// cannot both have taken effect: one update was lost. The slots no acknowledged
// increment claims (holes) must be filled by unknown increments. Number the events of the
// history 0, 1, ... and call the stretch between events g and g+1 gap g; slot k takes
// effect in some gap t_k, and t_1 <= t_2 <= ... (inside one gap the order is free). Every
// constraint is then a release (t_k >= r) or a deadline (t_k <= d) on one slot:
//
//	an increment invoked at event i and completed at j, claiming k:  i <= t_k <= j-1
//	an unknown increment invoked at i, filling hole k:               i <= t_k
//	a read invoked at i, completed at j, that returned B + m:        t_m <= j-1 and
//	                                                                 i <= t_{m+1}
//
// (the read sits in a gap p with t_m <= p <= t_{m+1} inside its own interval). Because
// the t_k only grow, the constraints can be met iff no slot's deadline is earlier than
// the largest release of a slot at or below it; K is best as small as the history
// allows (the highest claimed slot or read value), since every further slot only adds
// constraints; and filling the holes in slot order with the unknown increments in
// invocation order makes every such largest release as small as any filling can. So the
// check sorts once and sweeps the constrained slots in order: O(n log n).

// counterParamKey is the history header parameter holding the value before the run.
const counterParamKey = "before"

// counterMaxOps bounds the operations one lost-update anomaly lists.
const counterMaxOps = 20

// counterFromHeader returns the counter's value before the run, recorded in a counter
// history's header (params["before"], a JSON integer). It errs when h is nil or when the
// parameter is missing or malformed.
func counterFromHeader(h *histories.Header) (int64, error) {
	return headerInt(h, "counter", counterParamKey, "the value before the run")
}

// counterKind is what an operation turned out to be.
type counterKind uint8

const (
	counterAcked   counterKind = 1 + iota // increment ok, with the value it wrote
	counterFailed                         // increment fail: no effect
	counterUnknown                        // increment info or never completed
	counterRead                           // read ok
	counterNoRead                         // read failed, unknown or never completed
)

// counterOp is one operation with its event positions (client events only) and
// history indices. The checker keeps one per operation, by value: at millions of
// operations a pointer and an allocation each were most of its memory and time.
type counterOp struct {
	opRef
	value      int64 // wrote (increment) or returned (read)
	readVal    int64 // what an increment read, when hasReadVal
	inv, ret   int64 // positions; ret -1 while open
	read       bool
	hasReadVal bool
	kind       counterKind
}

func (o *counterOp) f() string {
	if o.read {
		return "read"
	}
	return "increment"
}

// name says which operation it is, as a person would look it up.
func (o *counterOp) name() string { return o.nameAs(o.f()) }

// what says what the operation observed, for explanations.
func (o *counterOp) what() string {
	switch {
	case o.read:
		return fmt.Sprintf("%s (returned %d)", o.name(), o.value)
	case o.kind == counterUnknown:
		return o.name() + " (outcome unknown)"
	case o.hasReadVal:
		return fmt.Sprintf("%s (read %d, wrote %d)", o.name(), o.readVal, o.value)
	}
	return fmt.Sprintf("%s (wrote %d)", o.name(), o.value)
}

func (o *counterOp) complete(op histories.Op) error {
	switch op.Type {
	case histories.Fail, histories.Info:
		switch {
		case o.read:
			o.kind = counterNoRead
		case op.Type == histories.Fail:
			o.kind = counterFailed
		default:
			o.kind = counterUnknown
		}
		return nil
	case histories.OK:
	default:
		return fmt.Errorf("event type %s is not a completion", op.Type)
	}
	v, err := counterParseValue(op.Value)
	if err != nil {
		return fmt.Errorf("ok %s value %q: %w", o.f(), op.Value, err)
	}
	if o.read {
		if v.has&counterHasValue == 0 {
			return fmt.Errorf("ok read value %q has no value", op.Value)
		}
		o.kind, o.value = counterRead, v.value
		return nil
	}
	if v.has&counterHasWrote == 0 {
		return fmt.Errorf("ok increment value %q has no wrote: the counter checker needs the value each increment wrote", op.Value)
	}
	o.kind, o.value = counterAcked, v.wrote
	o.readVal, o.hasReadVal = v.read, v.has&counterHasRead != 0
	return nil
}

// CheckCounter decides exactly, in O(n log n), whether ops (a counter history in
// real-time order, nemesis events included or not) is linearizable for a counter that
// starts at before and that every increment raises by 1, and explains every violation
// with the events involved: lost updates (two acknowledged increments wrote the same
// value), stale or premature reads and writes, and increments that took effect without
// an operation to account for them. Unknown increments may have taken effect at any
// point after their invocation, or never, without search. An invalid history is a
// Result; the error reports a history that cannot be read as a counter history (a
// completion without invocation, an unknown function, an ok increment without the value
// it wrote).
//
// Operations, in an indoubt history:
//   - increment: the invocation carries no value; an ok completion's value is
//     {"wrote":n}, or {"read":n-1,"wrote":n} when the mechanism read the value it
//     raised (a read that is not n-1 is an "inconsistent-increment").
//   - read: an ok completion's value is {"value":n}.
//
// It needs no search, so ctx is only looked at every few thousand events: a check
// whose ctx has ended returns an Unknown Result saying it was interrupted.
func CheckCounter(ctx context.Context, ops []histories.Op, before int64) (Result, error) {
	c := newCounterChecker(before)
	defer c.close()
	for i, op := range ops {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return interrupted("counter", ctx.Err()), nil
		}
		if err := c.add(op); err != nil {
			return Result{}, err
		}
	}
	if ctx.Err() != nil {
		return interrupted("counter", ctx.Err()), nil
	}
	return c.result()
}

// counterChecker is the exact check of CheckCounter, fed one event at a time in history
// order (add), then ended (result). It keeps the operations in flight, the figures, the
// unknown increments, and the slots, whose memory stays flat however long the history
// (counterSlots); close releases what the slots wrote out. It is not safe for
// concurrent use.
type counterChecker struct {
	before int64
	pairs  histories.Pairer[counterOp]
	pos    int64 // client events so far
	slots  *counterSlots
	ended  bool

	acked, failed, unknown, reads, readsLost int64
	final                                    int64 // the last ok read's value, when hasFinal
	hasFinal                                 bool
	maxSlot                                  int64     // the highest slot an operation shows
	maxBy                                    counterOp // the first to show it, in completion order
	// unknowns are the unknown increments, which fill the slots no acknowledged
	// increment wrote: only what names them and their invocations.
	unknowns []counterUnknownOp
	single   findings // what is wrong with one operation, in completion order
}

// counterUnknownOp is an unknown increment, as the check keeps it.
type counterUnknownOp struct {
	opRef
	inv int64
}

func newCounterChecker(before int64) *counterChecker {
	return &counterChecker{before: before, slots: newCounterSlots(before)}
}

// add takes the next event of the history; nemesis events are skipped. It errs when the
// event cannot belong to a counter history (see CheckCounter); the checker must not be
// used after an error.
func (c *counterChecker) add(op histories.Op) error {
	if c.ended {
		return errors.New("counter checker: event added after the result")
	}
	if !op.IsClient() {
		return nil
	}
	p := c.pos
	c.pos++
	if op.Type == histories.Invoke {
		if op.F != "increment" && op.F != "read" {
			return fmt.Errorf("history index %d: counter history has unknown function %q", op.Index, op.F)
		}
		return c.pairs.Invoke(op, counterOp{opRef: invoked(op), read: op.F == "read", inv: p, ret: -1})
	}
	o, err := c.pairs.Complete(op)
	if err != nil {
		return err
	}
	if err := o.complete(op); err != nil {
		return fmt.Errorf("history index %d: %w", op.Index, err)
	}
	o.ret, o.retIndex = p, op.Index
	c.tally(&o)
	return nil
}

// tally counts an operation by kind, reports what is wrong with it alone, and puts its
// constraints on the slots: an acknowledged increment claims the slot it wrote (claims
// beyond the first are lost updates); a read that returned B + m bounds slot m (it took
// effect before the read completed) and slot m+1 (after the read began).
func (c *counterChecker) tally(o *counterOp) {
	switch o.kind {
	case counterAcked:
		c.acked++
		if o.hasReadVal && (o.value == math.MinInt64 || o.readVal != o.value-1) {
			c.single.anomaly("inconsistent-increment", o.events(), fmt.Sprintf(
				"%s read %d but wrote %d: an increment writes what it read plus 1", o.name(), o.readVal, o.value))
		}
		k, ok := counterSlotOf(o.value, c.before)
		if !ok && o.value > c.before {
			c.single.anomaly("impossible-write", o.events(), fmt.Sprintf(
				"%s wrote %d, more than 2^63 increments above the start %d: no history counts that far", o.name(), o.value, c.before))
			return
		}
		if k < 1 {
			c.single.anomaly("impossible-write", o.events(), fmt.Sprintf(
				"%s wrote %d, but the counter started at %d and an increment writes more than that", o.name(), o.value, c.before))
			return
		}
		c.slots.at(k).claim(o)
		if k > c.maxSlot {
			c.maxSlot, c.maxBy = k, *o
		}
	case counterFailed:
		c.failed++
	case counterUnknown:
		c.unknown++
		c.unknowns = append(c.unknowns, counterUnknownOp{opRef: o.opRef, inv: o.inv})
	case counterRead:
		c.reads++
		c.final, c.hasFinal = o.value, true
		m, ok := counterSlotOf(o.value, c.before)
		if !ok && o.value > c.before {
			c.single.anomaly("impossible-read", o.events(), fmt.Sprintf(
				"%s returned %d, more than 2^63 increments above the start %d: no history counts that far", o.name(), o.value, c.before))
			return
		}
		if !ok {
			c.single.anomaly("impossible-read", o.events(), fmt.Sprintf(
				"%s returned %d, below the value %d the counter started at", o.name(), o.value, c.before))
			return
		}
		if m >= 1 {
			c.slots.at(m).readAt(o)
		}
		if m < math.MaxInt64 {
			c.slots.at(m + 1).readBelow(o)
		}
		if m > c.maxSlot {
			c.maxSlot, c.maxBy = m, *o
		}
	case counterNoRead:
		c.readsLost++
	}
}

// result ends the history and returns the verdict: the operations still open are
// unknown increments and reads that observed nothing. It errs when the slots written
// out cannot be read back.
func (c *counterChecker) result() (Result, error) {
	c.ended = true
	for _, o := range c.pairs.Open() {
		o.kind = counterUnknown
		if o.read {
			o.kind = counterNoRead
		}
		c.tally(&o)
	}
	slices.SortFunc(c.unknowns, func(a, b counterUnknownOp) int { return cmp.Compare(a.inv, b.inv) })
	s := counterSweep{c: c, rel: -1}
	err := c.slots.each(c.maxSlot, func() bool { return s.used < len(c.unknowns) }, s.slot)
	if err != nil {
		return Result{}, err
	}
	return s.build(), nil
}

// close releases the slots written out.
func (c *counterChecker) close() { c.slots.close() }

// counterSweep walks the slots 1..K in order (K the highest slot any operation shows:
// fewer increments cannot explain the history, more only add constraints). It fills the
// slots no acknowledged increment claimed (holes) with the unknown increments in
// invocation order, which makes every slot's largest release as small as any filling
// can; holes left over are increments no operation accounts for. And it reports each
// slot whose deadline comes before the latest release of a slot at or below it, once per
// releasing operation.
type counterSweep struct {
	c                    *counterChecker
	claimed, lostUpdates int64
	used                 int // unknown increments that filled a hole
	// The latest release so far: its slot, the operation, whether that is an unknown
	// increment filling a hole, and whether a violation was reported for it.
	rel       int64
	relK      int64
	relOp     counterOp
	relFilled bool
	reported  bool
	lost      findings // lost updates, in slot order
	order     findings // ordering violations, in slot order
}

// slot takes slot k's record (nil for a slot no operation touched).
func (s *counterSweep) slot(k int64, r *counterRec) {
	release, deadline := int64(-1), int64(-1)
	var relOp, dlOp *counterOp
	filled := false
	switch {
	case r != nil && r.claims > 0:
		s.claimed++
		s.lostUpdates += r.claims - 1
		if r.claims > 1 {
			s.lostUpdate(k, r)
		}
		relOp, dlOp = r.claimRel(), r.claimDl()
		release, deadline = relOp.inv, dlOp.ret-1
	case s.used < len(s.c.unknowns):
		u := &s.c.unknowns[s.used]
		s.used++
		relOp = &counterOp{opRef: u.opRef, inv: u.inv, kind: counterUnknown}
		release, filled = u.inv, true
	}
	if r != nil && r.reads != nil {
		if rd := &r.reads.rel; r.reads.hasRel && rd.inv > release {
			relOp, release, filled = rd, rd.inv, false
		}
		if rd := &r.reads.dl; r.reads.hasDl && (deadline < 0 || rd.ret-1 < deadline) {
			dlOp, deadline = rd, rd.ret-1
		}
	}
	if release > s.rel {
		s.rel, s.relK, s.relOp, s.relFilled, s.reported = release, k, *relOp, filled, false
	}
	if deadline < 0 || s.rel <= deadline || s.reported {
		return
	}
	s.reported = true
	s.explainOrder(dlOp, k)
}

// lostUpdate reports the acknowledged increments that wrote slot k's value.
func (s *counterSweep) lostUpdate(k int64, r *counterRec) {
	var ev []int64
	var names []string
	r.listed(func(o *counterOp) {
		ev = append(ev, o.events()...)
		names = append(names, o.what())
	})
	if r.claims > counterMaxOps {
		names = append(names, fmt.Sprintf("%d more", r.claims-counterMaxOps))
	}
	w := s.c.before + k
	s.lost.anomaly("lost-update", ev, fmt.Sprintf(
		"%d acknowledged increments each wrote %d: %s; only one of them can have taken effect, so %d acknowledged updates were lost",
		r.claims, w, strings.Join(names, ", "), r.claims-1))
}

// explainOrder explains why slot atK's deadline, set by dl, comes before the latest
// release, of slot s.relK <= atK.
func (s *counterSweep) explainOrder(dl *counterOp, atK int64) {
	rel := &s.relOp
	ev := append(rel.events(), dl.events()...)
	fromK := s.relK
	vFrom, vAt := s.c.before+fromK, s.c.before+atK
	switch {
	case s.relFilled:
		s.order.anomaly("unexplained-increments", ev, fmt.Sprintf(
			"%s completed when the counter had reached at least %d, but no acknowledged increment wrote %d, and the unknown increments that could have (the earliest, %s) were invoked only after it completed",
			dl.what(), vAt, vFrom, rel.name()))
	case rel.read && dl.read:
		s.order.anomaly("stale-read", ev, fmt.Sprintf(
			"%s was invoked after %s had completed, yet returned less: the counter only grows", rel.what(), dl.what()))
	case rel.read:
		s.order.anomaly("stale-read", ev, fmt.Sprintf(
			"%s was invoked after %s had completed, so it must count that increment, yet returned less than %d", rel.what(), dl.what(), vAt))
	case dl.read:
		s.order.anomaly("future-read", ev, fmt.Sprintf(
			"%s counted %d increments, including the one that wrote %d, but %s was invoked only after the read completed",
			dl.what(), atK, vFrom, rel.what()))
	default:
		s.order.anomaly("stale-write", ev, fmt.Sprintf(
			"%s wrote %d, but %s had completed before it was invoked: it read a value already overwritten",
			rel.name(), vFrom, dl.what()))
	}
}

// build puts the findings together: those of one operation, the lost updates, the
// increments no operation accounts for, the ordering violations.
func (s *counterSweep) build() Result {
	c := s.c
	k := c.maxSlot
	var f findings
	for _, a := range c.single.anomalies {
		f.add(a)
	}
	for _, a := range s.lost.anomalies {
		f.add(a)
	}
	var unexplained int64
	if holes := k - s.claimed; holes > int64(len(c.unknowns)) {
		unexplained = holes - int64(len(c.unknowns))
		f.anomaly("unexplained-increments", c.maxBy.events(), fmt.Sprintf(
			"%s shows the counter at %d, %d above the start %d, but only %s wrote distinct values and %d had an unknown outcome: %s took effect that no operation accounts for",
			c.maxBy.what(), c.before+k, k, c.before, counterPlural(s.claimed, "acknowledged increment"), len(c.unknowns), counterPlural(unexplained, "increment")))
	}
	for _, a := range s.order.anomalies {
		f.add(a)
	}
	found := f.found - len(c.single.anomalies) - len(s.lost.anomalies) - len(s.order.anomalies) +
		c.single.found + s.lost.found + s.order.found
	unknownUsed := int64(s.used)

	r := Result{Checker: "counter", Anomalies: f.anomalies}
	d := map[string]any{
		"before":              c.before,
		"acknowledged":        c.acked,
		"failed":              c.failed,
		"unknown":             c.unknown,
		"unknown_applied_min": unknownUsed,
		"lost_updates":        s.lostUpdates,
		"unexplained":         unexplained,
		"increments_min":      k,
		"reads":               c.reads,
		"reads_unknown":       c.readsLost,
		"anomalies":           found,
	}
	if c.hasFinal {
		d["final_read"] = c.final
	}
	r.Details = encodeDetails(d)
	if found == 0 {
		r.Verdict = Valid
		r.Anomalies = []Anomaly{}
		var b strings.Builder
		fmt.Fprintf(&b, "linearizable: %s acknowledged, each writing a value of its own, %d failed, %d unknown (at least %d of them applied)",
			counterPlural(c.acked, "increment"), c.failed, c.unknown, unknownUsed)
		if c.hasFinal {
			fmt.Fprintf(&b, "; the counter went from %d to %d", c.before, c.final)
		}
		r.Summary = b.String()
		return r
	}
	r.Verdict = Invalid
	if s.lostUpdates > 0 {
		r.Summary = fmt.Sprintf("%s lost: of %s, some wrote a value another had already written (%s in all)",
			counterPlural(s.lostUpdates, "update"), counterPlural(c.acked, "acknowledged increment"), counterPlural(int64(found), "anomal"))
		return r
	}
	r.Summary = firstOf(r.Anomalies[0], found)
	return r
}

func counterPlural(n int64, noun string) string {
	one, many := noun, noun+"s"
	if noun == "anomal" {
		one, many = "anomaly", "anomalies"
	}
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// counterSlotOf is the slot a value of the counter names, v - before, computed without
// wrapping: false when v is below before, or so far above it that the difference
// overflows (no history holds that many increments). A counter that wrapped past the
// largest integer to the smallest wrote a value below its start.
func counterSlotOf(v, before int64) (int64, bool) {
	if v < before {
		return 0, false
	}
	k := v - before
	return k, k >= 0
}
