package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/judge/judgetest"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// The run that lost its Redis account in a kill (persistence none) exits 1 naming the
// lost writes, and `indoubt check` of its history.jsonl, from the file alone, exits 1
// with the same anomalies and lost writes: the run directory is the evidence. No
// operation is acknowledged after the kill (the account is gone), so the run waits out
// --recovery-wait past --time.
func TestRecheckOfAKilledRunAgrees(t *testing.T) {
	t.Parallel()
	if err := runner.Available(runner.Redis); err != nil {
		servertest.SkipOrFail(t, err)
	}
	dir := t.TempDir()
	code, out, errs := invoke(t, "run", "--store", "redis", "--workload", "budget", "--persistence", "none", "--budget", "1000000000",
		"--workers", "4", "--time", "3s", "--fault", "kill@1s-2s", "--recovery-wait", "1s", "--out", dir, "--quiet", "--json")
	if code != 1 {
		t.Fatalf("run: exit %d, want 1\n%s%s", code, out, errs)
	}
	var run results.Results
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	if len(run.LostWrites) == 0 {
		t.Fatalf("the run names no lost write: %s", run.Summary)
	}
	code2, out2, errs2 := invoke(t, "check", "--json", filepath.Join(run.RunDir, "history.jsonl"))
	if code2 != code {
		t.Fatalf("check: exit %d, the run's %d\n%s%s", code2, code, out2, errs2)
	}
	var re checker.Result
	if err := json.Unmarshal([]byte(out2), &re); err != nil {
		t.Fatalf("check --json: %v\n%s", err, out2)
	}
	if re.Summary != run.Summary || len(re.Anomalies) < len(run.Anomalies) {
		t.Fatalf("check: %q with %d anomalies, the run: %q with %d", re.Summary, len(re.Anomalies), run.Summary, len(run.Anomalies))
	}
	for i, a := range run.Anomalies {
		if b := re.Anomalies[i]; a.Kind != b.Kind || a.Explanation != b.Explanation {
			t.Errorf("anomaly %d: check %s %q, the run %s %q", i, b.Kind, b.Explanation, a.Kind, a.Explanation)
		}
	}
	if len(re.LostWrites) != len(run.LostWrites) || re.LostWrites[0].Explanation != run.LostWrites[0].Explanation {
		t.Errorf("lost writes: check %+v, the run %+v", re.LostWrites, run.LostWrites)
	}
	if _, err := os.Stat(filepath.Join(run.RunDir, "report.html")); err != nil {
		t.Error(err)
	}
	recheckRunDir(t, &run, code)
	t.Logf("both: %s (%s lost)", run.Summary, strconv.Itoa(len(run.LostWrites)))
}

// recheckRunDir runs `indoubt check --json RUNDIR` and fails unless it exits as the run
// did and gives its results.json's judged sections, the process-fault timeline, the
// evidence and the final state with its disagreements included.
func recheckRunDir(t *testing.T, run *results.Results, code int) *results.Results {
	t.Helper()
	code2, out, errs := invoke(t, "check", "--json", run.RunDir)
	if code2 != code {
		t.Fatalf("check --json RUNDIR: exit %d, the run's %d\n%s%s", code2, code, out, errs)
	}
	var re results.Results
	if err := json.Unmarshal([]byte(out), &re); err != nil {
		t.Fatalf("check --json RUNDIR: %v\n%s", err, out)
	}
	want, _ := json.MarshalIndent(judgetest.JudgedOf(run), "", " ")
	got, _ := json.MarshalIndent(judgetest.JudgedOf(&re), "", " ")
	if string(want) != string(got) {
		t.Errorf("check --json RUNDIR:\n%s\nthe run's:\n%s", got, want)
	}
	return &re
}

// A counter run under commit cuts with the naive retry: its final state is reconciled
// with the proxy's truth. `indoubt check RUNDIR`, from the directory alone, gives the
// same disagreements, lost and extra increments.
func TestRecheckOfACounterRunReconcilesItsFinalState(t *testing.T) {
	t.Parallel()
	if err := runner.Available(runner.Postgres); err != nil {
		servertest.SkipOrFail(t, err)
	}
	dir := t.TempDir()
	code, out, errs := invoke(t, "run", "--store", "postgres", "--workload", "counter", "--retry", "naive",
		"--workers", "3", "--ops", "15", "--fault", "commit-cut:0.4", "--seed", "3", "--out", dir, "--quiet", "--json")
	if code != 0 && code != 1 {
		t.Fatalf("run: exit %d\n%s%s", code, out, errs)
	}
	var run results.Results
	if err := json.Unmarshal([]byte(out), &run); err != nil {
		t.Fatalf("run --json: %v\n%s", err, out)
	}
	if run.Final == nil || run.Final.Figures().Reconciliation == nil {
		t.Fatalf("the counter run has no reconciled final state: %s", out)
	}
	re := recheckRunDir(t, &run, code)
	a, b := run.Final.Figures().Reconciliation, re.Final.Figures().Reconciliation
	if b == nil || a.Lost != b.Lost || a.Extra != b.Extra || a.Cause != b.Cause {
		t.Errorf("check RUNDIR's final state %+v, the run's %+v", b, a)
	}
	if run.Evidence == nil || re.Evidence == nil || strings.Join(run.Evidence.Disagreements, "|") != strings.Join(re.Evidence.Disagreements, "|") {
		t.Errorf("disagreements differ: check %v, the run %v", re.Evidence, run.Evidence)
	}
	code3, text, _ := invoke(t, "check", run.RunDir)
	if code3 != code || !strings.Contains(text, "final state: before") {
		t.Errorf("check RUNDIR: exit %d (the run %d), says no final state:\n%s", code3, code, text)
	}
	t.Logf("%s; lost %d, extra %d, %d disagreements", run.Summary, a.Lost, a.Extra, len(run.Evidence.Disagreements))
}
