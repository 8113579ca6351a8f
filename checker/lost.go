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
)

// Lost writes. A server that is killed, restarted, failed over or loses power may come
// back without writes it acknowledged. The nemesis records each of those faults in the
// history (ProcessFaults reads them), and the final reads (or, for a register, the
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

// ProcessFault is one process fault as the history's nemesis events record it: what
// was done to which server process, from when it was applied until the server answered
// again (or was continued). Times are the history's clock.
type ProcessFault struct {
	// Fault is the schedule entry as written; Action what was done: kill, pause,
	// restart, failover or power-loss.
	Fault  string
	Action string
	// Server describes the server; Pid is the process the fault was applied to.
	Server string
	Pid    int
	// Start is the time of the event that applied the fault; End that of the event
	// that ended it (start, resume, started, promoted), or -1 when the history has none.
	Start, End int64
	// Error is what went wrong applying or ending the fault, as the events say.
	Error string
}

// LosesData reports whether the fault can lose what the server acknowledged: a kill,
// a restart, a failover, a power loss (a pause loses nothing), or a partition between
// nodes (partitions.go), through the failover it lets a system make on its own.
func (f ProcessFault) LosesData() bool {
	switch f.Action {
	case "kill", "restart", "failover", "power-loss", PartitionAction:
		return true
	}
	return false
}

// processFaultEnds maps the event that applies a process fault to the one that ends it.
var processFaultEnds = map[string]string{
	"kill": "start", "pause": "resume", "power-loss": "start", "failover": "promoted", "restart": "started",
}

// processEvent is the value of a process fault's nemesis event.
type processEvent struct {
	Fault  string `json:"fault"`
	Server string `json:"server"`
	Pid    *int   `json:"pid"`
	Error  string `json:"error"`
}

// processEventOf reads a nemesis event of a process fault: its value names the fault,
// the server and the pid (the proxy's events and the schedule's windows name no pid).
func processEventOf(op histories.Op) (processEvent, bool) {
	if op.IsClient() || !bytes.Contains(op.Value, []byte(`"pid"`)) {
		return processEvent{}, false
	}
	var e processEvent
	if json.Unmarshal(op.Value, &e) != nil || e.Pid == nil || e.Fault == "" {
		return processEvent{}, false
	}
	return e, true
}

// ProcessFaults reads the process faults from a history's nemesis events, in the
// order they were applied. Events the nemesis records beside them (a rejoin, the
// proxy's faults, fault windows) are not process faults and are skipped.
func ProcessFaults(ops []histories.Op) []ProcessFault {
	var out []ProcessFault
	for _, f := range losingFaults(ops) {
		if f.Action != PartitionAction {
			out = append(out, f)
		}
	}
	return out
}

// losingFaults is ProcessFaults with the partitions between nodes among them, in the
// order they began: every fault a lost write may be attributed to.
func losingFaults(ops []histories.Op) []ProcessFault {
	var t processTimeline
	for _, op := range ops {
		t.add(op)
	}
	return t.faults
}

// processTimeline builds ProcessFaults one event at a time.
type processTimeline struct {
	faults []ProcessFault
	open   []int // faults whose end has not been seen, oldest first
}

// add takes the next event; started reports whether it applied a process fault.
func (t *processTimeline) add(op histories.Op) (started bool) {
	if p, ok := partitionEventOf(op); ok {
		return t.addPartition(op, p)
	}
	e, ok := processEventOf(op)
	if !ok {
		return false
	}
	if _, starts := processFaultEnds[op.F]; starts {
		t.faults = append(t.faults, ProcessFault{Fault: e.Fault, Action: op.F, Server: e.Server, Pid: *e.Pid, Start: op.Time, End: -1, Error: e.Error})
		t.open = append(t.open, len(t.faults)-1)
		return true
	}
	for k, i := range t.open {
		f := &t.faults[i]
		if f.Fault == e.Fault && processFaultEnds[f.Action] == op.F {
			f.End = op.Time
			if e.Error != "" {
				f.Error = strings.TrimPrefix(f.Error+"; "+e.Error, "; ")
			}
			t.open = slices.Delete(t.open, k, k+1)
			return false
		}
	}
	return false
}

// lastLosing is the last fault that can lose data, or nil.
func lastLosing(fs []ProcessFault) *ProcessFault {
	var last *ProcessFault
	for i := range fs {
		if fs[i].LosesData() {
			last = &fs[i]
		}
	}
	return last
}

// secs is nanoseconds as seconds, to the millisecond.
func secs(ns int64) float64 { return math.Round(float64(ns)/1e6) / 1e3 }

// describe names a fault as the explanations do: "kill@1s-2s (kill of pid 7 at 1.00s)".
func (f ProcessFault) describe() string {
	if f.Action == PartitionAction {
		return fmt.Sprintf("%s (%s at %.2fs)", f.Fault, f.Server, float64(f.Start)/1e9)
	}
	return fmt.Sprintf("%s (%s of pid %d at %.2fs)", f.Fault, f.Action, f.Pid, float64(f.Start)/1e9)
}

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
	procs  processTimeline
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
	if c.procs.add(op) {
		// Acknowledgements timed before the fault may be written after its event (the
		// nemesis records the fault once it has been applied, with the time it began),
		// and acknowledgements timed after it may come before: the latest of the
		// recent ones that completed before it (recentAcks).
		at := c.procs.faults[len(c.procs.faults)-1].Start
		var best ack
		for i := range min(c.nrecent, len(c.recent)) {
			if a := c.recent[i]; a.time < at && (best.opID == "" || a.time > best.time) {
				best = a
			}
		}
		if best.opID != "" {
			c.beforeFault[len(c.procs.faults)-1] = best
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
	for i := range c.procs.faults {
		if c.procs.faults[i].LosesData() {
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
	fault := c.procs.faults[fi]
	l := LostWrite{Count: n, Fault: fault.Fault}
	l.Explanation = fmt.Sprintf("%d acknowledged %s missing from the final state after %s", n, plural, fault.describe())
	before, err := c.acks.countBefore(fault.Start)
	if err != nil {
		return nil, err
	}
	if fault.Action == PartitionAction && fault.End >= 0 {
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
		f := c.procs.faults[fi]
		at, l.Fault = f.Start, f.Fault
		cause = "after " + f.describe()
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
	faults := losingFaults(ops)
	if !slices.ContainsFunc(faults, ProcessFault.LosesData) {
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
		if f.Action == PartitionAction {
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
func lostRegisterWrite(ops []histories.Operation, f ProcessFault, next int64) (LostWrite, bool) {
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
		w.Invoke.F, string(w.Invoke.Value), k, w.Invoke.OpID, l.AckBeforeFaultS, f.describe(), r.Invoke.OpID, string(r.Complete.Value))
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
	faults := losingFaults(ops)
	fault := lastLosing(faults)
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
		l.Explanation = fmt.Sprintf("op id %s, acknowledged %.3fs before %s, is absent from the final state", id, l.AckBeforeFaultS, fault.describe())
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
