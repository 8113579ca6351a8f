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
// # What the evidence claims, and what proves it
//
// Every sentence is a claim with its proof; what is not proven is said to be unknown.
//
//   - A fault joined to an attempt (Evidence.Ambiguous) says what the proxy did to it
//     and what its reply proved: "committed it (UPDATE 1)", "committed it without
//     changing a row (UPDATE 0)", "committed a transaction that wrote nothing", for an
//     explicit transaction what its statements answered before the COMMIT ("committed
//     it (COMMIT after UPDATE 1, INSERT 0 1)", "committed transaction 2 of that
//     connection whose writes changed nothing (COMMIT after INSERT 0 0)"),
//     "committed it (COMMIT; the reply does not say what changed)", or "dropped its
//     commit before the server saw it"; then what the client saw and how the operation
//     ended.
//   - "Took effect N times" (Evidence.AppliedTwice, N >= 2) only when N is proven: by
//     the final state, which holds the operation's op id N times (exactly-once), or by
//     the proxy's truth for each attempt: the cut attempts whose reply shows changed
//     rows, and the acknowledged attempt when its own reply, as the client recorded it,
//     shows a change ({"applied":true}, an increment's {"wrote":n}); the proxy alone
//     gives a lower bound ("at least").
//   - A replay (Evidence.Replays): an operation the proxy proves committed once, whose
//     acknowledged retry proves it changed nothing: its reply says so
//     ({"replayed":true}, {"applied":false}), a retry met the unique key the first
//     commit wrote (duplicate key, SQLSTATE 23505, E11000), or the final state holds it
//     once.
//   - Committed, not proven twice (Evidence.CommittedTwice): a cut attempt whose commit
//     applied with a reply that does not show what it changed, and a later attempt
//     acknowledged; neither proof above holds, so the sentence says what is not known.
//
// What the join proves is evidence beside the verdict, never fed to the checker.
package evidence

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// FaultEvent is one thing the proxy did to a connection, with its ground truth.
type FaultEvent struct {
	Time  int64  // the history's clock: ns since the run started, or Unix ns (see Clock)
	Conn  string // the client's address as the proxy saw it
	Kind  string // commit-cut, commit-drop, ...
	Truth string // applied, not-applied, or "" when the fault says nothing of a commit
	What  string // the statement it acted on
	Tag   string // the server's proof of commit, for cuts: "UPDATE 1", "COMMIT"
	// Wrote says whether the transaction the fault cut had a statement that can change
	// data, by the statements' kind, when the proxy saw it (nil when the event does
	// not say): the cut of a read-only transaction's COMMIT changed nothing, whatever
	// its operation did in its other transactions. TxnSeq numbers that transaction
	// among its connection's, from 1 (0: not known).
	Wrote  *bool
	TxnSeq uint64
	// Tags are the server's replies to the statements of the transaction the fault
	// cut, in order (toxics.Txn.Tags, faults.jsonl's txn.tags), and Changed what they
	// prove its commit changed: true rows, false nothing, nil not told (txn.changed).
	Tags    []string
	Changed *bool
	// Request is the API request the fault hit (an HTTP or gRPC proxy): method, path,
	// Idempotency-Key and, for a cut, the status the service answered; nil for a
	// database's protocol (faults.jsonl's request).
	Request *toxics.Request
}

// EventOf is the evidence's view of one of the proxy's events; at is its time on the
// history's clock.
func EventOf(e toxics.Event, at int64) FaultEvent {
	fe := FaultEvent{Time: at, Conn: e.Conn, Kind: e.Kind.String(), Truth: e.Truth.String(), What: e.Statement, Tag: e.Tag, Request: e.Request}
	if e.Txn != nil {
		w := e.Txn.Wrote
		fe.Wrote, fe.TxnSeq = &w, e.Txn.Seq
		fe.Tags, fe.Changed = e.Txn.Tags, e.Txn.Changed
	}
	return fe
}

// effect is what a cut commit is known to have changed.
type effect int8

const (
	effectUnknown effect = iota // committed; what it changed is not in the reply (COMMIT, CALL)
	effectRows                  // committed and changed rows ("UPDATE 1")
	effectNone                  // committed and changed nothing ("UPDATE 0", a read-only transaction)
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
	if strings.HasPrefix(tag, "{") {
		return mongoEffect(tag)
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

// mongoCount finds the counts of a MongoDB reply as the proxy renders it (the shell's
// style): nModified of an update, n of a findAndModify's lastErrorObject, n of an
// insert or a delete.
var (
	mongoModified = regexp.MustCompile(`(?:^\{|, )nModified: (\d+)`)
	mongoLastN    = regexp.MustCompile(`^\{lastErrorObject: \{n: (\d+)`)
	mongoN        = regexp.MustCompile(`^\{n: (\d+)`)
)

// mongoEffect reads what a MongoDB write's reply says it changed: documents modified
// (an update), matched and written (findAndModify: n), inserted or deleted (n). A
// reply the proxy shortened before the count, or of another command, says nothing.
func mongoEffect(tag string) effect {
	for _, re := range []*regexp.Regexp{mongoModified, mongoLastN, mongoN} {
		if m := re.FindStringSubmatch(tag); m != nil {
			if m[1] == "0" {
				return effectNone
			}
			return effectRows
		}
	}
	return effectUnknown
}

// effect is what the event's commit is known to have changed: what the replies to its
// transaction's statements prove (Changed), else nothing when the transaction it cut
// wrote nothing, else what the commit's own reply says.
func (e FaultEvent) effect() effect {
	switch {
	case e.Changed != nil && *e.Changed:
		return effectRows
	case e.Changed != nil, e.Wrote != nil && !*e.Wrote:
		return effectNone
	}
	return effectOf(e.Tag)
}

// Tally counts the commit faults among events by what the server did, from the truth
// and the reply the proxy cut.
func Tally(events []FaultEvent) results.CommitCounts {
	var c results.CommitCounts
	for _, e := range events {
		switch e.Truth {
		case "applied":
			c.Committed++
			switch e.effect() {
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
		ev: &results.Evidence{Events: int64(len(events)), Ambiguous: []results.AmbiguousOp{}, AppliedTwice: []results.AmbiguousOp{},
			CommittedTwice: []results.AmbiguousOp{}, Replays: []results.AmbiguousOp{}, Disagreements: []string{}},
		byID: indexOps(ops), byConn: NewAttempts(spans), counts: finalCounts(ops),
		facts: map[string]*opFacts{},
	}
	for _, e := range events {
		j.add(e)
	}
	j.claims()
	j.ev.Requests = requestClaims(events, ops, j.counts)
	j.disagree(verdictInvalid)
	if final == nil {
		return j.ev, nil
	}
	final, dis := Reconcile(final, j.truth())
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

// finalCounts returns how many times the final state holds each op id, when the
// history has an exactly-once final read (an ok read whose value counts op ids, after
// applies); nil otherwise.
func finalCounts(ops []histories.Op) map[string]int64 {
	applies := false
	var last []byte
	for _, op := range ops {
		switch {
		case !op.IsClient():
		case op.F == "apply":
			applies = true
		case op.F == "read" && op.Type == histories.OK && len(op.Value) > 0 && op.Value[0] == '{':
			last = op.Value
		}
	}
	if !applies || last == nil {
		return nil
	}
	// An exactly-once final read holds a count per op id; an exactly-once-response one
	// the list of responses stored with each effect, whose length is the count.
	var st map[string]json.RawMessage
	if json.Unmarshal(last, &st) != nil {
		return nil
	}
	counts := make(map[string]int64, len(st))
	for id, raw := range st {
		var n int64
		var list []json.RawMessage
		switch {
		case json.Unmarshal(raw, &n) == nil:
			counts[id] = n
		case json.Unmarshal(raw, &list) == nil:
			counts[id] = int64(len(list))
		default:
			return nil // not a final state the evidence can count
		}
	}
	return counts
}

// join is the evidence being gathered from the fault events, one at a time.
type join struct {
	ev     *results.Evidence
	byID   map[string]*opInfo
	byConn Attempts
	counts map[string]int64 // the final state's count per op id; nil when it has none

	facts map[string]*opFacts
	order []string // op ids in the order a fault first hit them
}

// opFacts is what the faults joined to one operation, and the attempts they hit, prove.
type opFacts struct {
	id     string
	invoke int64
	hits   []hit
	first  results.AmbiguousOp // the first fault's item, the base of the claims' items
}

// hit is one fault event and the attempt it hit.
type hit struct {
	e    FaultEvent
	span Span
}

// add joins one fault event to the attempt it hit, if any.
func (j *join) add(e FaultEvent) {
	hitSpan, ok := j.byConn.Hit(e)
	if !ok {
		return
	}
	j.ev.Joined++
	completion := "open"
	if oi := j.byID[hitSpan.OpID]; oi != nil && oi.completion != nil {
		completion = oi.completion.Type.String()
	}
	a := results.AmbiguousOp{
		OpID: hitSpan.OpID, Process: hitSpan.Process, Invoke: hitSpan.Invoke, Completion: completion,
		Conn: e.Conn, Fault: e.Kind, Truth: e.Truth,
	}
	switch e.Truth {
	case "applied":
		a.Sentence = fmt.Sprintf("operation %s: the proxy cut the connection %s after the server %s; %s and the operation ended %s", hitSpan.OpID, e.Conn, committedWhat(e), saw(hitSpan), completion)
	case "not-applied":
		a.Sentence = fmt.Sprintf("operation %s: the proxy dropped its commit on %s before the server saw it; %s and the operation ended %s", hitSpan.OpID, e.Conn, saw(hitSpan), completion)
	default:
		a.Sentence = fmt.Sprintf("operation %s: fault %s on %s; %s and the operation ended %s", hitSpan.OpID, e.Kind, e.Conn, saw(hitSpan), completion)
	}
	if hitSpan.Class != workloads.ClassUnknown && e.Truth != "" {
		j.ev.Disagreements = append(j.ev.Disagreements, fmt.Sprintf("operation %s: the error after a %s was classified %s (by the adapter, or by the client that recorded the history), but the outcome was unknown to the client", hitSpan.OpID, e.Kind, hitSpan.Class))
	}
	f := j.facts[hitSpan.OpID]
	if f == nil {
		f = &opFacts{id: hitSpan.OpID, invoke: hitSpan.Invoke, first: a}
		j.facts[hitSpan.OpID] = f
		j.order = append(j.order, hitSpan.OpID)
	}
	f.hits = append(f.hits, hit{e: e, span: *hitSpan})
	j.ev.Ambiguous = append(j.ev.Ambiguous, a)
}

// committedWhat says what the server's reply to a cut commit proves.
func committedWhat(e FaultEvent) string {
	switch {
	case e.Changed != nil:
		return changedWhat(e)
	case e.Wrote != nil && !*e.Wrote:
		return fmt.Sprintf("committed %s whose statements only read, by their kind (%s): nothing changed", txnName(e), cmp.Or(e.Tag, "COMMIT"))
	case e.effect() == effectRows:
		return fmt.Sprintf("committed it (%s)", e.Tag)
	case e.effect() == effectNone:
		return fmt.Sprintf("committed it without changing a row (%s)", e.Tag)
	case e.Tag != "":
		return fmt.Sprintf("committed it (%s; the reply does not say what changed)", e.Tag)
	}
	return "committed it"
}

// txnName names the transaction an event cut: "its transaction 2 on that connection".
func txnName(e FaultEvent) string {
	if e.TxnSeq == 0 {
		return "a transaction"
	}
	return fmt.Sprintf("transaction %d of that connection", e.TxnSeq)
}

// ackSays is what an operation's acknowledged completion, as the client recorded it,
// says its last attempt changed.
type ackSays int8

const (
	ackNone      ackSays = iota // not acknowledged
	ackUnknown                  // acknowledged; the value does not say what the attempt changed
	ackChanged                  // acknowledged, and the attempt's reply shows a change
	ackUnchanged                // acknowledged, and the attempt changed nothing (a replay, a rejection)
)

// acknowledged reads an operation's completion.
func acknowledged(op *histories.Op) ackSays {
	if op == nil || op.Type != histories.OK {
		return ackNone
	}
	var v struct {
		Applied  *bool  `json:"applied"`
		Replayed bool   `json:"replayed"`
		Wrote    *int64 `json:"wrote"`
	}
	if len(op.Value) == 0 || op.Value[0] != '{' || json.Unmarshal(op.Value, &v) != nil {
		return ackUnknown
	}
	switch {
	case v.Replayed, v.Applied != nil && !*v.Applied:
		return ackUnchanged
	case v.Applied != nil && *v.Applied, v.Wrote != nil:
		return ackChanged
	}
	return ackUnknown
}

// duplicateKey reports whether an error says the statement met a unique key already
// there: the proof that an earlier commit wrote it and that this attempt wrote nothing.
func duplicateKey(err string) bool {
	return strings.Contains(err, "23505") || strings.Contains(err, "duplicate key") || strings.Contains(err, "E11000")
}

// claims turns each operation's facts into the claims they prove: applied more than
// once, replayed, or committed by a cut and retried with nothing proven either way.
func (j *join) claims() {
	for _, id := range j.order {
		f := j.facts[id]
		oi := j.byID[id]
		var comp *histories.Op
		if oi != nil {
			comp = oi.completion
		}
		var rows, unseen int
		var tags []string
		for _, h := range f.hits {
			if h.e.Truth != "applied" {
				continue
			}
			switch h.e.effect() {
			case effectRows:
				rows++
				tags = append(tags, proof(h.e))
			case effectUnknown:
				unseen++
				tags = append(tags, cmp.Or(h.e.Tag, "a commit"))
			}
		}
		if rows+unseen == 0 {
			continue // every cut committed nothing, or every fault was a drop
		}
		ack := acknowledged(comp)
		dupKey := false
		if comp != nil {
			for _, a := range comp.Failed {
				dupKey = dupKey || duplicateKey(a.Error)
			}
		}
		a := f.first
		a.Sentence = ""
		cut := fmt.Sprintf("the proxy cut %s after %s applied (%s)", attempts(rows+unseen), pronoun(rows+unseen), strings.Join(dedupe(tags), ", "))
		if n, ok := j.counts[id]; ok && j.counts != nil {
			a.Times, a.Proof = int(n), results.ProofFinalState
			switch {
			case n >= 2:
				a.Truth = "applied"
				a.Sentence = fmt.Sprintf("operation %s (invoked at history event %d) is present %d times in the final state: it took effect %d times; %s", id, f.invoke, n, n, cut)
				if rows > int(n) {
					j.ev.Disagreements = append(j.ev.Disagreements, fmt.Sprintf("operation %s: the proxy proves %d commits that changed rows, but the final state holds it %d times", id, rows, n))
				}
				j.ev.AppliedTwice = append(j.ev.AppliedTwice, a)
			case n == 1 && ack != ackNone:
				a.Truth = "replayed"
				a.Sentence = fmt.Sprintf("operation %s (invoked at history event %d): %s, and %s; the final state holds it once: %s changed nothing, a replay, not a second application", id, f.invoke, cut, ackedAfter(comp), laterAttempt(comp))
				j.ev.Replays = append(j.ev.Replays, a)
			}
			continue
		}
		times := rows
		if ack == ackChanged {
			times++
		}
		switch {
		case times >= 2:
			a.Truth, a.Times, a.Proof = "applied", times, results.ProofProxy
			bound := ""
			if ack != ackChanged && ack != ackUnchanged {
				bound = "at least "
			}
			a.Sentence = fmt.Sprintf("operation %s (invoked at history event %d) took effect %s%d times: the proxy cut %s after %s changed rows (%s)", id, f.invoke, bound, times, attempts(rows), pronoun(rows), strings.Join(dedupe(tagsOf(f.hits, effectRows)), ", "))
			switch ack {
			case ackChanged:
				a.Sentence += fmt.Sprintf(", and the attempt that was acknowledged reports changing it again (%s)", comp.Value)
			case ackUnknown:
				a.Sentence += "; it was then acknowledged, and whether that attempt changed anything the proxy did not see"
			case ackNone:
				a.Sentence += "; no attempt was acknowledged: it ended " + completionOf(comp)
			}
			j.ev.AppliedTwice = append(j.ev.AppliedTwice, a)
		case ack == ackUnchanged || dupKey && ack != ackNone:
			a.Truth = "replayed"
			why := fmt.Sprintf("its reply says so (%s)", comp.Value)
			if ack != ackUnchanged {
				why = "a retry met the unique key the first commit wrote (duplicate key)"
			}
			a.Sentence = fmt.Sprintf("operation %s (invoked at history event %d): %s; the acknowledged retry changed nothing, %s: a replay, not a second application", id, f.invoke, cut, why)
			j.ev.Replays = append(j.ev.Replays, a)
		case ack != ackNone || rows+unseen >= 2:
			a.Truth = "committed"
			what := ackedAfter(comp) + ", and what " + laterAttempt(comp) + " changed neither its reply nor the final state shows"
			if ack == ackNone {
				what = "none of its attempts was acknowledged (it ended " + completionOf(comp) + "), and what the other commits changed their replies do not show"
			}
			a.Sentence = fmt.Sprintf("operation %s (invoked at history event %d): %s; %s: a second application is possible, not proven", id, f.invoke, cut, what)
			j.ev.CommittedTwice = append(j.ev.CommittedTwice, a)
		}
	}
}

// tagsOf lists the replies of the applied cuts of effect eff.
func tagsOf(hits []hit, eff effect) []string {
	var out []string
	for _, h := range hits {
		if h.e.Truth == "applied" && h.e.effect() == eff {
			out = append(out, proof(h.e))
		}
	}
	return out
}

// dedupe keeps the first of each string, in order.
func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func attempts(n int) string {
	if n == 1 {
		return "an attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

func pronoun(n int) string {
	if n == 1 {
		return "its commit"
	}
	return "their commits"
}

// ackedAfter says how an operation that a cut met came to be acknowledged: "retried"
// only when the history records the attempts before the acknowledged one. A program
// that retries inside its own code, or goes on after a cut, records none; then the
// sentence says that the history does not show a retry.
func ackedAfter(comp *histories.Op) string {
	if comp != nil && len(comp.Failed) > 0 {
		return fmt.Sprintf("it was retried and acknowledged (%d earlier attempt(s) recorded)", len(comp.Failed))
	}
	return "it was acknowledged afterwards, though the history records no other attempt"
}

// laterAttempt names what came after the cut: the retry, when the history records one.
func laterAttempt(comp *histories.Op) string {
	if comp != nil && len(comp.Failed) > 0 {
		return "the retry"
	}
	return "the operation after the cut"
}

// completionOf names how an operation ended: ok, fail, info, or open.
func completionOf(op *histories.Op) string {
	if op == nil {
		return "open"
	}
	return op.Type.String()
}

// disagree says where the checker's verdict and the ground truth differ.
func (j *join) disagree(verdictInvalid bool) {
	ev := j.ev
	if len(ev.AppliedTwice) > 0 && !verdictInvalid {
		ev.Disagreements = append(ev.Disagreements, fmt.Sprintf("the ground truth proves %d operation(s) applied more than once, but the checker found the history valid: the duplicates left no trace it could see", len(ev.AppliedTwice)))
	}
	if verdictInvalid && len(ev.AppliedTwice) == 0 && len(ev.CommittedTwice) == 0 && ev.Joined > 0 {
		ev.Disagreements = append(ev.Disagreements, "the checker found the history invalid, but the proxy's ground truth proves no operation applied more than once: the cause is not established by the faults injected")
	}
}

// truth is the ground truth the workload's final state is reconciled with.
func (j *join) truth() Truth {
	var t Truth
	for _, id := range j.order {
		for _, h := range j.facts[id].hits {
			if h.e.Truth != "applied" {
				continue
			}
			t.Applied = append(t.Applied, id)
			switch h.e.effect() {
			case effectRows:
				t.Proven++
			case effectUnknown:
				t.Committed++
			}
		}
	}
	return t
}

// saw says what error the client saw in the attempt a fault hit.
func saw(s *Span) string {
	if s.Err == "" {
		return "the history does not say what error the client saw"
	}
	return fmt.Sprintf("the client saw %q (%s)", s.Err, s.Class)
}
