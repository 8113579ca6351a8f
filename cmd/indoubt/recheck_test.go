package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/indoubt/indoubt/checker"
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
	t.Logf("both: %s (%s lost)", run.Summary, strconv.Itoa(len(run.LostWrites)))
}
