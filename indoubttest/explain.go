package indoubttest

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// appWorkload is results.json's workload for a test's own code (schemas/results.schema.json).
const appWorkload = "app"

// fill makes results.json of a test from what its run directory holds: the checker's
// result, the history's operations and attempts, and the proxy's events joined to them
// by package evidence, as indoubt run and indoubt check --faults join them.
func fill(h *histories.Header, ops []histories.Op, res checker.Result, evs []evidence.FaultEvent, srv *Server, specs []string, dir string) *results.Results {
	r := &results.Results{
		SchemaVersion: results.SchemaVersion, Verdict: res.Verdict, Summary: res.Summary,
		Workload: appWorkload, Store: h.Store, Mechanism: "the code under test (indoubttest), checked as " + h.Model,
		Retry: appWorkload, Seed: h.Seed, Anomalies: res.Anomalies, RunDir: dir,
		Errors: map[string]int64{}, PerSecond: []int64{}, Server: "none (a recorder without a server)",
		Faults:     results.FaultCounts{Schedule: specs, ByKind: map[string]int64{}, ByTruth: map[string]int64{}},
		Retries:    results.RetryCounts{ByReason: map[string]int64{}},
		LostWrites: res.LostWrites,
	}
	if r.Anomalies == nil {
		r.Anomalies = []checker.Anomaly{}
	}
	if srv != nil {
		r.Proxied = true
		r.Server = fmt.Sprintf("%s at %s (database %s), through the fault proxy at %s", srv.Store, srv.DirectAddr, srv.Database, srv.Addr)
		r.StartedAt = srv.start
	}
	figures(r, ops)
	for _, e := range evs {
		r.Faults.ByKind[e.Kind]++
		r.Faults.ByTruth[e.Truth]++
	}
	if srv != nil {
		commits := evidence.Tally(evs)
		r.Faults.Commits = &commits
		r.Evidence, _ = evidence.Join(evs, evidence.SpansFromHistory(ops, evs), ops, nil, res.Verdict == checker.Invalid)
	}
	r.Trim(-1)
	return r
}

// figures counts the operations, their attempts and latencies, as results.json has
// them for a run.
func figures(r *results.Results, ops []histories.Op) {
	all, _ := histories.Pair(ops) // the checker paired them already
	var lat []float64
	workers := map[string]bool{}
	var end int64
	for _, o := range all {
		inv, c := o.Invoke, o.Complete
		r.Ops.Invoked++
		final := strings.HasPrefix(inv.OpID, "final-")
		if c != nil {
			end = max(end, c.Time)
			switch c.Type {
			case histories.OK:
				r.Ops.OK++
			case histories.Fail:
				r.Ops.Fail++
			case histories.Info:
				r.Ops.Info++
			}
		}
		if final {
			continue
		}
		if w, _, ok := strings.Cut(inv.OpID, "-"); ok {
			workers[w] = true
		}
		if c == nil {
			r.Outcomes.Deadline.Ops++
			r.Outcomes.Deadline.Attempts++
			continue
		}
		lat = append(lat, float64(c.Time-inv.Time)/1e6)
		sec := int(c.Time / 1e9)
		for len(r.PerSecond) <= sec {
			r.PerSecond = append(r.PerSecond, 0)
		}
		r.PerSecond[sec]++
		attempts := int64(len(c.Failed))
		if c.Type == histories.OK || attempts == 0 {
			attempts++
		}
		retried := c.Failed
		if c.Type != histories.OK && len(retried) > 0 {
			retried = retried[:len(retried)-1] // the last attempt was not retried
		}
		for _, a := range retried {
			r.Retries.ByReason[cmpOr(a.Class, "unknown")]++
		}
		n := int64(len(retried))
		r.Retries.Total += n
		var out *results.OutcomeCount
		switch c.Type {
		case histories.OK:
			r.Retries.ByOutcome.OK += n
			out = &r.Outcomes.Succeeded
		case histories.Fail:
			r.Retries.ByOutcome.Fail += n
			out = &r.Outcomes.NonRetryable
			if attempts > 1 {
				out = &r.Outcomes.Exhausted
			}
		default:
			r.Retries.ByOutcome.Info += n
			out = &r.Outcomes.Unknown
		}
		out.Ops++
		out.Attempts += attempts
		if c.Type != histories.OK {
			reason := "unknown"
			if k := len(c.Failed); k > 0 {
				reason = cmpOr(c.Failed[k-1].Class, "unknown")
			}
			r.Errors[reason]++
			if out.Errors == nil {
				out.Errors = map[string]int64{}
			}
			out.Errors[reason]++
		}
	}
	r.Workers = max(len(workers), 1)
	r.DurationS = float64(end) / 1e9
	if r.DurationS > 0 {
		r.Throughput = float64(r.Ops.OK+r.Ops.Fail+r.Ops.Info) / r.DurationS
	}
	sort.Float64s(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return math.Round(lat[min(len(lat)-1, int(p*float64(len(lat))))]*100) / 100
	}
	r.LatencyMs = results.Latency{P50: pct(0.5), P95: pct(0.95), P99: pct(0.99), Max: pct(1)}
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// explain is the report's text: the verdict with the checker's anomalies, each followed
// by the proxy's claims about its operations (report.WriteVerdict, as indoubt run
// prints it), then what the helper knows beside it: operations left unknown by the
// worst of their attempts, faults no operation could be tied to, no final state, the
// fault seed and the command that reproduces it, the commit faults met as listed
// faults, the run directory.
func explain(tb testing.TB, m Model, r *results.Results, ops []histories.Op, sd seed, events []toxics.Event, proxied, keep bool) string {
	var b strings.Builder
	switch r.Verdict {
	case checker.Valid:
		fmt.Fprintf(&b, "indoubttest: %s check passed\n", m.name)
	case checker.Invalid:
		fmt.Fprintf(&b, "indoubttest: %s check failed\n", m.name)
	default:
		fmt.Fprintf(&b, "indoubttest: %s check could not decide\n", m.name)
	}
	report.WriteVerdict(&b, r)
	for _, n := range notes(m, r, ops, proxied) {
		fmt.Fprintf(&b, "%s\n", n)
	}
	for _, n := range apiNotes(ops, events) {
		fmt.Fprintf(&b, "%s\n", n)
	}
	if proxied && r.Verdict != checker.Valid {
		fmt.Fprintf(&b, "fault seed %d; the same fault decisions again: %s\n", sd.n, reproduce(tb, sd))
		if l := listedFaults(events); l != "" {
			fmt.Fprintf(&b, "%s\n", l)
		}
	}
	if r.Verdict != checker.Valid || keep {
		fmt.Fprintf(&b, "run directory: %s (re-check: indoubt check --faults %s/faults.jsonl %s/history.jsonl)", r.RunDir, r.RunDir, r.RunDir)
	}
	return strings.TrimRight(b.String(), "\n")
}

// notes says what the checker and the proxy cannot: which operations ended unknown
// because of an earlier attempt, the faults no operation could be tied to, a missing
// final read, and what the faults that fired can and cannot show.
func notes(m Model, r *results.Results, ops []histories.Op, proxied bool) []string {
	var out []string
	if ids := worstOfAttempts(ops); len(ids) > 0 {
		out = append(out, fmt.Sprintf("unknown, not failed: %d %s (%s) had an attempt whose outcome was unknown (its connection was lost after the request was sent) before a last attempt that failed definitely; the earlier one may have applied, so Op.Done recorded each as unknown (call op.Fail when your code knows that none applied)",
			len(ids), plural(len(ids), "operation", "operations"), list(ids)))
	}
	if (m.name == "budget" || m.name == "counter") && !slices.ContainsFunc(ops, func(op histories.Op) bool {
		return strings.HasPrefix(op.OpID, "final-") && op.Type == histories.OK
	}) {
		read := `rec.Read("read", indoubttest.Balance(n))`
		if m.name == "counter" {
			read = `rec.Read("read", indoubttest.Count(n))`
		}
		out = append(out, fmt.Sprintf("no final state: an operation applied twice leaves no trace in the acknowledgements alone; after the workers are done, record the final state with %s", read))
	}
	if !proxied {
		return out
	}
	c := r.Faults.Commits
	switch {
	case c == nil || c.Committed+c.NotCommitted == 0:
		out = append(out, `faults: no commit fault fired: arm some (srv.Arm("commit-cut:0.2")) to test your retries`)
		return out
	default:
		out = append(out, "faults: "+c.String())
	}
	if e := r.Evidence; e != nil && e.Events > e.Joined {
		out = append(out, fmt.Sprintf("faults not tied to an operation: %d of %d: no attempt recorded on their connection, and several were in flight when they fired (name each attempt's connection with op.Conn, and report failed attempts with op.Retried)", e.Events-e.Joined, e.Events))
	}
	if c.Committed == 0 && c.NotCommitted > 0 {
		out = append(out, "a drop never applied, so any retry of it is safe: these faults cannot tell a naive retry from an idempotent one (arm commit-cut for that)")
	}
	return out
}

// worstOfAttempts lists the operations that ended unknown although their last attempt
// failed definitely: an earlier attempt's outcome was unknown.
func worstOfAttempts(ops []histories.Op) []string {
	var ids []string
	for _, op := range ops {
		if !op.IsClient() || op.Type != histories.Info || len(op.Failed) < 2 {
			continue
		}
		last := op.Failed[len(op.Failed)-1]
		if last.Class == workloads.ClassUnknown.String() {
			continue
		}
		if slices.ContainsFunc(op.Failed[:len(op.Failed)-1], func(a histories.FailedAttempt) bool { return a.Class == workloads.ClassUnknown.String() }) {
			ids = append(ids, op.OpID)
		}
	}
	return ids
}

// list shows a few ids.
func list(ids []string) string {
	if len(ids) > 5 {
		return strings.Join(ids[:5], ", ") + fmt.Sprintf(" and %d more", len(ids)-5)
	}
	return strings.Join(ids, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
