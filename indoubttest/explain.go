package indoubttest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// appWorkload is results.json's workload for a test's own code (schemas/results.schema.json).
const appWorkload = "app"

// fill makes results.json of a test from the judgement of its run directory (package
// judge, as indoubt run and indoubt check judge theirs) and the figures of its history.
// Its mechanism names the test, which report.html's title shows (report.Subject).
func fill(j *judge.Judgement, srv *Server, specs []string, dir, test string) *results.Results {
	h, r := j.Header, j.Results
	r.Workload, r.Store, r.Mechanism = appWorkload, h.Store, "test "+test+" (indoubttest), checked as "+h.Model
	r.Retry, r.Seed, r.RunDir = appWorkload, h.Seed, dir
	r.Server = "none (a recorder without a server)"
	r.Faults.Schedule = specs
	if srv != nil {
		r.Server = fmt.Sprintf("%s at %s (database %s), through the fault proxy at %s", srv.Store, srv.DirectAddr, srv.Database, srv.Addr)
		r.StartedAt = srv.start
	}
	judge.Figures(r, j.Ops, 0)
	r.Trim(-1)
	return r
}

// explain is the report's text: the verdict with the checker's anomalies, each followed
// by the proxy's claims about its operations (report.WriteVerdict, as indoubt run
// prints it), then what the helper knows beside it: operations left unknown by the
// worst of their attempts, faults no operation could be tied to, no final state, what
// became of the API requests a cut hit (the judge's evidence.requests), the
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
	for _, n := range report.IsolationNotes(r, ops) {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	for _, n := range notes(m, r, ops, proxied) {
		fmt.Fprintf(&b, "%s\n", n)
	}
	if r.Evidence != nil {
		// What became of the API requests a cut hit, as the judge found it from the
		// run directory (results.json's evidence.requests).
		for _, n := range r.Evidence.Requests {
			fmt.Fprintf(&b, "%s\n", n)
		}
	}
	if proxied && r.Verdict != checker.Valid {
		fmt.Fprintf(&b, "fault seed %d; the same fault decisions again: %s\n", sd.n, reproduce(tb, sd))
		if l := listedFaults(events); l != "" {
			fmt.Fprintf(&b, "%s\n", l)
		}
	}
	if r.Verdict != checker.Valid || keep {
		fmt.Fprintf(&b, "run directory: %s (re-check: indoubt check %s)", r.RunDir, r.RunDir)
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
		return histories.IsFinalReadID(op.OpID) && op.Type == histories.OK
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
