package runner_test

import (
	"context"
	"testing"

	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
)

// retrySums checks that retries.total is the sum of retries.by_reason and of
// retries.by_outcome, and that the outcomes' attempts beyond the first add up to it too.
func retrySums(t *testing.T, res *results.Results) {
	t.Helper()
	r := res.Retries
	var byReason int64
	for _, n := range r.ByReason {
		byReason += n
	}
	byOutcome := r.ByOutcome.OK + r.ByOutcome.Fail + r.ByOutcome.Info + r.ByOutcome.Deadline
	o := res.Outcomes
	byEnd := o.Succeeded.Retries() + o.Exhausted.Retries() + o.NonRetryable.Retries() + o.Unknown.Retries() + o.Deadline.Retries()
	if byReason != r.Total || byOutcome != r.Total || byEnd != r.Total {
		t.Errorf("retries: total %d, by reason %d (%v), by outcome %d (%+v), by ending %d", r.Total, byReason, r.ByReason, byOutcome, r.ByOutcome, byEnd)
	}
}

// Retries of serialization failures and of cut commits both add up, whatever ended them.
func TestRetryCountsAddUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, c *runner.Config)
		why  string // why the run must retry
	}{
		{"counter read-write serializable, conflict retry", func(t *testing.T, c *runner.Config) {
			c.Workload, c.Mechanism, c.Workers, c.Ops = "counter", "read-write", 8, 40
			c.Retry = policy(t, "conflict")
		}, "8 workers on one serializable row should conflict"},
		{"budget under commit faults, naive retry", func(t *testing.T, c *runner.Config) {
			c.Faults = parseSchedule(t, "commit-mixed:0.3")
			c.Retry = policy(t, "naive")
		}, "commit-mixed:0.3 cuts and drops commits"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := budgetConfig(t)
			tc.edit(t, &cfg)
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Retries.Total == 0 {
				t.Fatalf("no retries: %s", tc.why)
			}
			retrySums(t, res)
		})
	}
}
