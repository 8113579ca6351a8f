package checker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// ExactlyOnceModel names the exactly-once model in a history's header and in Options.Model.
const ExactlyOnceModel = "exactly-once"

// ExactlyOnceState is the final state an exactly-once history's final read returns: for
// every effect present, its op id and how many times it is present. An op id that is
// not a key is absent (count 0). A read's value is this map as a JSON object,
// {"3-41":1,"7-2":2}; a store that keeps one row per effect, tagged with its op id,
// gives it with SELECT tag, count(*) ... GROUP BY tag.
type ExactlyOnceState map[string]int64

// Exactly-once operations, in a history:
//
//	apply  invoke with op_id (the identity of the effect: the idempotency key, the
//	       row's tag) and any value; then ok (applied), fail (certainly not applied),
//	       info or no completion (unknown)
//	read   invoke, then ok with an ExactlyOnceState; fail or info reads carry nothing
//
// Several apply operations may share an op id (a client that records every attempt as
// an operation): they are then one effect, to be present once if any of them is ok.
// Per op id x, with n the count the final read gives:
//
//	some apply of x ok                           n == 1  (0: lost; >1: duplicate)
//	none ok, some info or never completed        n <= 1  (>1: duplicate)
//	every apply of x failed                      n == 0  (fail-applied)
//	no apply of x at all                         n == 0  (phantom)
//
// The final state is read by a read that begins after every apply ended (after its
// completion, or its invocation when it never completed): each such ok read is checked,
// and a history without one cannot be checked (Options.Final supplies the final state
// instead). Reads that overlap applies are not judged: the model has no order among
// effects to hold them to. The check is a count per op id, O(n log n) for the sort of
// the anomalies; it needs no search, because the op ids are independent of one another.

// errNoFinalRead is the error of a history whose final state nobody read.
var errNoFinalRead = errors.New("no final read: an ok read that begins after every other operation ended (give the final state with --final, or Options.Final)")

// exactlyOnceEffect gathers the operations of one op id.
type exactlyOnceEffect struct {
	id                 string
	ok, failed, unsure int
	ops                []*pairedOp
}

// want says what the final count of the effect may be, in words and as a range.
func (e *exactlyOnceEffect) want() (lo, hi int64) {
	switch {
	case e.ok > 0:
		return 1, 1
	case e.unsure > 0:
		return 0, 1
	}
	return 0, 0
}

func (e *exactlyOnceEffect) events() []int64 {
	var ev []int64
	for _, o := range e.ops {
		ev = append(ev, o.events()...)
	}
	return ev
}

// CheckExactlyOnce decides whether the final state of ops, an exactly-once history,
// holds every acknowledged effect exactly once, no failed one, and every unknown one at
// most once, and names every duplicate and loss by op id (anomaly kinds: duplicate,
// lost, fail-applied, phantom). See ExactlyOnceState for the read value and the package
// documentation of histories for the history shape. The error reports a history that
// cannot be checked: an apply without an op id, an unknown function, a read value that
// is not a state, no final read.
func CheckExactlyOnce(ctx context.Context, ops []histories.Op) (Result, error) {
	if ctx.Err() != nil {
		return interrupted(ExactlyOnceModel, ctx.Err()), nil
	}
	all, err := pairOps(ExactlyOnceModel, ops, "apply", "read")
	if err != nil {
		return Result{}, err
	}
	effects, stopped, err := exactlyOnceEffects(ctx, all)
	if stopped {
		return interrupted(ExactlyOnceModel, ctx.Err()), nil
	}
	if err != nil {
		return Result{}, err
	}
	finals := finalReads(all, "read")
	if len(finals) == 0 {
		return Result{}, fmt.Errorf("exactly-once history: %w", errNoFinalRead)
	}
	var found exactlyOnceFindings
	var last ExactlyOnceState
	for _, r := range finals {
		st, err := exactlyOnceState(r)
		if err != nil {
			return Result{}, err
		}
		found.judge(r, st, effects)
		last = st
	}
	return exactlyOnceResult(effects, last, len(finals), found), nil
}

// exactlyOnceEffects gathers the apply operations of all by op id. stopped says ctx
// ended first; the error reports an apply without an op id.
func exactlyOnceEffects(ctx context.Context, all []*pairedOp) (effects map[string]*exactlyOnceEffect, stopped bool, err error) {
	effects = map[string]*exactlyOnceEffect{}
	for i, o := range all {
		if i%checkEvery == 0 && ctx.Err() != nil {
			return nil, true, nil
		}
		if o.inv.F != "apply" {
			continue
		}
		if o.inv.OpID == "" {
			return nil, false, fmt.Errorf("history index %d: apply without op_id: the op id is the identity of the effect the final state counts", o.inv.Index)
		}
		e := effects[o.inv.OpID]
		if e == nil {
			e = &exactlyOnceEffect{id: o.inv.OpID}
			effects[o.inv.OpID] = e
		}
		e.ops = append(e.ops, o)
		switch o.outcome {
		case histories.OK:
			e.ok++
		case histories.Fail:
			e.failed++
		default:
			e.unsure++
		}
	}
	return effects, false, nil
}

// exactlyOnceState decodes the state a final read r returned; a value that is not a
// state, or gives a negative count, makes the history uncheckable.
func exactlyOnceState(r *pairedOp) (ExactlyOnceState, error) {
	var st ExactlyOnceState
	if err := json.Unmarshal(r.ret.Value, &st); err != nil || st == nil {
		return nil, fmt.Errorf("history index %d: read value %q is not an exactly-once state (an object of op id to count): %v", r.ret.Index, r.ret.Value, err)
	}
	for id, n := range st {
		if n < 0 {
			return nil, fmt.Errorf("history index %d: read gives op id %q a negative count %d", r.ret.Index, id, n)
		}
	}
	return st, nil
}

// exactlyOnceFindings collects the anomalies of every final read.
type exactlyOnceFindings struct{ findings }

// judge holds the state st that the final read r returned to every effect, and names
// each op id present though nothing applied it.
func (f *exactlyOnceFindings) judge(r *pairedOp, st ExactlyOnceState, effects map[string]*exactlyOnceEffect) {
	readEv := []int64{r.inv.Index, r.ret.Index}
	for _, id := range exactlyOnceOrder(st, effects) {
		n := st[id]
		e := effects[id]
		if e == nil {
			f.add(Anomaly{Kind: "phantom", Ops: readEv, Explanation: fmt.Sprintf(
				"op id %s is present %s in the final state (read at index %d), but no operation applied it", id, times(n), r.ret.Index)})
			continue
		}
		lo, hi := e.want()
		if n >= lo && n <= hi {
			continue
		}
		ev := append(e.events(), readEv...)
		switch {
		case n > 1:
			f.add(Anomaly{Kind: "duplicate", Ops: ev, Explanation: fmt.Sprintf(
				"op id %s is present %s in the final state (read at index %d): %s, its effect applied more than once", id, times(n), r.ret.Index, e.told())})
		case n == 0:
			f.add(Anomaly{Kind: "lost", Ops: ev, Explanation: fmt.Sprintf(
				"op id %s is absent from the final state (read at index %d): %s, its effect was lost", id, r.ret.Index, e.told())})
		default:
			f.add(Anomaly{Kind: "fail-applied", Ops: ev, Explanation: fmt.Sprintf(
				"op id %s is present in the final state (read at index %d): %s, yet its effect applied", id, r.ret.Index, e.told())})
		}
	}
}

// exactlyOnceOrder lists the op ids a final state must be judged on: every applied one,
// in the order the history first applied them, then the phantoms present in st, by id,
// so that anomalies read in history order.
func exactlyOnceOrder(st ExactlyOnceState, effects map[string]*exactlyOnceEffect) []string {
	ids := make([]string, 0, len(st)+len(effects))
	for id, n := range st {
		if effects[id] == nil && n > 0 {
			ids = append(ids, id)
		}
	}
	for id := range effects {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int {
		ea, eb := effects[a], effects[b]
		switch {
		case ea != nil && eb != nil:
			return cmp.Compare(ea.ops[0].inv.Index, eb.ops[0].inv.Index)
		case ea != nil:
			return -1
		case eb != nil:
			return 1
		}
		return strings.Compare(a, b)
	})
	return ids
}

// exactlyOnceResult builds the Result: the effects counted by outcome (unknown ones also
// by whether the last final state holds them), and a summary led by the anomaly a
// reader needs first.
func exactlyOnceResult(effects map[string]*exactlyOnceEffect, last ExactlyOnceState, finals int, found exactlyOnceFindings) Result {
	var ok, failed, unsure, unsurePresent int
	for id, e := range effects {
		switch {
		case e.ok > 0:
			ok++
		case e.unsure > 0:
			unsure++
			if last[id] > 0 {
				unsurePresent++
			}
		default:
			failed++
		}
	}
	d := map[string]json.RawMessage{
		"acknowledged":    histories.Value(ok),
		"failed":          histories.Value(failed),
		"unknown":         histories.Value(unsure),
		"unknown_present": histories.Value(unsurePresent),
		"final_reads":     histories.Value(finals),
		"anomalies":       histories.Value(found.found),
	}
	res := Result{Checker: ExactlyOnceModel, Anomalies: found.anomalies, Details: d}
	if found.found == 0 {
		res.Verdict = Valid
		res.Anomalies = []Anomaly{}
		res.Summary = fmt.Sprintf("exactly once: %d acknowledged effects present once each, %d failed ones absent, %d unknown ones at most once (%d of them present)",
			ok, failed, unsure, unsurePresent)
		return res
	}
	res.Verdict = Invalid
	res.Summary = exactlyOnceSummary(found.anomalies)
	return res
}

// exactlyOnceSummary counts the listed anomalies by kind and quotes the most pressing.
func exactlyOnceSummary(anomalies []Anomaly) string {
	kinds := map[string]int{}
	for _, a := range anomalies {
		kinds[a.Kind]++
	}
	var parts []string
	for _, k := range []string{"duplicate", "lost", "fail-applied", "phantom"} {
		if kinds[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		}
	}
	first := slices.MinFunc(anomalies, func(a, b Anomaly) int { return cmp.Compare(kindRank(a.Kind), kindRank(b.Kind)) })
	return fmt.Sprintf("not exactly once (%s): %s", strings.Join(parts, ", "), first.Explanation)
}

// kindRank orders exactly-once anomalies by how much a reader needs them first.
func kindRank(k string) int {
	return slices.Index([]string{"duplicate", "lost", "fail-applied", "phantom"}, k)
}

// told says what the client was told about an effect, in words.
func (e *exactlyOnceEffect) told() string {
	if len(e.ops) == 1 {
		switch {
		case e.ok > 0:
			return "its apply was acknowledged"
		case e.failed > 0:
			return "its apply failed"
		}
		return "its apply ended unknown"
	}
	var parts []string
	for _, c := range []struct {
		n    int
		what string
	}{{e.ok, "acknowledged"}, {e.unsure, "unknown"}, {e.failed, "failed"}} {
		if c.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c.n, c.what))
		}
	}
	return fmt.Sprintf("its %d applies were %s", len(e.ops), strings.Join(parts, ", "))
}

// times writes a count for a sentence: once, twice, n times.
func times(n int64) string {
	switch n {
	case 1:
		return "once"
	case 2:
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
