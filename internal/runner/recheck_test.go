package runner_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

// recheck checks a run's history.jsonl again the way `indoubt check RUNDIR/history.jsonl`
// does (streamed, from the file alone, without the run's time limit) and fails the
// test unless it gives the run's verdict, exit code, anomalies and lost writes: the run
// directory is the evidence, and the checker the only judge. Every test that makes a
// run calls it, so the promise holds for every workload and fault kind they cover.
func recheck(t *testing.T, res *results.Results) {
	t.Helper()
	path := filepath.Join(res.RunDir, "history.jsonl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("recheck: %v", err)
	}
	defer f.Close()
	rd, err := histories.NewReader(f, path)
	if err != nil {
		t.Fatalf("recheck: %v", err)
	}
	next := func() (histories.Op, error) { return rd.Next() }
	got, err := checker.CheckStream(context.Background(), rd.Header(), next, checker.Options{})
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("recheck %s: %v", path, err)
	}
	if got.Verdict == checker.Unknown && res.Verdict == checker.Unknown {
		return // a search that ran out of time decides nothing either way
	}
	if got.Verdict != res.Verdict || got.Verdict.ExitCode() != res.Verdict.ExitCode() {
		t.Fatalf("recheck of %s: %v (%s), the run said %v (%s)", path, got.Verdict, got.Summary, res.Verdict, res.Summary)
	}
	if got.Summary != res.Summary {
		t.Errorf("recheck summary %q, the run's %q", got.Summary, res.Summary)
	}
	if n := results.AnomalyCountOf(got); n != res.AnomalyTotal() {
		t.Errorf("recheck found %d anomalies, the run %d", n, res.AnomalyTotal())
	}
	listed := got.Anomalies[:min(len(got.Anomalies), len(res.Anomalies))]
	if !slices.EqualFunc(listed, res.Anomalies, func(a, b checker.Anomaly) bool {
		return a.Kind == b.Kind && a.Explanation == b.Explanation && slices.Equal(a.Ops, b.Ops)
	}) {
		t.Errorf("recheck anomalies differ:\n%v\nthe run's:\n%v", listed, res.Anomalies)
	}
	if !slices.EqualFunc(got.LostWrites, res.LostWrites, func(a, b checker.LostWrite) bool {
		return a.OpID == b.OpID && a.Count == b.Count && a.Fault == b.Fault && a.Explanation == b.Explanation
	}) {
		t.Errorf("recheck lost writes %+v, the run's %+v", got.LostWrites, res.LostWrites)
	}
}
