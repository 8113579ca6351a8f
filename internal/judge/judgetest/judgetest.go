// Package judgetest holds the test of the promise every run directory makes: judged
// again from its files alone, it gives its results.json.
package judgetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// Judged is what the judge decides of a run directory, as results.json holds it: every
// section but what only the run measured (its length, throughput, latency, workers).
type Judged struct {
	Verdict       checker.Verdict        `json:"verdict"`
	ExitCode      int                    `json:"exit_code"`
	Summary       string                 `json:"summary"`
	AnomalyCount  int                    `json:"anomaly_count"`
	AnomalyKinds  map[string]int         `json:"anomaly_kinds"`
	Anomalies     []checker.Anomaly      `json:"anomalies"`
	LostWrites    []checker.LostWrite    `json:"lost_writes"`
	Txn           *results.TxnCheck      `json:"transactions"`
	Ops           results.OpCounts       `json:"ops"`
	ByKind        map[string]int64       `json:"by_kind"`
	ByTruth       map[string]int64       `json:"by_truth"`
	Commits       *results.CommitCounts  `json:"commits"`
	Evidence      *results.Evidence      `json:"evidence"`
	Final         json.RawMessage        `json:"final"`
	ProcessFaults []results.ProcessFault `json:"process_faults"`
	Partitions    []results.Partition    `json:"partitions"`
	SplitBrain    []results.SplitBrain   `json:"split_brain"`
	Leaders       *results.Leaders       `json:"leaders"`
	Proxied       bool                   `json:"proxied"`
	Outcomes      results.Outcomes       `json:"outcomes"`
	Retries       results.RetryCounts    `json:"retries"`
	Errors        map[string]int64       `json:"errors"`
	Conflicts     int64                  `json:"conflicts"`
	PerSecond     []int64                `json:"per_second"`
	TwoPhaseTx    *results.TxCounts      `json:"two_phase_transactions"`
}

// JudgedOf is the judged sections of r.
func JudgedOf(r *results.Results) Judged {
	final, _ := json.Marshal(r.Final)
	return Judged{
		Verdict: r.Verdict, ExitCode: r.Verdict.ExitCode(), Summary: r.Summary,
		AnomalyCount: r.AnomalyTotal(), AnomalyKinds: r.AnomalyKinds, Anomalies: r.Anomalies, LostWrites: r.LostWrites,
		Txn: r.Txn, Ops: r.Ops, ByKind: r.Faults.ByKind, ByTruth: r.Faults.ByTruth, Commits: r.Faults.Commits,
		Evidence: r.Evidence, Final: final, ProcessFaults: r.ProcessFaults, Partitions: r.Partitions,
		SplitBrain: r.SplitBrain, Leaders: r.Leaders, Proxied: r.Proxied,
		Outcomes: r.Outcomes, Retries: r.Retries, Errors: r.Errors, Conflicts: r.Conflicts, PerSecond: r.PerSecond,
		TwoPhaseTx: twoPhaseTx(r),
	}
}

// twoPhaseTx is r's two-phase transaction counts; nil without the section.
func twoPhaseTx(r *results.Results) *results.TxCounts {
	if r.TwoPhase == nil {
		return nil
	}
	tx := r.TwoPhase.Transactions
	return &tx
}

// Recheck judges the run directory dir again from its files alone, under the limits it
// names, and fails the test unless the judged sections of its results.json come back:
// verdict, exit code, summary, anomalies, lost writes, evidence, final state,
// timelines, counts and figures (outcomes, retries, errors, conflicts, completions per
// second, a two-phase run's transactions), unknown verdicts compared as any other. It returns the judgement.
func Recheck(tb testing.TB, dir string) *judge.Judgement {
	tb.Helper()
	run, err := rundir.ReadResults(dir)
	if err != nil {
		tb.Fatalf("recheck: %v", err)
	}
	j, err := judge.Dir(context.Background(), dir, judge.Options{})
	if err != nil {
		tb.Fatalf("recheck %s: %v", dir, err)
	}
	got := *j.Results
	got.Trim(rundir.MaxAnomalies(dir))
	want, have := JudgedOf(run), JudgedOf(&got)
	wb, _ := json.MarshalIndent(want, "", " ")
	hb, _ := json.MarshalIndent(have, "", " ")
	if string(wb) != string(hb) {
		if ranOut(run.Summary) != ranOut(got.Summary) {
			// A search bounded by wall time: the same bound on a machine under another
			// load may decide where the run could not, or the reverse.
			tb.Logf("recheck of %s under the run's limits (%s): %v (%s), the run %v (%s): a search that ran out of time", dir, j.Limits, got.Verdict, got.Summary, run.Verdict, run.Summary)
			return j
		}
		tb.Errorf("recheck of %s differs from its results.json:\n%s", dir, diff(string(wb), string(hb)))
	}
	return j
}

// ranOut reports whether a summary says the search ran out of its time or memory.
func ranOut(summary string) bool {
	return strings.Contains(summary, "timeout expired") || strings.Contains(summary, "memory bound ran out") || strings.Contains(summary, "ran out of time")
}

// diff shows the lines where the two texts part, the run's first.
func diff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	n := 0
	for i := 0; i < max(len(w), len(g)) && n < 20; i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("  results.json: " + a + "\n  recheck:      " + c + "\n")
			n++
		}
	}
	return b.String()
}
