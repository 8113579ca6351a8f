package checker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/outages"
)

// Lost writes. A server that is killed, restarted, failed over or loses power may come
// back without writes it acknowledged. The nemesis records each of those faults in the
// history (internal/nemesis reads them), and the final reads (or, for a register, the
// reads after the server answered again) show what survived, so the check finds what
// was lost from the history alone, as `indoubt check` of a run directory does. A lost
// write is an anomaly of kind LostWriteKind, listed in Result.LostWrites with the
// fault it followed, and it makes the verdict invalid: what was lost is proven lost,
// whatever a search of the rest of the history did or did not decide.

// LostWriteKind is the kind of the anomaly a LostWrite is reported as.
const LostWriteKind = "lost-write"

// LostWrite is an acknowledged effect found missing after a process fault: the
// operation, the fault that preceded it, and how long before the fault it was
// acknowledged.
type LostWrite struct {
	// OpID and Index name the acknowledged operation (its completion event); Key and
	// Value what it wrote.
	OpID  string          `json:"op_id"`
	Index int64           `json:"index"`
	Key   string          `json:"key,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	// Count is how many acknowledged effects are missing when the final state cannot
	// say which (a balance, a counter): OpID is then the last acknowledged before the
	// fault.
	Count int64 `json:"count"`
	// Fault is the schedule entry of the fault ("kill@1s-2s"), empty when no fault
	// preceded the loss; AckBeforeFaultS how long before the fault the operation was
	// acknowledged, in seconds.
	Fault           string  `json:"fault"`
	AckBeforeFaultS float64 `json:"ack_before_fault_s"`
	// Explanation says it in a sentence.
	Explanation string `json:"explanation"`
}

// secs is nanoseconds as seconds, to the millisecond.
func secs(ns int64) float64 { return math.Round(float64(ns)/1e6) / 1e3 }

// lostExamples is how many of the lost operations an explanation names.
const lostExamples = 5

// countingLoss finds the acknowledged effects a counting final state (a budget's
// balance, a counter's value) is missing, one event at a time, so that a streamed
// check keeps a time per acknowledged effect, written out (ackTimes), and nothing
// more; close releases them.
type countingLoss struct {
	model string // budget or counter
	// effect is the function whose acknowledgements count: decrement or increment.
	effect string
	procs  outages.Timeline
	pairs  histories.Pairer[struct{}]
	// acks are the times of the acknowledged effects, in history order; first names
	// the first few, recent the latest (a ring), and beforeFault the last one
	// acknowledged before each process fault, by the fault's place in procs.
	acks        ackTimes
	first       []ack
	recent      [recentAcks]ack
	nrecent     int
	beforeFault map[int]ack
	replayed    int64
	// Of the final read: the value (a balance or the counter), whether the account
	// was missing, and whether a read was seen at all.
	final   int64
	missing bool
	read    bool
}

// recentAcks is the size of the ring of the latest acknowledgements, in which the last
// one before each fault is looked for when the fault's event arrives. Between the
// instant a fault is timed at and its event's place in the history the server still
// acknowledges until the kill lands, and a loaded machine stretches that: 1024 is a
// fifth of a second of a PostgreSQL with synchronous_commit off here, and a busy CI run
// once found no acknowledgement before a power loss with 3105 lost after it (the power
// loss was then recorded after the restart, too). 32768 covers a second at 30,000 a
// second, in 1 MB.
const recentAcks = 1 << 15

// ack is an acknowledged effect: its op id, completion index and time.
type ack struct {
	opID        string
	index, time int64
}

func newCountingLoss(model string) *countingLoss {
	c := &countingLoss{model: model, effect: "increment", beforeFault: map[int]ack{}}
	if model == "budget" {
		c.effect = "decrement"
	}
	return c
}

// add takes the next event of the history; a history that does not pair has already
// been refused by the model's checker.
func (c *countingLoss) add(op histories.Op) {
	if c.procs.Add(op) {
		// Acknowledgements timed before the fault may be written after its event (the
		// nemesis records the fault once it has been applied, with the time it began),
		// and acknowledgements timed after it may come before: the latest of the
		// recent ones that completed before it (recentAcks).
		at := c.procs.Faults[len(c.procs.Faults)-1].Start
		var best ack
		for i := range min(c.nrecent, len(c.recent)) {
			if a := c.recent[i]; a.time < at && (best.opID == "" || a.time > best.time) {
				best = a
			}
		}
		if best.opID != "" {
			c.beforeFault[len(c.procs.Faults)-1] = best
		}
	}
	if !op.IsClient() {
		return
	}
	if op.Type == histories.Invoke {
		_ = c.pairs.Invoke(op, struct{}{})
		return
	}
	if _, err := c.pairs.Complete(op); err != nil {
		return
	}
	switch op.F {
	case c.effect:
		if op.Type != histories.OK || c.model == "budget" && !budgetTookUnit(op.Value) {
			return
		}
		if bytes.Contains(op.Value, []byte(`"replayed":true`)) {
			c.replayed++
		}
		c.acks.add(op.Time)
		a := ack{opID: op.OpID, index: op.Index, time: op.Time}
		if len(c.first) < lostExamples {
			c.first = append(c.first, a)
		}
		c.recent[c.nrecent%len(c.recent)] = a
		c.nrecent++
	case "read":
		c.readFinal(op)
	}
}

// readFinal keeps the value of a read: the last one read is the final state.
func (c *countingLoss) readFinal(op histories.Op) {
	var v struct {
		Balance *int64 `json:"balance"`
		Value   *int64 `json:"value"`
		Missing bool   `json:"missing"`
	}
	if json.Unmarshal(op.Value, &v) != nil {
		return
	}
	switch {
	case c.model == "budget" && v.Missing:
		c.missing, c.read = true, true
	case op.Type != histories.OK:
	case c.model == "budget" && v.Balance != nil:
		c.final, c.missing, c.read = *v.Balance, false, true
	case c.model == "counter" && v.Value != nil:
		c.final, c.read = *v.Value, true
	}
}

// budgetTookUnit reports whether an ok decrement's value says it took a unit.
func budgetTookUnit(v []byte) bool {
	o, err := budgetParseOutcome(v)
	return err == nil && o.applied
}

// lost returns what the final state is missing; initial is the budget or the counter's
// value before the run. It errs when the acknowledgement times cannot be read back.
func (c *countingLoss) lost(initial int64) ([]LostWrite, error) {
	if !c.read {
		return nil, nil
	}
	fi := -1
	for i := range c.procs.Faults {
		if c.procs.Faults[i].LosesData() {
			fi = i
		}
	}
	if c.model == "budget" && c.missing {
		l, err := c.lostAccount(initial, fi)
		if err != nil {
			return nil, err
		}
		return []LostWrite{l}, nil
	}
	var n int64
	noun, plural := c.effect, c.effect+"s"
	went := c.final - initial // what the final state says took effect
	if c.model == "budget" {
		went = initial - c.final
	}
	if (went < 0) != (c.model == "budget" && initial < c.final || c.model != "budget" && c.final < initial) {
		return nil, nil // the difference overflows: the model's checker refuses the values
	}
	if c.model == "budget" {
		// Each acknowledged decrement took a unit (a replayed one took it earlier);
		// the balance cannot be higher than that allows, whatever else happened.
		n = (c.acks.n - c.replayed) - went
	} else {
		n = c.acks.n - went
	}
	if n <= 0 || fi < 0 {
		return nil, nil
	}
	fault := c.procs.Faults[fi]
	l := LostWrite{Count: n, Fault: fault.Fault}
	l.Explanation = fmt.Sprintf("%d acknowledged %s missing from the final state after %s", n, plural, fault.Describe())
	before, err := c.acks.countBefore(fault.Start)
	if err != nil {
		return nil, err
	}
	if fault.Action == outages.PartitionAction && fault.End >= 0 {
		untilEnd, err := c.acks.countBefore(fault.End)
		if err != nil {
			return nil, err
		}
		during := untilEnd - before
		l.Explanation += fmt.Sprintf("; %d %s were acknowledged while it lasted (%.2fs to %.2fs)", during, plural, float64(fault.Start)/1e9, float64(fault.End)/1e9)
	}
	if last, ok := c.beforeFault[fi]; ok {
		l.OpID, l.Index, l.AckBeforeFaultS = last.opID, last.index, secs(fault.Start-last.time)
		l.Explanation += fmt.Sprintf("; the last %s acknowledged before it, %s, was acknowledged %.3fs before the fault", noun, last.opID, l.AckBeforeFaultS)
		// The likeliest lost are the last acknowledged (a log loses its tail): how far
		// back they reach is the window of acknowledged work the fault took.
		if n > 1 && n <= before {
			from, err := c.acks.nthBefore(fault.Start, before-n)
			if err != nil {
				return nil, err
			}
			l.Explanation += fmt.Sprintf("; the last %d acknowledged span the %.3fs before it", n, secs(fault.Start-from))
		}
	}
	return []LostWrite{l}, nil
}

func (c *countingLoss) close() { c.acks.close() }

// lostAccount names what is lost when the budget's final read found no account at all:
// the balance the run set up and every decrement acknowledged as applied, each of which
// took a unit from it. It names the last data-losing fault (fi, -1 for none), the first
// few acknowledged decrements and the last one before the fault. With no such fault the
// account vanished by itself, which is as much a loss.
func (c *countingLoss) lostAccount(budget int64, fi int) (LostWrite, error) {
	at := int64(math.MaxInt64)
	cause := "with no process fault before it"
	l := LostWrite{Count: c.acks.n}
	last, hasLast := c.recent[(c.nrecent-1+len(c.recent))%len(c.recent)], c.nrecent > 0
	if fi >= 0 {
		f := c.procs.Faults[fi]
		at, l.Fault = f.Start, f.Fault
		cause = "after " + f.Describe()
		last, hasLast = c.beforeFault[fi]
	}
	l.Explanation = fmt.Sprintf("the account is gone %s: the final read found no balance at all, so the budget of %d the run set up and all %d decrements acknowledged as applied are lost", cause, budget, c.acks.n)
	acked, err := c.acks.countBefore(at)
	if err != nil || !hasLast || acked == 0 {
		return l, err
	}
	l.OpID, l.Index = last.opID, last.index
	if fi >= 0 {
		l.AckBeforeFaultS = secs(at - last.time)
	}
	var ids []string
	for _, a := range c.first {
		if a.time < at {
			ids = append(ids, a.opID)
		}
	}
	l.Explanation += ", from " + strings.Join(ids, ", ")
	if n := int(acked) - len(ids); n > 1 {
		l.Explanation += fmt.Sprintf(" and %d more, to %s", n-1, last.opID)
	} else if n == 1 {
		l.Explanation += " and " + last.opID
	}
	if fi >= 0 {
		l.Explanation += fmt.Sprintf(" (acknowledged %.3fs before the fault)", l.AckBeforeFaultS)
	}
	return l, nil
}

// lostRegisterWrites names, per data-losing fault and key, the last write acknowledged
// before the fault when the first read invoked after the server answered again returns
// a value neither it nor any write that may follow it wrote: the read must follow the
// write in any linearization, so the write is gone. (An unknown write may apply at any
// time, so its value always counts as one that may follow.)
func lostRegisterWrites(ops []histories.Op) []LostWrite {
	faults := outages.LosingFaults(ops)
	if !slices.ContainsFunc(faults, outages.ProcessFault.LosesData) {
		return nil // nothing can have been lost: no need to pair a long history
	}
	all, err := histories.Pair(ops)
	if err != nil {
		return nil
	}
	byKey := map[string][]histories.Operation{}
	var keys []string
	for _, o := range all {
		k := o.Invoke.Key
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], o)
	}
	slices.Sort(keys)
	var out []LostWrite
	for fi, f := range faults {
		if !f.LosesData() || f.End < 0 {
			continue
		}
		if f.Action == outages.PartitionAction {
			// What a partition loses was acknowledged while it lasted (by a side that
			// went on as primary): the last write acknowledged before the heal, and the
			// first read invoked after it.
			f.Start = f.End
		}
		next := int64(math.MaxInt64)
		if fi+1 < len(faults) {
			next = faults[fi+1].Start
		}
		for _, k := range keys {
			if l, ok := lostRegisterWrite(byKey[k], f, next); ok {
				out = append(out, l)
			}
		}
	}
	return out
}

// lostRegisterWrite is lostRegisterWrites for one key's operations and one fault; next
// is when the fault after it began.
func lostRegisterWrite(ops []histories.Operation, f outages.ProcessFault, next int64) (LostWrite, bool) {
	var w *histories.Operation
	for i, o := range ops {
		if o.Type() == histories.OK && o.Invoke.F != "read" && o.Complete.Time < f.Start {
			if _, ok := written(o.Invoke); ok && (w == nil || o.Complete.Time > w.Complete.Time) {
				w = &ops[i]
			}
		}
	}
	if w == nil {
		return LostWrite{}, false
	}
	var r *histories.Operation
	for i, o := range ops {
		if o.Invoke.F == "read" && o.Type() == histories.OK && o.Invoke.Time > f.End && o.Invoke.Time < next && (r == nil || o.Invoke.Time < r.Invoke.Time) {
			r = &ops[i]
		}
	}
	if r == nil || len(r.Complete.Value) == 0 {
		return LostWrite{}, false
	}
	wv, _ := written(w.Invoke)
	if sameValue(r.Complete.Value, wv) {
		return LostWrite{}, false
	}
	for _, o := range ops {
		if o.Invoke.F == "read" || o.Type() == histories.Fail {
			continue
		}
		// Writes not known to precede w: unknown ones, and those not over before w began.
		if o.Type() == histories.Info || o.Complete.Time >= w.Invoke.Time {
			if v, ok := written(o.Invoke); ok && sameValue(r.Complete.Value, v) {
				return LostWrite{}, false
			}
		}
	}
	k := w.Invoke.Key
	l := LostWrite{OpID: w.Invoke.OpID, Index: w.Complete.Index, Key: k, Value: wv, Fault: f.Fault, AckBeforeFaultS: secs(f.Start - w.Complete.Time)}
	l.Explanation = fmt.Sprintf("%s %s of %s by op %s (acknowledged %.3fs before %s) is lost: read %s, invoked after the server answered again, returned %s",
		w.Invoke.F, string(w.Invoke.Value), k, w.Invoke.OpID, l.AckBeforeFaultS, f.Describe(), r.Invoke.OpID, string(r.Complete.Value))
	return l, true
}

// written returns the value a write or compare-and-set puts in the register.
func written(inv histories.Op) (json.RawMessage, bool) {
	switch inv.F {
	case "write":
		return inv.Value, len(inv.Value) > 0
	case "cas":
		var ft []json.RawMessage
		if json.Unmarshal(inv.Value, &ft) != nil || len(ft) != 2 {
			return nil, false
		}
		return ft[1], true
	}
	return nil, false
}

// sameValue reports whether two JSON values are the same value: numbers by their
// exact value (3 and 3.0 are one number), everything else as decoded.
func sameValue(a, b json.RawMessage) bool {
	x, okx := decodeExact(a)
	y, oky := decodeExact(b)
	if !okx || !oky {
		return false
	}
	return equalExact(x, y)
}

func decodeExact(b json.RawMessage) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	return v, d.Decode(&v) == nil
}

func equalExact(x, y any) bool {
	nx, okx := x.(json.Number)
	ny, oky := y.(json.Number)
	if okx || oky {
		if !okx || !oky {
			return false
		}
		rx, ok1 := new(big.Rat).SetString(nx.String())
		ry, ok2 := new(big.Rat).SetString(ny.String())
		return ok1 && ok2 && rx.Cmp(ry) == 0
	}
	switch xv := x.(type) {
	case []any:
		yv, ok := y.([]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for i := range xv {
			if !equalExact(xv[i], yv[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		yv, ok := y.(map[string]any)
		if !ok || len(xv) != len(yv) {
			return false
		}
		for k, v := range xv {
			if w, ok := yv[k]; !ok || !equalExact(v, w) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(x, y)
}

// lostEffects names the acknowledged applies of an exactly-once history that are
// absent from its final state and were acknowledged before a data-losing fault: what
// the fault took. (The exactly-once checker names every absent one as lost; this names
// the fault beside it.)
func lostEffects(ops []histories.Op) []LostWrite {
	faults := outages.LosingFaults(ops)
	fault := outages.LastLosing(faults)
	if fault == nil {
		return nil
	}
	all, err := pairOps(ExactlyOnceModel, ops, "apply", "read")
	if err != nil {
		return nil
	}
	finals := finalReads(all, "read")
	if len(finals) == 0 {
		return nil
	}
	st, err := exactlyOnceState(finals[len(finals)-1])
	if err != nil {
		return nil
	}
	var out []LostWrite
	seen := map[string]bool{}
	for _, o := range all {
		id := o.inv.OpID
		if o.inv.F != "apply" || o.outcome != histories.OK || o.ret.Time >= fault.Start || st[id] > 0 || seen[id] {
			continue
		}
		seen[id] = true
		l := LostWrite{OpID: id, Index: o.ret.Index, Fault: fault.Fault, AckBeforeFaultS: secs(fault.Start - o.ret.Time)}
		l.Explanation = fmt.Sprintf("op id %s, acknowledged %.3fs before %s, is absent from the final state", id, l.AckBeforeFaultS, fault.Describe())
		out = append(out, l)
	}
	return out
}

// withLostWrites adds the lost writes to a model checker's result: each an anomaly of
// kind LostWriteKind, and the verdict invalid with a summary that says so first when
// the model's checker did not already find the history invalid.
func withLostWrites(res Result, lost []LostWrite) Result {
	if len(lost) == 0 || res.Verdict == 0 {
		return res
	}
	res.LostWrites = lost
	found := len(res.Anomalies)
	if raw, ok := res.Details["anomalies"]; ok {
		var n int
		if json.Unmarshal(raw, &n) == nil && n > found {
			found = n
		}
	}
	for _, l := range lost {
		a := Anomaly{Kind: LostWriteKind, Explanation: l.Explanation, Ops: []int64{}}
		if l.OpID != "" {
			a.Ops = []int64{l.Index}
		}
		res.Anomalies = append(res.Anomalies, a)
	}
	if res.Details != nil {
		if _, ok := res.Details["anomalies"]; ok {
			res.Details["anomalies"] = histories.Value(found + len(lost))
		}
	}
	if res.Verdict != Invalid {
		res.Verdict = Invalid
		res.Summary = "acknowledged writes were lost after a process fault: " + lost[0].Explanation
		if strings.HasPrefix(lost[0].Fault, "partition") {
			res.Summary = "acknowledged writes were lost after a partition: " + lost[0].Explanation
		}
		if lost[0].Fault == "" {
			res.Summary = "acknowledged writes were lost: " + lost[0].Explanation
		}
	}
	return res
}
