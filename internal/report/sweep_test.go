package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/catalog"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

func sweepRun(workers int, ok, okAttempts, exhausted, deadline, deadlineAttempts int64, final map[string]any) *results.Results {
	errs := func(n int64) map[string]int64 {
		if n == 0 {
			return nil
		}
		return map[string]int64{"serialization-failure": n}
	}
	return &results.Results{
		Verdict: checker.Valid, Workload: "counter", Store: "postgres", Mechanism: "read-write, serializable", Retry: "conflict",
		Workers: workers, DurationS: 10,
		LatencyMs: results.Latency{P50: 1.5, P99: 12.25},
		Retries:   results.RetryCounts{Total: (okAttempts - ok) + exhausted*9 + (deadlineAttempts - deadline)},
		Outcomes: results.Outcomes{
			Succeeded: results.OutcomeCount{Ops: ok, Attempts: okAttempts},
			Exhausted: results.OutcomeCount{Ops: exhausted, Attempts: exhausted * 10, Errors: errs(exhausted)},
			Deadline:  results.OutcomeCount{Ops: deadline, Attempts: deadlineAttempts, Errors: errs(deadline)},
		},
		Final: decodeFinal(workloads.Counter, final),
	}
}

// decodeFinal reads a `final` section written as a map, the way results.json holds it.
func decodeFinal(w workloads.Name, m map[string]any) workloads.Final {
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	f, err := catalog.DecodeFinal(w, b)
	if err != nil {
		panic(err)
	}
	return f
}

func TestWriteSweep(t *testing.T) {
	runs := []*results.Results{
		sweepRun(1, 1000, 1000, 0, 0, 0, map[string]any{"before": 0, "after": 1000, "acknowledged": 1000, "lost": 0, "extra": 0}),
		// 747 committed after 1122 retries among them; 680 exhausted; 3 cut off by the deadline.
		sweepRun(32, 747, 747+1122, 680, 3, 9, map[string]any{"before": 0, "after": 747, "acknowledged": 747, "lost": 0, "extra": 0,
			"server_restarts": map[string]int64{"txn.restarts.writetooold": 10020, "txn.restarts.serializable": 0}}),
	}
	rc := sweepRun(16, 1209, 1209, 0, 0, 0, map[string]any{"before": 0, "after": 76, "acknowledged": 1209, "lost": 1133, "extra": 0, "cause": "silently lost: 1133 of 1209"})
	rc.Verdict = checker.Invalid
	runs = append(runs, rc)
	var b bytes.Buffer
	WriteSweep(&b, runs)
	out := b.String()
	t.Log("\n" + out)
	lines := strings.Split(out, "\n")
	row := func(workers string) []string {
		for _, l := range lines {
			if fs := strings.Fields(l); len(fs) > 0 && fs[0] == workers {
				return fs
			}
		}
		t.Fatalf("no row for %s workers", workers)
		return nil
	}
	// workers tx/s p50 p99 retries retries/success failed lost extra unknown deadline verdict
	if got := strings.Join(row("32"), " "); got != "32 75 1.50 12.25 7248 1.50 680 0 0 0 3 valid" {
		t.Errorf("32-worker row %q", got)
	}
	if got := strings.Join(row("16"), " "); got != "16 121 1.50 12.25 0 0.00 0 1133 (94%) 0 0 0 invalid" {
		t.Errorf("read committed row %q", got)
	}
	for _, want := range []string{
		"counter on postgres: read-write, serializable, retry conflict",
		"32 workers: retries by outcome: succeeded 1122, failed 6120, unknown 0, cut by deadline 6; failures by reason: serialization-failure=680 (680 exhausted, 0 non-retryable)",
		"final 16 workers: before 0, after 76, acknowledged 1209, lost 1133, extra 0: silently lost",
		"server restarts during the run (deltas): txn.restarts.writetooold +10020 (1 other unchanged)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}
