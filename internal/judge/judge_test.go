package judge_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/workloads/budget"
)

// budgetDir writes a run directory of a budget of 10: decrement 0-0 applied, 0-1 cut
// by the proxy after the server committed it and retried to an applied ok, and a final
// read of balance; check.json with the final state the run read.
func budgetDir(t *testing.T, balance int64) string {
	t.Helper()
	dir := t.TempDir()
	hdr := histories.Header{Workload: "budget", Model: "budget", Store: "postgres", Seed: 1, Params: map[string]json.RawMessage{"budget": histories.Value(10)}}
	applied := histories.Value(map[string]any{"applied": true, "balance": 9})
	ops := []histories.Op{
		{Time: 10, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-0", Conn: "c1"},
		{Time: 20, Process: 0, Type: histories.OK, F: "decrement", OpID: "0-0", Value: applied},
		{Time: 30, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-1", Conn: "c1"},
		{Time: 90, Process: 0, Type: histories.OK, F: "decrement", OpID: "0-1", Value: applied, Attempt: 2,
			Failed: []histories.FailedAttempt{{Conn: "c1", Start: 30, End: 50, Error: "conn closed", Class: "unknown"}}},
		{Time: 100, Process: 1, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)},
		{Time: 110, Process: 1, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: histories.Value(map[string]int64{"balance": balance})},
	}
	if err := rundir.WriteHistory(dir, hdr, ops); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	lines := []rundir.FaultLine{rundir.EventLine(toxics.Event{Time: at, Conn: "c1", Protocol: "postgres", Kind: toxics.CommitCut, Truth: toxics.Applied, Statement: "commit", Tag: "UPDATE 1"}, 40)}
	b, err := rundir.MarshalFaults(lines)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.FaultsFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	bal := balance
	final, _ := json.Marshal(budget.Final{Budget: 10, Applied: 2, Balance: &bal})
	if err := rundir.WriteCheck(dir, rundir.Check{Limits: rundir.Limits{Timeout: time.Minute}, Proxied: true, Final: final}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The judge reads the directory alone: the verdict, the proxy's event joined to the
// attempt whose span holds it, and the final state held to the ground truth.
func TestDir(t *testing.T) {
	// Two acknowledged decrements and a cut that changed a row: a fall of 3 is what
	// the ground truth accounts for.
	j, err := judge.Dir(context.Background(), budgetDir(t, 7), judge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := j.Results
	if r.Evidence == nil || r.Evidence.Events != 1 || r.Evidence.Joined != 1 || len(r.Evidence.Ambiguous) != 1 || r.Evidence.Ambiguous[0].OpID != "0-1" {
		t.Fatalf("evidence %+v: want the event joined to 0-1's cut attempt", r.Evidence)
	}
	if r.Faults.ByKind["commit-cut"] != 1 || r.Faults.ByTruth["applied"] != 1 || r.Faults.Commits == nil || r.Faults.Commits.ChangedRows != 1 {
		t.Errorf("fault counts %+v", r.Faults)
	}
	if r.Ops != (results.OpCounts{Invoked: 3, OK: 3}) {
		t.Errorf("ops %+v", r.Ops)
	}
	if j.Limits.Timeout != time.Minute || j.RunLimits == nil {
		t.Errorf("limits %v (the run's %v), want check.json's minute", j.Limits, j.RunLimits)
	}
	if _, other := j.OtherLimits(); other {
		t.Errorf("the run's own limits are said to be other ones")
	}
	if f, ok := r.Final.(budget.Final); !ok || *f.Balance != 7 {
		t.Errorf("final %#v", r.Final)
	}
	if len(r.Evidence.Disagreements) != 0 {
		t.Errorf("a fall of 3 is what 2 acknowledged and 1 proven cut account for: %v", r.Evidence.Disagreements)
	}

	// A balance that fell by 5: the final state disagrees with the ground truth.
	j, err = judge.Dir(context.Background(), budgetDir(t, 5), judge.Options{Limits: &rundir.Limits{Timeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if d := j.Results.Evidence.Disagreements; len(d) != 1 || !strings.Contains(d[0], "the balance fell by 5") {
		t.Errorf("disagreements %v", d)
	}
	if s, other := j.OtherLimits(); !other || !strings.Contains(s, "timeout 1s") || !strings.Contains(s, "timeout 1m0s") {
		t.Errorf("other limits: %q, %v", s, other)
	}
	if j.Results.Verdict != checker.Valid && j.Results.Verdict != checker.Invalid {
		t.Errorf("verdict %v: %s", j.Results.Verdict, j.Results.Summary)
	}
}

// Figures of a recorded history: an operation never completed is unknown, reasons are
// the attempts' classes, workers the most operations in flight.
func TestFigures(t *testing.T) {
	ops := []histories.Op{
		{Time: 0, Process: 0, Type: histories.Invoke, F: "apply", OpID: "0-0"},
		{Time: 5, Process: 1, Type: histories.Invoke, F: "apply", OpID: "1-0"},
		{Time: 10, Process: 0, Type: histories.Fail, F: "apply", OpID: "0-0", Attempt: 3,
			Failed: []histories.FailedAttempt{{Start: 0, End: 2, Class: "conflict"}, {Start: 3, End: 5}, {Start: 6, End: 10, Class: "definite"}}},
		{Time: 20, Process: 2, Type: histories.Invoke, F: "apply", OpID: "2-0"},
		{Time: int64(2 * time.Second), Process: 2, Type: histories.OK, F: "apply", OpID: "2-0", Attempt: 2},
	}
	var r results.Results
	judge.Figures(&r, ops, 0)
	if r.Outcomes.Unknown.Ops != 1 || r.Outcomes.Exhausted.Ops != 1 || r.Outcomes.Succeeded.Ops != 1 || r.Outcomes.Deadline.Ops != 0 {
		t.Errorf("outcomes %+v", r.Outcomes)
	}
	want := map[string]int64{"conflict": 1, judge.ReasonUnclassified: 1, judge.ReasonUnrecorded: 1}
	if len(r.Retries.ByReason) != len(want) || r.Retries.Total != 3 {
		t.Errorf("retries %+v, want %v", r.Retries, want)
	}
	for k, v := range want {
		if r.Retries.ByReason[k] != v {
			t.Errorf("retries by reason %v, want %v", r.Retries.ByReason, want)
		}
	}
	if r.Errors["definite"] != 1 || len(r.Errors) != 1 {
		t.Errorf("errors %v: want the last attempt's class", r.Errors)
	}
	if r.Workers != 2 {
		t.Errorf("workers %d, want 2 (0-0 and 1-0 in flight at once)", r.Workers)
	}
	if r.DurationS != 2 || r.Throughput != 1 || len(r.PerSecond) != 3 || r.PerSecond[2] != 1 {
		t.Errorf("duration %v, throughput %v, per second %v", r.DurationS, r.Throughput, r.PerSecond)
	}
}

// Figures of a history as indoubt run records it: each failed attempt's reason, how
// each operation ended and the conflicts its store resolved, so that the directory
// alone gives the run's figures.
func TestFiguresAsRecorded(t *testing.T) {
	dial := histories.FailedAttempt{Class: "definite", Reason: "dial"}
	timeout := histories.FailedAttempt{Class: "unknown", Reason: "timeout"}
	ops := []histories.Op{
		{Time: 0, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-0"},
		{Time: 1, Process: 0, Type: histories.OK, F: "decrement", OpID: "0-0", Attempt: 2, Failed: []histories.FailedAttempt{dial}, Conflicts: 3},
		{Time: 2, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-1"},
		{Time: 3, Process: 0, Type: histories.Fail, F: "decrement", OpID: "0-1", Attempt: 2, Failed: []histories.FailedAttempt{dial}, Ended: histories.EndedNoEffect},
		{Time: 4, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-2"},
		{Time: 5, Process: 0, Type: histories.Fail, F: "decrement", OpID: "0-2", Attempt: 2, Failed: []histories.FailedAttempt{dial, dial}, Ended: histories.EndedDeadline},
		{Time: 6, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-3"},
		{Time: 7, Process: 0, Type: histories.Fail, F: "decrement", OpID: "0-3", Attempt: 1, Failed: []histories.FailedAttempt{dial}, Ended: histories.EndedExhausted},
		{Time: 8, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-4"},
		{Time: 9, Process: 0, Type: histories.Info, F: "decrement", OpID: "0-4", Attempt: 2, Failed: []histories.FailedAttempt{timeout, dial}, Ended: histories.EndedDeadline, Conflicts: 1},
	}
	var r results.Results
	judge.Figures(&r, ops, 0)
	o := r.Outcomes
	if o.Succeeded.Ops != 1 || o.NonRetryable.Ops != 1 || o.Deadline.Ops != 1 || o.Exhausted.Ops != 1 || o.Unknown.Ops != 1 {
		t.Errorf("outcomes %+v: want one of each, as the completions say they ended", o)
	}
	if got, want := r.Errors, map[string]int64{histories.EndedNoEffect: 1, "dial": 3}; len(got) != len(want) || got["dial"] != 3 || got[histories.EndedNoEffect] != 1 {
		t.Errorf("errors %v, want %v (the reasons, not the classes)", got, want)
	}
	if got := r.Retries.ByReason; len(got) != 2 || got["dial"] != 3 || got["timeout"] != 1 {
		t.Errorf("retries by reason %v, want dial 3, timeout 1", got)
	}
	if b := r.Retries.ByOutcome; b.OK != 1 || b.Fail != 1 || b.Deadline != 2 || b.Info != 0 || r.Retries.Total != 4 {
		t.Errorf("retries by outcome %+v, total %d: want the deadline's two apart", b, r.Retries.Total)
	}
	if r.Conflicts != 4 {
		t.Errorf("conflicts %d, want 4", r.Conflicts)
	}
}
