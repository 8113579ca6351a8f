package checker

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// The budget object is one account whose balance starts at the budget B. A decrement
// takes 1 while the balance is positive (applied) and is rejected at 0; a read returns
// the balance. In a history:
//
//	decrement  invoke (no value), then one completion:
//	           ok {"applied":true,"balance":N}   took 1 (N is ignored: not every store reports it)
//	           ok {"applied":false,"balance":0}  rejected: observed balance 0
//	           fail                              certainly no effect
//	           info, or no completion at all     unknown: took 1 at some point after its
//	                                             invocation, or never
//	read       invoke, then ok {"balance":N}; a failed, unknown or open read carries nothing
//
// Why the exact checker needs no search. Let c be the number of decrements that have
// taken effect (B - balance). c only grows, and a rejection needs c = B at its
// linearization point exactly as a read of 0 does, so rejections and reads are both
// observations "c = k". Number the events of the history 0, 1, ... and call the open
// stretch between events g and g+1 gap g; an operation invoked at event i and completed
// at event j can take effect in gaps i .. j-1, an unknown one in any gap from i on. Let
// F(g) be the number of decrements placed in gaps up to g. Inside one gap the placed
// decrements and the observations can be ordered freely, so an observation o invoked at
// i and completed at j can be linearized iff
//
//	F(i-1) <= k_o <= F(j-1),
//
// and the whole history is linearizable iff there is a placement of every applied
// decrement inside its interval, and of some unknown ones after their invocations, that
// meets every observation's two bounds and F(end) <= B (an applied decrement needs a
// positive balance). The lower bounds and the applied decrements' deadlines only push F
// up; the upper bounds only cap it. Sweeping the gaps in order and placing decrements
// lazily (an applied one at its deadline, and at an observation's completion just enough
// to reach k_o, taking applied decrements by earliest deadline before unknown ones) gives
// the pointwise smallest F that meets every lower bound, so the history is linearizable
// iff that smallest F breaks no upper bound. (If at the last gap g1 <= g where the sweep
// placed a decrement due after g it stood at the bound k, every decrement it placed in
// (g1, g] is an applied one invoked after g1 and due by g, which any placement must also
// put there, on top of its own F(g1) >= k.) The sweep is one pass with a heap of open
// applied decrements: O(n log n).
//
// The reported balance of an applied decrement is ignored by this checker and by
// the porcupine model the tests hold it to (budget_porcupine_test.go) alike, so that both decide the same object; stores that report it
// non-atomically would otherwise make it a false alarm.

// budgetParamKey is the history header parameter holding the initial balance.
const budgetParamKey = "budget"

// budgetMaxOps bounds the operations one aggregated anomaly lists.
const budgetMaxOps = 100

// budgetFromHeader returns the initial balance recorded in a budget history's header
// (params["budget"], a non-negative JSON integer). It errs when h is nil or when the
// parameter is missing or malformed.
func budgetFromHeader(h *histories.Header) (int64, error) {
	b, err := headerInt(h, "budget", budgetParamKey, "the budget")
	if err != nil {
		return 0, err
	}
	if b < 0 {
		return 0, fmt.Errorf("budget history: params.budget %d is negative", b)
	}
	return b, nil
}

// CheckBudget decides exactly, in O(n log n), whether ops (a budget history in real-time
// order, nemesis events included or not) is linearizable for one account that starts at
// budget, and explains every violation with the events involved. Unknown decrements are
// allowed to have taken effect at any point after their invocation, or never, without
// search. An invalid history is a Result; the error reports a history that cannot be
// read as a budget history (a completion without invocation, an unknown function, a
// value that does not parse) or a negative budget.
//
// Operations, in an indoubt history:
//   - decrement: the invocation carries no value; an ok completion's value is
//     {"applied":true,"balance":n} when it took one unit (balance, the store's report,
//     is not relied on) and {"applied":false} when it was rejected because nothing
//     was left.
//   - read: an ok completion's value is {"balance":n}.
//
// Fail and info completions carry no value that the checker reads.
//
// Anomaly kinds: "overdraft" (more decrements acknowledged as applied than the budget),
// "applied-after-exhausted" (a decrement acknowledged as applied after observations
// show the budget spent), "premature-rejection" (a rejection before the budget could
// have been spent: a lost decrement), "stale-read" (a read that misses decrements
// certainly taken before it began), "impossible-read" (a read showing more taken than
// could have been, or a balance outside 0..budget). Details holds the figures:
// budget, acknowledged_applied, rejected, failed, unknown, unknown_applied_min,
// reads, reads_unknown, final_balance (the last read, if any), balance_min and
// balance_max (the final balance the history allows), anomalies (how many were found;
// at most 100 are listed).
//
// It needs no search, so ctx is only looked at every few thousand events: a check
// whose ctx has ended returns an Unknown Result saying it was interrupted.
func CheckBudget(ctx context.Context, ops []histories.Op, budget int64) (Result, error) {
	c, err := newBudgetChecker(budget)
	if err != nil {
		return Result{}, err
	}
	for i, op := range ops {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return interrupted("budget", ctx.Err()), nil
		}
		if err := c.Add(op); err != nil {
			return Result{}, err
		}
	}
	if ctx.Err() != nil {
		return interrupted("budget", ctx.Err()), nil
	}
	return c.Result(), nil
}

// budgetChecker is the streaming form of CheckBudget: feed it events with Add in
// history order, then call Result once the history ends. It holds only the operations
// between the oldest still-open invocation and the newest event, so a history read with
// a histories.Reader need not fit in memory. It is not safe for concurrent use.
type budgetChecker struct {
	budget int64
	pairs  budgetPairer
	queue  []budgetEvent // events not yet swept, from head on
	head   int           // first unswept event in queue
	done   bool          // Result was called
	result Result        // cached by Result

	// Sweep state: taken is F, the fewest decrements that must have taken effect.
	taken      int64
	pending    budgetDeadlines // applied decrements invoked, not yet placed
	unknownNow int64           // unknown decrements invoked, not placed
	ackPlaced  int64           // applied decrements placed
	unkPlaced  int64           // unknown decrements placed (must have taken effect)
	lastObs    *budgetOp       // the observation that last raised taken

	// Figures.
	applied, rejected, failed, unknown, reads, readsLost int64
	final                                                *budgetOp // last completed ok read

	findings
	overOps   []*budgetOp // applied decrements placed over the budget
	overCount int64
	overWhy   []string
}

// budgetKind is what an operation turned out to be.
type budgetKind uint8

const (
	budgetApplied  budgetKind = 1 + iota // decrement ok, applied
	budgetRejected                       // decrement ok, rejected: observed balance 0
	budgetFailed                         // decrement fail: no effect
	budgetUnknown                        // decrement info or never completed
	budgetRead                           // read ok
	budgetNoRead                         // read failed, unknown or never completed
)

// budgetOp is one operation: its invocation and completion positions (in client
// events) and history indices.
type budgetOp struct {
	opRef
	read     bool
	kind     budgetKind // 0 while open
	balance  int64      // read value
	inv, ret int64      // positions; ret -1 while open
	heapAt   int        // index in pending, -1 when not there
	minTaken int64      // taken at the invocation of an observation
	stale    bool       // an observation that saw fewer decrements than had surely happened
}

type budgetEvent struct {
	op       *budgetOp
	complete bool
}

// newBudgetChecker returns a streaming checker for an account that starts at budget. It
// errs when budget is negative.
func newBudgetChecker(budget int64) (*budgetChecker, error) {
	if budget < 0 {
		return nil, fmt.Errorf("budget checker: negative budget %d", budget)
	}
	return &budgetChecker{budget: budget}, nil
}

// Add feeds the next event of the history. Nemesis events are skipped. It errs when the
// event cannot belong to a budget history (see CheckBudget), or after Result; the
// checker must not be used after an error.
func (c *budgetChecker) Add(op histories.Op) error {
	if c.done {
		return errors.New("budget checker: event added after Result")
	}
	o, complete, err := c.pairs.add(op)
	if err != nil || o == nil {
		return err
	}
	if !complete {
		c.queue = append(c.queue, budgetEvent{op: o})
		return nil
	}
	c.count(o)
	c.queue = append(c.queue, budgetEvent{op: o, complete: true})
	c.advance()
	return nil
}

// budgetPairer matches completions to invocations by process, one open operation per
// process, and numbers the client events.
type budgetPairer struct {
	p   histories.Pairer[*budgetOp]
	pos int64
}

// add takes one event. It returns the operation the event invoked or completed, nil
// for a nemesis event.
func (p *budgetPairer) add(op histories.Op) (o *budgetOp, complete bool, err error) {
	if !op.IsClient() {
		return nil, false, nil
	}
	pos := p.pos
	p.pos++
	if op.Type == histories.Invoke {
		if op.F != "decrement" && op.F != "read" {
			return nil, false, fmt.Errorf("history index %d: budget history has unknown function %q", op.Index, op.F)
		}
		if op.F == "decrement" && len(op.Value) > 0 {
			if err := budgetUnitOnly(op); err != nil {
				return nil, false, err
			}
		}
		o := &budgetOp{opRef: invoked(op), read: op.F == "read", inv: pos, ret: -1, heapAt: -1}
		return o, false, p.p.Invoke(op, o)
	}
	o, err = p.p.Complete(op)
	if err != nil {
		return nil, false, err
	}
	kind, balance, err := budgetClassify(o.read, op.Type, op.Value)
	if err != nil {
		return nil, false, fmt.Errorf("history index %d: %w", op.Index, err)
	}
	o.kind, o.balance, o.ret, o.retIndex = kind, balance, pos, op.Index
	return o, true, nil
}

// close ends the history: operations still open are unknown (a decrement may have
// taken effect) or carry nothing (a read). It returns them in invocation order.
func (p *budgetPairer) close() []*budgetOp {
	left := p.p.Open()
	for _, o := range left {
		if o.read {
			o.kind = budgetNoRead
		} else {
			o.kind = budgetUnknown
		}
	}
	return left
}

func (o *budgetOp) f() string {
	if o.read {
		return "read"
	}
	return "decrement"
}

// budgetClassify reads a completion: what the operation was, and a read's balance.
func budgetClassify(read bool, t histories.Type, value json.RawMessage) (budgetKind, int64, error) {
	switch t {
	case histories.Fail:
		if read {
			return budgetNoRead, 0, nil
		}
		return budgetFailed, 0, nil
	case histories.Info:
		if read {
			return budgetNoRead, 0, nil
		}
		return budgetUnknown, 0, nil
	case histories.OK:
	default:
		return 0, 0, fmt.Errorf("event type %s is not a completion", t)
	}
	out, err := budgetParseOutcome(value)
	if err != nil {
		if read {
			return 0, 0, fmt.Errorf("ok read value %q: %w", value, err)
		}
		return 0, 0, fmt.Errorf("ok decrement value %q: %w", value, err)
	}
	if read {
		if !out.hasBalance {
			return 0, 0, fmt.Errorf("ok read value %q has no balance", value)
		}
		return budgetRead, out.balance, nil
	}
	if !out.hasApplied {
		return 0, 0, fmt.Errorf("ok decrement value %q has no applied", value)
	}
	if out.applied {
		return budgetApplied, 0, nil
	}
	return budgetRejected, 0, nil
}

func (c *budgetChecker) count(o *budgetOp) {
	switch o.kind {
	case budgetApplied:
		c.applied++
	case budgetRejected:
		c.rejected++
	case budgetFailed:
		c.failed++
	case budgetUnknown:
		c.unknown++
	case budgetRead:
		c.reads++
	case budgetNoRead:
		c.readsLost++
	}
}

// advance sweeps the queued events as far as it may: an invocation is swept only once
// its operation has completed, because the sweep must know what it was; completions
// wait behind it so that positions stay in order.
func (c *budgetChecker) advance() {
	for c.head < len(c.queue) {
		ev := c.queue[c.head]
		if !ev.complete && ev.op.kind == 0 {
			break
		}
		c.queue[c.head] = budgetEvent{}
		c.head++
		c.sweep(ev)
	}
	if c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	} else if c.head > 1024 && c.head > len(c.queue)/2 {
		n := copy(c.queue, c.queue[c.head:])
		c.queue, c.head = c.queue[:n], 0
	}
}

func (c *budgetChecker) sweep(ev budgetEvent) {
	o := ev.op
	if !ev.complete {
		switch o.kind {
		case budgetApplied:
			heap.Push(&c.pending, o)
		case budgetUnknown:
			c.unknownNow++
		case budgetRead:
			if o.balance < 0 || o.balance > c.budget {
				c.anomaly("impossible-read", o.events(), fmt.Sprintf(
					"%s returned balance %d, outside 0..%d (budget %d)", o.name(), o.balance, c.budget, c.budget))
				o.kind = budgetNoRead
				return
			}
			o.minTaken = c.taken
			// Once taken passed the budget an overdraft is reported; comparing against
			// the budget keeps every later read from repeating it.
			if min(c.taken, c.budget) > c.budget-o.balance {
				o.stale = true
			}
		}
		return
	}
	switch o.kind {
	case budgetApplied:
		if o.heapAt >= 0 {
			// Not placed yet and due now: the earliest deadline in the heap, since
			// every earlier one was placed at its own.
			heap.Remove(&c.pending, o.heapAt)
			c.place(o)
		}
	case budgetRejected, budgetRead:
		c.observe(o)
	}
}

// place puts an applied decrement at its deadline.
func (c *budgetChecker) place(o *budgetOp) {
	c.taken++
	c.ackPlaced++
	if c.taken <= c.budget {
		return
	}
	c.overCount++
	if len(c.overOps) < budgetMaxOps {
		c.overOps = append(c.overOps, o)
		why := fmt.Sprintf("%s was acknowledged as applied, but by the time it completed at least %d decrements must have taken effect, over the budget of %d (%d acknowledged as applied",
			o.name(), c.taken, c.budget, c.ackPlaced)
		if c.lastObs != nil {
			why += fmt.Sprintf(", and %s had observed balance %d", c.lastObs.name(), c.budget-c.lastObs.target(c.budget))
		}
		c.overWhy = append(c.overWhy, why+")")
	}
}

// target is the number of decrements an observation saw taken.
func (o *budgetOp) target(budget int64) int64 {
	if o.kind == budgetRejected {
		return budget
	}
	return budget - o.balance
}

// observe meets an observation's lower bound at its completion, placing as few
// decrements as it needs: applied ones by earliest deadline, then unknown ones.
func (c *budgetChecker) observe(o *budgetOp) {
	if o.kind == budgetRead {
		c.final = o
	}
	k := o.target(c.budget)
	ack := c.ackPlaced + int64(c.pending.Len())
	unkLo, unkHi := c.unkPlaced, c.unkPlaced+c.unknownNow
	most := min(c.budget, c.taken+int64(c.pending.Len())+c.unknownNow)
	if o.stale {
		c.anomaly("stale-read", c.withCause(o), fmt.Sprintf(
			"%s returned balance %d but %s expected from %d acknowledged and %s decrements (budget %d): at least %d had taken effect before it was invoked",
			o.name(), o.balance, budgetBetween(c.budget-most, c.budget-min(o.minTaken, c.budget)), ack, budgetUnknownRange(unkLo, unkHi), c.budget, o.minTaken))
		return
	}
	need := k - c.taken
	if need <= 0 {
		return
	}
	if most < k {
		if o.kind == budgetRejected {
			c.anomaly("premature-rejection", o.events(), fmt.Sprintf(
				"%s was rejected (balance 0) when at most %d of the budget of %d could have been taken before it completed (%d acknowledged and %s decrements)",
				o.name(), most, c.budget, ack, budgetUnknownRange(unkLo, unkHi)))
		} else {
			c.anomaly("impossible-read", o.events(), fmt.Sprintf(
				"%s returned balance %d (%d of %d taken) when at most %d could have been taken before it completed (%d acknowledged and %s decrements)",
				o.name(), o.balance, k, c.budget, most, ack, budgetUnknownRange(unkLo, unkHi)))
		}
		return
	}
	for need > 0 && c.pending.Len() > 0 {
		heap.Pop(&c.pending)
		c.ackPlaced++
		c.taken++
		need--
	}
	c.unknownNow -= need
	c.unkPlaced += need
	c.taken += need
	c.lastObs = o
}

// withCause lists a stale observation with the observation that pinned the count it
// contradicts, if one did.
func (c *budgetChecker) withCause(o *budgetOp) []int64 {
	ev := o.events()
	if c.lastObs != nil && c.lastObs != o && c.lastObs.ret < o.inv {
		ev = append(c.lastObs.events(), ev...)
	}
	return ev
}

// name says which operation it is, as a person would look it up.
func (o *budgetOp) name() string { return o.nameAs(o.f()) }

// Result ends the history and returns the verdict. Operations still open count as
// unknown: a decrement may have taken effect, a read observed nothing. Result may be
// called more than once; Add may not follow it.
func (c *budgetChecker) Result() Result {
	if c.done {
		return c.result
	}
	c.done = true
	for _, o := range c.pairs.close() {
		c.count(o)
	}
	c.advance()
	c.result = c.build()
	return c.result
}

func (c *budgetChecker) build() Result {
	r := Result{Checker: "budget"}
	var over []Anomaly
	if c.overCount > 0 {
		var ops []int64
		for _, o := range c.overOps {
			ops = append(ops, o.events()...)
		}
		if c.applied > c.budget {
			over = append(over, Anomaly{Kind: "overdraft", Ops: ops, Explanation: fmt.Sprintf(
				"%s acknowledged as applied, budget %d", budgetPlural(c.applied, "decrement"), c.budget)})
			c.found++
		} else {
			for i, o := range c.overOps {
				over = append(over, Anomaly{Kind: "applied-after-exhausted", Ops: o.events(), Explanation: c.overWhy[i]})
			}
			c.found += int(c.overCount)
		}
	}
	r.Anomalies = append(over, c.anomalies...)
	if len(r.Anomalies) > maxAnomalies {
		r.Anomalies = r.Anomalies[:maxAnomalies]
	}

	// Unplaced unknown decrements can always take effect after everything else, so the
	// final count ranges from the forced minimum to all of them, within the budget.
	lo := min(c.taken, c.budget)
	hi := min(c.budget, c.applied+c.unknown)
	hi = max(hi, lo)
	d := map[string]any{
		"budget":               c.budget,
		"acknowledged_applied": c.applied,
		"rejected":             c.rejected,
		"failed":               c.failed,
		"unknown":              c.unknown,
		"unknown_applied_min":  c.unkPlaced,
		"reads":                c.reads,
		"reads_unknown":        c.readsLost,
		"balance_min":          c.budget - hi,
		"balance_max":          c.budget - lo,
		"anomalies":            c.found,
	}
	if c.final != nil {
		d["final_balance"] = c.final.balance
	}
	r.Details = encodeDetails(d)

	if len(r.Anomalies) == 0 {
		r.Verdict = Valid
		var b strings.Builder
		fmt.Fprintf(&b, "linearizable: %s acknowledged as applied, %d rejected, %d unknown (at least %d of them applied), budget %d; final balance %s",
			budgetPlural(c.applied, "decrement"), c.rejected, c.unknown, c.unkPlaced, c.budget, budgetBetween(c.budget-hi, c.budget-lo))
		if c.final != nil {
			fmt.Fprintf(&b, ", last read %d", c.final.balance)
		}
		r.Summary = b.String()
		return r
	}
	r.Verdict = Invalid
	r.Summary = firstOf(r.Anomalies[0], c.found)
	return r
}

func budgetPlural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// budgetBetween words a range of balances.
func budgetBetween(lo, hi int64) string {
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	return fmt.Sprintf("between %d and %d", lo, hi)
}

// budgetUnknownRange words how many unknown decrements may have taken effect.
func budgetUnknownRange(lo, hi int64) string {
	switch {
	case hi == 0:
		return "no unknown"
	case lo == hi:
		return fmt.Sprintf("%d unknown", lo)
	}
	return fmt.Sprintf("%d..%d unknown", lo, hi)
}

// budgetDeadlines is a min-heap of applied decrements by completion position.
type budgetDeadlines []*budgetOp

func (h budgetDeadlines) Len() int           { return len(h) }
func (h budgetDeadlines) Less(i, j int) bool { return h[i].ret < h[j].ret }
func (h budgetDeadlines) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapAt, h[j].heapAt = i, j
}
func (h *budgetDeadlines) Push(x any) {
	o := x.(*budgetOp)
	o.heapAt = len(*h)
	*h = append(*h, o)
}
func (h *budgetDeadlines) Pop() any {
	old := *h
	o := old[len(old)-1]
	old[len(old)-1] = nil
	o.heapAt = -1
	*h = old[:len(old)-1]
	return o
}
