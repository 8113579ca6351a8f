package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/judge/judgetest"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/workloads"
)

// recheck judges the run's directory again from its files alone (judge.Dir, as
// `indoubt check RUNDIR` does) and fails the test unless it gives the run's
// results.json: verdict, exit code, summary, anomalies, lost writes, evidence, final
// state and timelines, an unknown verdict compared too. Every test that makes a run
// calls it, so the promise holds for every workload and fault kind they cover.
func recheck(t *testing.T, res *results.Results) {
	t.Helper()
	judgetest.Recheck(t, res.RunDir)
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
		{"counter commit-cut naive", runner.Config{Workload: workloads.Counter, Retry: policy(t, "naive"), Workers: 4, Ops: 25, Faults: parseSchedule(t, "commit-cut:0.3")}},
		{"counter kill", runner.Config{Workload: workloads.Counter, Retry: policy(t, "naive"), Workers: 4, Duration: 2 * time.Second, Faults: parseSchedule(t, "kill@500ms-1s")}},
		{"insert commit-cut naive", runner.Config{Workload: workloads.Insert, Retry: policy(t, "naive"), Workers: 4, Ops: 25, Faults: parseSchedule(t, "commit-cut:0.3")}},
		{"insert kill", runner.Config{Workload: workloads.Insert, Retry: policy(t, "naive"), Workers: 4, Duration: 2 * time.Second, Faults: parseSchedule(t, "kill@500ms-1s")}},
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
