package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/internal/judge/judgetest"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// quiet is a testing.TB whose failures are the test's to expect: an invalid verdict
// of the helper does not fail the test that made it on purpose.
type quiet struct{ testing.TB }

func (quiet) Errorf(string, ...any) {}
func (quiet) Logf(string, ...any)   {}

// helperRunDir makes a run directory with the test helper: a budget of 10 of which 3
// decrements were applied and the final read says 5 are left (invalid).
func helperRunDir(t *testing.T) string {
	t.Helper()
	t.Setenv("INDOUBT_OUT", t.TempDir())
	q := quiet{t}
	rec := indoubttest.NewRecorder(q, nil)
	w := rec.Worker()
	for range 3 {
		w.Invoke("decrement", nil).Ok(indoubttest.Applied(9))
	}
	op := w.Invoke("decrement", nil)
	op.Retried(errors.New("conn closed"))
	op.Done(nil, errors.New("conn closed"))
	rec.Read("read", indoubttest.Balance(5))
	r := indoubttest.Evaluate(q, rec, indoubttest.Budget(10))
	return r.RunDir
}

// `indoubt check RUNDIR` judges the directory from its files alone: the verdict's
// exit code, and with --json the run's results.json with its judged sections equal.
func TestCheckRunDir(t *testing.T) {
	dir := helperRunDir(t)
	b, err := os.ReadFile(filepath.Join(dir, rundir.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var run results.Results
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	code, out, errs := invoke(t, "check", dir)
	if code != run.Verdict.ExitCode() || code != 1 {
		t.Fatalf("check RUNDIR: exit %d, the run's verdict %v\n%s%s", code, run.Verdict, out, errs)
	}
	if !strings.Contains(out, run.Summary) {
		t.Errorf("check RUNDIR does not say the run's summary %q:\n%s", run.Summary, out)
	}
	code, out, errs = invoke(t, "check", "--json", dir)
	if code != 1 {
		t.Fatalf("check --json RUNDIR: exit %d\n%s%s", code, out, errs)
	}
	var re results.Results
	if err := json.Unmarshal([]byte(out), &re); err != nil {
		t.Fatalf("check --json RUNDIR: %v\n%s", err, out)
	}
	want, _ := json.Marshal(judgetest.JudgedOf(&run))
	got, _ := json.Marshal(judgetest.JudgedOf(&re))
	if string(want) != string(got) {
		t.Errorf("check --json RUNDIR:\n%s\nresults.json:\n%s", got, want)
	}
	if re.Workers != run.Workers || re.Retries.Total != run.Retries.Total || re.RunDir != run.RunDir {
		t.Errorf("the figures only the run measured are not results.json's: workers %d, retries %d, run_dir %s; results.json %d, %d, %s",
			re.Workers, re.Retries.Total, re.RunDir, run.Workers, run.Retries.Total, run.RunDir)
	}
	// The file path keeps working.
	if code, out, errs := invoke(t, "check", filepath.Join(dir, rundir.HistoryFile)); code != 1 {
		t.Errorf("check RUNDIR/history.jsonl: exit %d\n%s%s", code, out, errs)
	}
	// Other limits are said.
	code, _, errs = invoke(t, "check", "--timeout", "7s", dir)
	if code != 1 || !strings.Contains(errs, "checked with timeout 7s") || !strings.Contains(errs, "the run was checked with") {
		t.Errorf("check --timeout 7s RUNDIR: exit %d, stderr %q: want the other limits said", code, errs)
	}
	// A flag the directory answers itself is refused, in one line, exit 3.
	code, _, errs = invoke(t, "check", "--model", "budget", dir)
	if code != 3 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "--model") {
		t.Errorf("check --model RUNDIR: exit %d, %q", code, errs)
	}
	empty := t.TempDir()
	if code, _, errs := invoke(t, "check", empty); code != 3 || !strings.Contains(errs, "not a run directory") {
		t.Errorf("check of a directory without a history: exit %d, %q", code, errs)
	}
}
