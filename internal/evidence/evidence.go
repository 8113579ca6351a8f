// Package evidence joins the proxy's ground truth (the faults it fired, on which
// connection, and whether the server had committed) to the operations of a history,
// and compares what it proves with what the history and the checker say. The runner
// and `indoubt check --faults` use it alike, on what a run directory holds: the
// history and the proxy's events (faults.jsonl), of a run or of any program.
//
// # The join
//
// A fault event joins the attempt it hit: the attempt on the event's connection (the
// client's local address, as the proxy saw it) whose time span holds the event's time.
// The proxy acts before the client sees the error, so the event falls inside the
// attempt that saw it. indoubt's runs record every attempt that ended in an error in
// the history (the completion's failed_attempts), so that the run and `indoubt check
// --faults` of its directory join the same way. A history recorded by another program
// may have no attempts, only operations: SpansFromHistory then makes one span per
// operation, from its invocation to its completion (to the end of time for one never
// completed), on the connection its invocation names and, when its completion names
// another one (a retry on a fresh connection), on that one too. Both clocks must be
// one: see ReadEvents.
//
// What the join proves is evidence beside the verdict, never fed to the checker.
package evidence

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// FaultEvent is one thing the proxy did to a connection, with its ground truth.
type FaultEvent struct {
	Time  int64  // monotonic ns since the run started
	Conn  string // the client's address as the proxy saw it
	Kind  string // commit-cut, commit-drop, ...
	Truth string // applied, not-applied, or "" when the fault says nothing of a commit
	What  string // the statement it acted on
	Tag   string // the server's proof of commit, for cuts: "UPDATE 1", "COMMIT"
}

// effect is what a cut commit is known to have changed.
type effect int8

const (
	effectUnknown effect = iota // committed; what it changed is not in the reply (COMMIT, CALL)
	effectRows                  // committed and changed rows ("UPDATE 1")
	effectNone                  // committed and changed nothing ("UPDATE 0")
)

// effectOf reads the reply the proxy cut: a PostgreSQL command tag, whose last word is
// the row count of INSERT, UPDATE, DELETE and MERGE, or a CQL lightweight transaction's
// [applied] column. Other replies (COMMIT, CALL, a Lua script's result) say nothing of
// what changed.
func effectOf(tag string) effect {
	switch {
	case strings.Contains(tag, "[applied]=true"):
		return effectRows
	case strings.Contains(tag, "[applied]=false"):
		return effectNone
	}
	f := strings.Fields(tag)
	if len(f) < 2 {
		return effectUnknown
	}
	switch f[0] {
	case "INSERT", "UPDATE", "DELETE", "MERGE":
	default:
		return effectUnknown
	}
	n, err := strconv.Atoi(f[len(f)-1])
	switch {
	case err != nil:
		return effectUnknown
	case n > 0:
		return effectRows
	}
	return effectNone
}

// Tally counts the commit faults among events by what the server did, from the truth
// and the reply the proxy cut.
func Tally(events []FaultEvent) results.CommitCounts {
	var c results.CommitCounts
	for _, e := range events {
		switch e.Truth {
		case "applied":
			c.Committed++
			switch effectOf(e.Tag) {
			case effectRows:
				c.ChangedRows++
			case effectNone:
				c.Unchanged++
			default:
				c.EffectUnseen++
			}
		case "not-applied":
			c.NotCommitted++
		}
	}
	return c
}

// Join matches fault events to the attempts they hit, by connection and time,
// and compares what the ground truth proves with what the history shows and with the
// workload's final state. It never changes the verdict: it is evidence beside it. It
// returns the final state reconciled with the ground truth.
func Join(events []FaultEvent, spans []Span, ops []histories.Op, final workloads.Final, verdictInvalid bool) (*results.Evidence, workloads.Final) {
	j := &join{
		ev:   &results.Evidence{Events: int64(len(events)), Ambiguous: []results.AmbiguousOp{}, AppliedTwice: []results.AmbiguousOp{}, CommittedTwice: []results.AmbiguousOp{}, Disagreements: []string{}},
		byID: indexOps(ops), byConn: spansByConn(spans),
		appliedByCut: map[string]int{}, committedByCut: map[string]int{}, hits: map[string][]results.AmbiguousOp{},
	}
	for _, e := range events {
		j.add(e)
	}
	j.twice()
	j.disagree(verdictInvalid)
	if final == nil {
		return j.ev, nil
	}
	final, dis := final.Reconcile(j.truth())
	j.ev.Disagreements = append(j.ev.Disagreements, dis...)
	return j.ev, final
}

// opInfo is an operation of the history: its invocation and completion.
type opInfo struct {
	invoke     int64
	completion *histories.Op
}

// indexOps returns the client operations of the history by op id.
func indexOps(ops []histories.Op) map[string]*opInfo {
	byID := map[string]*opInfo{}
	for i := range ops {
		op := &ops[i]
		if !op.IsClient() || op.OpID == "" {
			continue
		}
		oi := byID[op.OpID]
		if oi == nil {
			oi = &opInfo{invoke: -1}
			byID[op.OpID] = oi
		}
		if op.Type == histories.Invoke {
			oi.invoke = op.Index
		} else {
			oi.completion = op
		}
	}
	return byID
}

// spansByConn returns the spans by connection, in time order.
func spansByConn(spans []Span) map[string][]Span {
	byConn := map[string][]Span{}
	for _, s := range spans {
		byConn[s.Conn] = append(byConn[s.Conn], s)
	}
	for _, ss := range byConn {
		sort.Slice(ss, func(i, j int) bool { return ss[i].From < ss[j].From })
	}
	return byConn
}

// join is the evidence being gathered from the fault events, one at a time.
type join struct {
	ev     *results.Evidence
	byID   map[string]*opInfo
	byConn map[string][]Span

	appliedByCut   map[string]int // op id -> cut attempts the reply proves changed rows
	committedByCut map[string]int // op id -> cut attempts committed with unknown effect
	hits           map[string][]results.AmbiguousOp
	order          []string // op ids in the order a fault first hit them
}

// add joins one fault event to the attempt it hit, if any.
func (j *join) add(e FaultEvent) {
	var hit *Span
	for i, s := range j.byConn[e.Conn] {
		// The proxy acts before the client sees the error: the event falls inside
		// the attempt that saw it.
		if s.From <= e.Time && e.Time <= s.To {
			hit = &j.byConn[e.Conn][i]
			break
		}
	}
	if hit == nil {
		return
	}
	j.ev.Joined++
	completion := "open"
	if oi := j.byID[hit.OpID]; oi != nil && oi.completion != nil {
		completion = oi.completion.Type.String()
	}
	a := results.AmbiguousOp{
		OpID: hit.OpID, Process: hit.Process, Invoke: hit.Invoke, Completion: completion,
		Conn: e.Conn, Fault: e.Kind, Truth: e.Truth,
	}
	switch e.Truth {
	case "applied":
		what := "committed it"
		switch effectOf(e.Tag) {
		case effectRows:
			j.appliedByCut[hit.OpID]++
			what = fmt.Sprintf("committed it (%s)", e.Tag)
		case effectNone:
			what = fmt.Sprintf("committed it without changing a row (%s)", e.Tag)
		default:
			j.committedByCut[hit.OpID]++
			if e.Tag != "" {
				what = fmt.Sprintf("committed it (%s; the reply does not say what changed)", e.Tag)
			}
		}
		a.Sentence = fmt.Sprintf("operation %s: the proxy cut the connection %s after the server %s; %s and the operation ended %s", hit.OpID, e.Conn, what, saw(hit), completion)
	case "not-applied":
		a.Sentence = fmt.Sprintf("operation %s: the proxy dropped its commit on %s before the server saw it; %s and the operation ended %s", hit.OpID, e.Conn, saw(hit), completion)
	default:
		a.Sentence = fmt.Sprintf("operation %s: fault %s on %s; %s and the operation ended %s", hit.OpID, e.Kind, e.Conn, saw(hit), completion)
	}
	if hit.Class != workloads.ClassUnknown && e.Truth != "" {
		j.ev.Disagreements = append(j.ev.Disagreements, fmt.Sprintf("operation %s: the error after a %s was classified %s (by the adapter, or by the client that recorded the history), but the outcome was unknown to the client", hit.OpID, e.Kind, hit.Class))
	}
	if _, seen := j.hits[hit.OpID]; !seen {
		j.order = append(j.order, hit.OpID)
	}
	j.hits[hit.OpID] = append(j.hits[hit.OpID], a)
	j.ev.Ambiguous = append(j.ev.Ambiguous, a)
}

// twice lists the operations that took effect, or committed, more than once.
//
// An operation whose cut attempt the server's reply proves changed rows, and that a
// later attempt applied again (or a second proven cut), took effect more than once,
// whatever the history says. Cuts of commits whose reply does not say what changed
// (COMMIT, CALL) prove a commit, not an effect: they are listed, never counted here.
func (j *join) twice() {
	for _, id := range j.order {
		oi := j.byID[id]
		if oi == nil {
			continue
		}
		n := j.appliedByCut[id]
		acked := oi.completion != nil && oi.completion.Type == histories.OK && completionApplied(*oi.completion)
		if acked {
			n++
		}
		if n < 2 {
			if c := j.committedByCut[id]; c > 0 && (acked || j.appliedByCut[id] > 0) {
				a := j.hits[id][0]
				a.Truth = "committed"
				a.Sentence = fmt.Sprintf("operation %s (invoked at history event %d): %d attempt(s) committed before the proxy cut the reply, which does not show what they changed, and another attempt applied it: applied twice unless the first commit changed nothing", id, a.Invoke, c)
				j.ev.CommittedTwice = append(j.ev.CommittedTwice, a)
			}
			continue
		}
		a := j.hits[id][0]
		a.Truth = "applied"
		a.Sentence = fmt.Sprintf("operation %s (invoked at history event %d) took effect %d times: %d attempt(s) changed rows before the proxy cut the reply, and the retry that was acknowledged applied it again", id, a.Invoke, n, j.appliedByCut[id])
		j.ev.AppliedTwice = append(j.ev.AppliedTwice, a)
	}
}

// disagree says where the checker's verdict and the ground truth differ.
func (j *join) disagree(verdictInvalid bool) {
	ev := j.ev
	if len(ev.AppliedTwice) > 0 && !verdictInvalid {
		ev.Disagreements = append(ev.Disagreements, fmt.Sprintf("the ground truth proves %d operation(s) applied more than once, but the checker found the history valid: the duplicates left no trace it could see", len(ev.AppliedTwice)))
	}
	if verdictInvalid && len(ev.AppliedTwice) == 0 && len(ev.CommittedTwice) == 0 && ev.Joined > 0 {
		ev.Disagreements = append(ev.Disagreements, "the checker found the history invalid, but the proxy's ground truth shows no operation committed twice: the cause is not established by the faults injected")
	}
}

// truth is the ground truth the workload's final state is reconciled with.
func (j *join) truth() workloads.Truth {
	var t workloads.Truth
	for _, a := range j.ev.Ambiguous {
		if a.Truth == "applied" {
			t.Applied = append(t.Applied, a.OpID)
		}
	}
	for _, n := range j.appliedByCut {
		t.Proven += int64(n)
	}
	for _, n := range j.committedByCut {
		t.Committed += int64(n)
	}
	return t
}

// completionApplied reports whether an ok completion says its operation took effect:
// it does unless its value says "applied": false or "replayed": true.
func completionApplied(op histories.Op) bool {
	var v struct {
		Applied  *bool `json:"applied"`
		Replayed bool  `json:"replayed"`
	}
	if len(op.Value) > 0 && json.Unmarshal(op.Value, &v) == nil {
		if v.Replayed || (v.Applied != nil && !*v.Applied) {
			return false
		}
	}
	return true
}

// saw says what error the client saw in the attempt a fault hit.
func saw(s *Span) string {
	if s.Err == "" {
		return "the history does not say what error the client saw"
	}
	return fmt.Sprintf("the client saw %q (%s)", s.Err, s.Class)
}
