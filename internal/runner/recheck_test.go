package runner_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/workloads"
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
	if res.Evidence != nil {
		recheckEvidence(t, res)
	}
}

// recheckEvidence joins the run's faults.jsonl to its history again, as `indoubt check
// --faults` does, and fails unless the ground truth is the run's.
func recheckEvidence(t *testing.T, res *results.Results) {
	t.Helper()
	f, err := os.Open(filepath.Join(res.RunDir, "faults.jsonl"))
	if err != nil {
		t.Fatalf("recheck: %v", err)
	}
	defer f.Close()
	events, _, err := evidence.ReadEvents(f, f.Name())
	if err != nil {
		t.Fatalf("recheck: %v", err)
	}
	_, ops, err := histories.ReadFile(filepath.Join(res.RunDir, "history.jsonl"), false)
	if err != nil {
		t.Fatalf("recheck: %v", err)
	}
	ev, _ := evidence.Join(events, evidence.SpansFromHistory(ops, events), ops, nil, res.Verdict == checker.Invalid)
	got, want := *ev, *res.Evidence
	if got.Events != want.Events || got.Joined != want.Joined || got.AmbiguousTotal() != want.AmbiguousTotal() ||
		got.AppliedTwiceTotal() != want.AppliedTwiceTotal() || got.CommittedTwiceTotal() != want.CommittedTwiceTotal() {
		t.Errorf("recheck of the ground truth: %d events, %d joined, %d hit, %d applied twice, %d committed twice; the run's: %d, %d, %d, %d, %d",
			got.Events, got.Joined, got.AmbiguousTotal(), got.AppliedTwiceTotal(), got.CommittedTwiceTotal(),
			want.Events, want.Joined, want.AmbiguousTotal(), want.AppliedTwiceTotal(), want.CommittedTwiceTotal())
	}
	for i, a := range want.AppliedTwice {
		if i < len(got.AppliedTwice) && got.AppliedTwice[i].Sentence != a.Sentence {
			t.Errorf("recheck sentence %q, the run's %q", got.AppliedTwice[i].Sentence, a.Sentence)
		}
	}
}

// The workloads the other tests of this package do not run, under a commit fault and a
// process fault each, checked again from their run directories. What the runs find
// is not asserted here (a loaded machine may complete few operations): only that the
// run directory alone gives the same verdict and anomalies.
func TestRecheckCounterAndInsert(t *testing.T) {
	if err := runner.Available(runner.Postgres); err != nil {
		servertest.SkipOrFail(t, err)
	}
	t.Parallel() // servers of its own
	for _, tc := range []struct {
		name string
		cfg  runner.Config
	}{
		{"counter commit-cut naive", runner.Config{Workload: workloads.Counter, Retry: policy(t, "naive"), Workers: 4, Ops: 25, Faults: schedule(t, "commit-cut:0.3")}},
		{"counter kill", runner.Config{Workload: workloads.Counter, Retry: policy(t, "naive"), Workers: 4, Duration: 2 * time.Second, Faults: schedule(t, "kill@500ms-1s")}},
		{"insert commit-cut naive", runner.Config{Workload: workloads.Insert, Retry: policy(t, "naive"), Workers: 4, Ops: 25, Faults: schedule(t, "commit-cut:0.3")}},
		{"insert kill", runner.Config{Workload: workloads.Insert, Retry: policy(t, "naive"), Workers: 4, Duration: 2 * time.Second, Faults: schedule(t, "kill@500ms-1s")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Store, cfg.Seed, cfg.Out = runner.Postgres, 1, t.TempDir()
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			t.Logf("%v: %s", res.Verdict, res.Summary)
		})
	}
}
