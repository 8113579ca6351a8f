package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// Budgets with amounts: a decrement takes n units (n >= 1), applied while the balance
// is at least n and rejected when less is left. A history whose header sets
// params.amounts to true (BudgetAmountsParam) holds them:
//
//	decrement  invoke {"amount":n} (no value: 1), then one completion:
//	           ok {"applied":true,...}   took n
//	           ok {"applied":false,...}  rejected: fewer than n units were left
//	           fail                      certainly no effect
//	           info, or no completion    unknown: took n at some point after its
//	                                     invocation (if n were left), or never
//	read       invoke, then ok {"balance":N}
//
// Why a search. With amounts, a read of balance N needs some of the unknown decrements
// to sum to exactly B - N - (the applied ones): subset sum, so no sweep like the unit
// budget's can decide it in polynomial time. CheckBudgetAmounts decides it exactly by
// linearizing just in time (as Lowe's and porcupine's searches do): it keeps every
// configuration the history allows so far (the balance, which of the open operations
// already took effect, how many unknown decrements of each amount were placed), and at
// each completion extends them by every order of the open operations, keeping those in
// which the completed one took effect. Unknown decrements of one amount are
// interchangeable once invoked, so only their count is kept. When the configurations
// would exceed budgetAmountsMaxConfigs the verdict is Unknown.

// BudgetAmountsParam is the header parameter that declares a budget (or budgets)
// history with amounts: params {"budget":10,"amounts":true}. Without it a decrement of
// more than one unit is refused, because the unit checker's sweep would misjudge it.
const BudgetAmountsParam = "amounts"

// budgetAmountsMaxConfigs bounds the configurations the search keeps at one time.
const budgetAmountsMaxConfigs = 1 << 18

// budgetAmountsMaxOpen bounds the operations open at one time whose outcome is known.
const budgetAmountsMaxOpen = 64

// budgetAmountOf reads a decrement invocation's amount: 1 when the value is absent or
// null, else the integer in {"amount":n}, at least 1.
func budgetAmountOf(v json.RawMessage) (int64, error) {
	if len(v) == 0 || string(v) == "null" {
		return 1, nil
	}
	var x struct {
		Amount *int64 `json:"amount"`
	}
	if err := json.Unmarshal(v, &x); err != nil || x.Amount == nil {
		return 0, fmt.Errorf("decrement invoked with %s, want {\"amount\":n} or no value", v)
	}
	if *x.Amount < 1 {
		return 0, fmt.Errorf("decrement invoked with amount %d, want 1 or more", *x.Amount)
	}
	return *x.Amount, nil
}

// budgetUnitOnly refuses a decrement the unit checker cannot read: one whose value
// names an amount other than 1, in a history that does not declare amounts. Other
// values of a decrement's invocation are not read, as before amounts existed.
func budgetUnitOnly(op histories.Op) error {
	var x struct {
		Amount json.RawMessage `json:"amount"`
	}
	if json.Unmarshal(op.Value, &x) != nil || x.Amount == nil || string(x.Amount) == "1" {
		return nil
	}
	return fmt.Errorf("history index %d: decrement invoked with %s, and the header does not set params.%s to true (a budget history whose decrements take more than 1 unit declares it)", op.Index, op.Value, BudgetAmountsParam)
}

// budgetHasAmounts reports whether a budget history's header declares amounts.
func budgetHasAmounts(h *histories.Header) (bool, error) {
	if h == nil {
		return false, nil
	}
	raw, ok := h.Params[BudgetAmountsParam]
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, fmt.Errorf("budget history: params.amounts %s, want true or false", raw)
	}
	return b, nil
}

// amtOp is one operation of a budget history with amounts.
type amtOp struct {
	opRef
	read     bool
	amount   int64
	kind     budgetKind // 0 while open
	balance  int64      // read value
	inv, ret int        // event positions; ret -1 while open
	slot     int        // bit of the open operations, while open and known
}

func (o *amtOp) name() string {
	if o.read {
		return o.nameAs("read")
	}
	return fmt.Sprintf("%s (%d %s)", o.nameAs("decrement"), o.amount, map[bool]string{true: "unit", false: "units"}[o.amount == 1])
}

// amtConfig is one way the history so far can have happened: the balance, which open
// operations took effect (bits by slot), and how many unknown decrements of each
// amount (by class) were placed.
type amtConfig struct {
	bal  int64
	lin  uint64
	used []int32
	// hold says unknown decrements were just placed, for the observation that must
	// come next: until it does, no applied decrement is placed.
	hold bool
}

// CheckBudgetAmounts decides exactly whether ops, a budget history whose decrements
// take amounts (see BudgetAmountsParam for the values), is linearizable for one account
// that starts at budget. It is a search: the history is held in memory, and a history
// whose configurations outgrow the search's bound, or whose ctx ends, is Unknown.
// Anomaly kinds are CheckBudget's: "overdraft" (more units acknowledged as applied than
// the budget), "applied-after-exhausted", "premature-rejection", "stale-read" and
// "impossible-read", each naming the operation no order can place and the balances the
// history allowed just before it completed. Details: budget, amounts (true),
// acknowledged_applied, acknowledged_units, rejected, failed, unknown, unknown_units,
// reads, reads_unknown, final_balance (the last read), balance_min and balance_max
// (the final balances the history allows), anomalies. The error reports a history that
// is not a budget history (see CheckBudget) or a negative budget.
func CheckBudgetAmounts(ctx context.Context, ops []histories.Op, budget int64) (Result, error) {
	if budget < 0 {
		return Result{}, fmt.Errorf("budget checker: negative budget %d", budget)
	}
	all, events, err := budgetAmountOps(ops)
	if err != nil {
		return Result{}, err
	}
	s := &amtSearch{budget: budget, ctx: ctx}
	return s.run(all, events)
}

// budgetAmountOps pairs a budget history's events: the operations, and the event
// positions in order (a position's operation, and whether it is the completion).
func budgetAmountOps(ops []histories.Op) ([]*amtOp, []amtEvent, error) {
	var p histories.Pairer[*amtOp]
	var all []*amtOp
	var events []amtEvent
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		pos := len(events)
		if op.Type == histories.Invoke {
			if op.F != "decrement" && op.F != "read" {
				return nil, nil, fmt.Errorf("history index %d: budget history has unknown function %q", op.Index, op.F)
			}
			o := &amtOp{opRef: invoked(op), read: op.F == "read", amount: 1, inv: pos, ret: -1, slot: -1}
			if !o.read {
				n, err := budgetAmountOf(op.Value)
				if err != nil {
					return nil, nil, fmt.Errorf("history index %d: %w", op.Index, err)
				}
				o.amount = n
			}
			if err := p.Invoke(op, o); err != nil {
				return nil, nil, err
			}
			all = append(all, o)
			events = append(events, amtEvent{op: o})
			continue
		}
		o, err := p.Complete(op)
		if err != nil {
			return nil, nil, err
		}
		kind, balance, err := budgetClassify(o.read, op.Type, op.Value)
		if err != nil {
			return nil, nil, fmt.Errorf("history index %d: %w", op.Index, err)
		}
		o.kind, o.balance, o.ret, o.retIndex = kind, balance, pos, op.Index
		events = append(events, amtEvent{op: o, complete: true})
	}
	for _, o := range p.Open() {
		if o.read {
			o.kind = budgetNoRead
		} else {
			o.kind = budgetUnknown
		}
	}
	return all, events, nil
}

type amtEvent struct {
	op       *amtOp
	complete bool
}

// amtSearch is the state of one CheckBudgetAmounts.
type amtSearch struct {
	ctx     context.Context
	budget  int64
	classes []int64       // the amounts of unknown decrements, one class each
	classOf map[int64]int // amount -> class
	avail   []int32       // unknown decrements invoked so far, per class
	open    [budgetAmountsMaxOpen]*amtOp
	configs []amtConfig
	stopped string // why the search gave up, if it did
	findings
	steps int
}

func (s *amtSearch) run(all []*amtOp, events []amtEvent) (Result, error) {
	s.classOf = map[int64]int{}
	var fig struct{ applied, appliedUnits, rejected, failed, unknown, unknownUnits, reads, readsLost int64 }
	var final *amtOp
	var appliedOps []int64
	for _, o := range all {
		switch o.kind {
		case budgetApplied:
			fig.applied++
			fig.appliedUnits += o.amount
			if len(appliedOps) < 2*budgetMaxOps {
				appliedOps = append(appliedOps, o.events()...)
			}
		case budgetRejected:
			fig.rejected++
		case budgetFailed:
			fig.failed++
		case budgetUnknown:
			fig.unknown++
			fig.unknownUnits += o.amount
			if _, ok := s.classOf[o.amount]; !ok {
				s.classOf[o.amount] = len(s.classes)
				s.classes = append(s.classes, o.amount)
			}
		case budgetRead:
			fig.reads++
		case budgetNoRead:
			fig.readsLost++
		}
	}
	overdraft := fig.appliedUnits > s.budget
	if overdraft {
		s.anomaly("overdraft", appliedOps, fmt.Sprintf("%s acknowledged as applied, taking %d units, budget %d",
			budgetPlural(fig.applied, "decrement"), fig.appliedUnits, s.budget))
	}
	s.avail = make([]int32, len(s.classes))
	s.configs = []amtConfig{{bal: s.budget, used: make([]int32, len(s.classes))}}
	for _, ev := range events {
		if s.stopped != "" {
			break
		}
		o := ev.op
		if !ev.complete {
			s.invoke(o)
			continue
		}
		if o.slot >= 0 {
			if o.kind == budgetRead {
				final = o
			}
			s.complete(o, overdraft)
		}
	}
	r := Result{Checker: "budget"}
	d := map[string]any{
		"budget": s.budget, "amounts": true,
		"acknowledged_applied": fig.applied, "acknowledged_units": fig.appliedUnits,
		"rejected": fig.rejected, "failed": fig.failed,
		"unknown": fig.unknown, "unknown_units": fig.unknownUnits,
		"reads": fig.reads, "reads_unknown": fig.readsLost,
	}
	if final != nil {
		d["final_balance"] = final.balance
	}
	if s.ctx.Err() != nil {
		return interrupted("budget", s.ctx.Err()), nil
	}
	lo, hi, known := int64(0), int64(0), false
	if s.stopped == "" {
		lo, hi, known = s.finalRange()
	}
	if known {
		d["balance_min"], d["balance_max"] = lo, hi
	}
	d["anomalies"] = s.found
	r.Details = encodeDetails(d)
	switch {
	case len(s.anomalies) > 0:
		r.Verdict = Invalid
		r.Anomalies = s.anomalies
		r.Summary = firstOf(s.anomalies[0], s.found)
	case s.stopped != "":
		r.Verdict, r.Anomalies = Unknown, []Anomaly{}
		r.Summary = s.stopped
	default:
		r.Verdict, r.Anomalies = Valid, []Anomaly{}
		var b strings.Builder
		fmt.Fprintf(&b, "linearizable: %s acknowledged as applied (%d units), %d rejected, %d unknown (%d units), budget %d",
			budgetPlural(fig.applied, "decrement"), fig.appliedUnits, fig.rejected, fig.unknown, fig.unknownUnits, s.budget)
		if known {
			fmt.Fprintf(&b, "; final balance %s", budgetBetween(lo, hi))
		}
		if final != nil {
			fmt.Fprintf(&b, ", last read %d", final.balance)
		}
		r.Summary = b.String()
	}
	return r, nil
}

// invoke opens o: an unknown decrement joins the pool of its amount, an operation
// whose outcome is known takes a slot; the others (failed decrements, reads that saw
// nothing) have no effect to place.
func (s *amtSearch) invoke(o *amtOp) {
	switch o.kind {
	case budgetUnknown:
		s.avail[s.classOf[o.amount]]++
	case budgetApplied, budgetRejected, budgetRead:
		for i, x := range s.open {
			if x == nil {
				s.open[i], o.slot = o, i
				return
			}
		}
		s.stopped = fmt.Sprintf("more than %d operations open at once at %s: the search does not decide it", budgetAmountsMaxOpen, o.name())
	}
}

// step is the balance after o takes effect at balance bal, and whether it can.
func (s *amtSearch) step(o *amtOp, bal int64) (int64, bool) {
	switch o.kind {
	case budgetApplied:
		return bal - o.amount, bal >= o.amount
	case budgetRejected:
		return bal, bal < o.amount
	case budgetRead:
		return bal, bal == o.balance
	}
	return bal, false
}

// closure extends configs by every order of the open operations not yet placed and
// of the unknown decrements invoked so far. It returns false when the bound ran out.
//
// Unknown decrements are placed only right before an observation (a rejection or a
// read) that needs them, or at the end (final): an unknown one placed anywhere else
// can move later, past the applied decrements after it, which then see more left and
// still apply, to just before the next observation, or past an observation that did
// not need it, or out of the history; so the configurations this leaves out are never
// needed.
func (s *amtSearch) closure(configs []amtConfig, final bool) ([]amtConfig, bool) {
	var f frontier
	for _, c := range configs {
		f.add(c)
	}
	for i := 0; i < len(f.out); i++ {
		if len(f.out) > budgetAmountsMaxConfigs {
			return nil, false
		}
		if s.steps++; s.steps%checkEvery == 0 && s.ctx.Err() != nil {
			return nil, false
		}
		if f.dead[i] {
			continue // a configuration that dominates it is expanded instead
		}
		c := f.out[i]
		for slot, o := range s.open {
			if o == nil || c.lin&(1<<slot) != 0 || c.hold && o.kind == budgetApplied {
				continue
			}
			if bal, ok := s.step(o, c.bal); ok {
				f.add(amtConfig{bal: bal, lin: c.lin | 1<<slot, used: c.used})
			}
		}
		for k, n := range s.avail {
			a := s.classes[k]
			if c.used[k] < n && c.bal >= a && (final || s.awaited(c, a)) {
				used := slices.Clone(c.used)
				used[k]++
				f.add(amtConfig{bal: c.bal - a, lin: c.lin, used: used, hold: !final})
			}
		}
	}
	var out []amtConfig
	for _, c := range f.live() {
		if !c.hold {
			out = append(out, c)
		}
	}
	return out, true
}

// awaited reports whether an unknown decrement of a units placed at c could serve an
// observation still open: a read of at most c's balance less a, or a rejection that
// needs less left than c has. Placed anywhere else, it could move after that
// observation, or out of the history.
func (s *amtSearch) awaited(c amtConfig, a int64) bool {
	for slot, o := range s.open {
		if o == nil || c.lin&(1<<slot) != 0 {
			continue
		}
		switch o.kind {
		case budgetRead:
			if c.bal-a >= o.balance {
				return true
			}
		case budgetRejected:
			if c.bal >= o.amount {
				return true
			}
		}
	}
	return false
}

// frontier keeps configurations that no other dominates. Of two with the same balance
// and the same open operations placed, the one that placed no more unknown decrements
// of any amount dominates: whatever the other can do next, it can do too (the extra
// unknown ones it still holds need never be placed).
type frontier struct {
	out   []amtConfig
	dead  []bool
	byKey map[amtKey][]int
}

type amtKey struct {
	bal  int64
	lin  uint64
	hold bool
}

func (f *frontier) add(c amtConfig) {
	if f.byKey == nil {
		f.byKey = map[amtKey][]int{}
	}
	k := amtKey{c.bal, c.lin, c.hold}
	same := f.byKey[k]
	for _, i := range same {
		if !f.dead[i] && usedLeq(f.out[i].used, c.used) {
			return
		}
	}
	kept := same[:0]
	for _, i := range same {
		if !f.dead[i] && usedLeq(c.used, f.out[i].used) {
			f.dead[i] = true
		}
		if !f.dead[i] {
			kept = append(kept, i)
		}
	}
	f.byKey[k] = append(kept, len(f.out))
	f.out = append(f.out, c)
	f.dead = append(f.dead, false)
}

// live is the configurations no other dominates.
func (f *frontier) live() []amtConfig {
	out := make([]amtConfig, 0, len(f.out))
	for i, c := range f.out {
		if !f.dead[i] {
			out = append(out, c)
		}
	}
	return out
}

func usedLeq(a, b []int32) bool {
	for i := range a {
		if a[i] > b[i] {
			return false
		}
	}
	return true
}

// complete closes o: it must have taken effect by now, in some configuration.
func (s *amtSearch) complete(o *amtOp, overdraft bool) {
	all, ok := s.closure(s.configs, false)
	if !ok {
		s.stopped = s.ranOut(o)
		return
	}
	bit := uint64(1) << o.slot
	var keep, without []amtConfig
	for _, c := range all {
		if c.lin&bit != 0 {
			c.lin &^= bit
			keep = append(keep, c)
		} else {
			without = append(without, c)
		}
	}
	s.open[o.slot], o.slot = nil, -1
	if len(keep) > 0 {
		s.configs = dedupConfigs(keep)
		return
	}
	// No order places o: say which balances were possible, and go on as if o had not
	// happened.
	s.explain(o, without, overdraft)
	s.configs = dedupConfigs(without)
}

func dedupConfigs(cs []amtConfig) []amtConfig {
	var f frontier
	for _, c := range cs {
		f.add(c)
	}
	return f.live()
}

func (s *amtSearch) ranOut(o *amtOp) string {
	if s.ctx.Err() != nil {
		return fmt.Sprintf("interrupted before the history could be decided (%v)", s.ctx.Err())
	}
	return fmt.Sprintf("more than %d ways the history could have happened by the completion of %s: the search gave up, nothing was decided", budgetAmountsMaxConfigs, o.name())
}

// explain records why no order places o, with the balances o could have met.
func (s *amtSearch) explain(o *amtOp, all []amtConfig, overdraft bool) {
	bals := map[int64]bool{}
	for _, c := range all {
		bals[c.bal] = true
	}
	seen := slices.Sorted(maps.Keys(bals))
	words := balanceList(seen)
	switch o.kind {
	case budgetApplied:
		if overdraft {
			return // the overdraft says it
		}
		most := "none"
		if len(seen) > 0 {
			most = strconv.FormatInt(seen[len(seen)-1], 10)
		}
		s.anomaly("applied-after-exhausted", o.events(), fmt.Sprintf(
			"%s was acknowledged as applied, but no order of the operations before its completion leaves %d units for it: at most %s were left (budget %d)",
			o.name(), o.amount, most, s.budget))
	case budgetRejected:
		s.anomaly("premature-rejection", o.events(), fmt.Sprintf(
			"%s was rejected, but in every order of the operations before its completion at least %d units were left: the balance could be only %s (budget %d)",
			o.name(), o.amount, words, s.budget))
	case budgetRead:
		kind := "impossible-read"
		if len(seen) > 0 && o.balance > seen[len(seen)-1] {
			kind = "stale-read"
		}
		s.anomaly(kind, o.events(), fmt.Sprintf(
			"%s returned balance %d, but no order of the operations before its completion leaves that: the balance could be only %s (budget %d)",
			o.name(), o.balance, words, s.budget))
	}
}

// balanceList words a sorted set of balances, at most 8 of them.
func balanceList(b []int64) string {
	if len(b) == 0 {
		return "none (the history was already impossible)"
	}
	var parts []string
	for i, v := range b {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("... (%d in all)", len(b)))
			break
		}
		parts = append(parts, strconv.FormatInt(v, 10))
	}
	return strings.Join(parts, ", ")
}

// finalRange is the lowest and highest final balance the history allows: every
// configuration left, with any of the unknown decrements not yet placed.
func (s *amtSearch) finalRange() (lo, hi int64, ok bool) {
	all, ok := s.closure(s.configs, true)
	if !ok || len(all) == 0 {
		return 0, 0, false
	}
	lo, hi = all[0].bal, all[0].bal
	for _, c := range all {
		lo, hi = min(lo, c.bal), max(hi, c.bal)
	}
	return lo, hi, true
}

// checkBudgetAmountsStream is Check's case of a budget history with amounts: the
// events of next (or all, when the caller holds them), decided by CheckBudgetAmounts.
func checkBudgetAmountsStream(ctx context.Context, next func() (histories.Op, error), all []histories.Op, budget int64, timeout time.Duration) (Result, error) {
	if all == nil {
		done, err := feed(ctx, next, func(op histories.Op) error {
			all = append(all, op)
			return nil
		})
		if err != nil {
			return Result{}, err
		}
		if !done {
			return interrupted("budget", ctx.Err()), nil
		}
	}
	sctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	res, err := CheckBudgetAmounts(sctx, all, budget)
	if err != nil || res.Verdict == 0 {
		return res, err
	}
	if ctx.Err() == nil && sctx.Err() != nil {
		res.Summary = fmt.Sprintf("the search ran out of time (%v) before the history could be decided", timeout)
		res.Details = map[string]json.RawMessage{"bound": histories.Value("timeout")}
	}
	var c completions
	for _, op := range all {
		c.add(op)
	}
	return finish(res, nil, &c), nil
}
