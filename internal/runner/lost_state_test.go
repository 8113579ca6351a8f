package runner_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/workloads/budget"
)

// Redis with persistence none, killed and started again, has no budget account at all:
// the final read records the account as missing, and every decrement acknowledged as
// applied is a lost write named with the kill (exit 1, not "could not run"). While the
// server is down the workers back off instead of spinning through refused dials.
func TestProcessFaultsRedisNoneBudgetAccountLost(t *testing.T) {
	t.Parallel() // a server of its own, launched by the run
	cfg := budgetConfig(t)
	cfg.Store, cfg.Persistence = "redis", redis.NoPersistence
	cfg.Workers, cfg.Ops, cfg.Duration, cfg.Budget = 4, 0, 3500*time.Millisecond, 1_000_000_000
	cfg.Faults = parseSchedule(t, "kill@1s-2s")
	// No operation is acknowledged after the kill, so the run goes on past its time
	// for RecoveryWait: a second here, not the default minute.
	cfg.RecoveryWait = time.Second
	res := processRun(t, cfg)
	if res.Verdict != checker.Invalid {
		t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
	}
	// No decrement is acknowledged after the restart: there is no account to take from.
	if len(res.ProcessFaults) != 1 || res.ProcessFaults[0].Error != "" || res.ProcessFaults[0].FirstAckS != nil {
		t.Errorf("timeline %+v", res.ProcessFaults)
	}
	f := finalOf(t, res.Final)
	if !f.Missing || f.Balance != nil || f.Applied == 0 {
		t.Fatalf("final %+v: want the account missing after decrements were applied", f)
	}
	if len(res.LostWrites) != 1 {
		t.Fatalf("lost writes %+v, want one naming the account", res.LostWrites)
	}
	l := res.LostWrites[0]
	if l.Fault != "kill@1s-2s" || l.Count != f.Applied || l.OpID == "" || l.AckBeforeFaultS < 0 || !strings.Contains(l.Explanation, "the account is gone after kill@1s-2s") {
		t.Errorf("lost write %+v", l)
	}
	if res.ProcessFaults[0].LostWrites != f.Applied {
		t.Errorf("the kill counts %d lost writes, want the %d applied", res.ProcessFaults[0].LostWrites, f.Applied)
	}

	_, ops, err := histories.ReadFile(res.RunDir+"/history.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	var kill, start int64 = -1, -1
	var inDowntime int
	for _, op := range ops {
		switch {
		case !op.IsClient() && op.F == "kill":
			kill = op.Time
		case !op.IsClient() && op.F == "start":
			start = op.Time
		case op.OpID == "final-0":
			var m budget.MissingValue
			if op.Type != histories.Invoke && (op.Type != histories.Fail || json.Unmarshal(op.Value, &m) != nil || !m.Missing) {
				t.Errorf("final read %+v: want a fail with {\"missing\":true}", op)
			}
		case op.IsClient() && op.Type != histories.Invoke && kill >= 0 && start < 0:
			inDowntime++
		}
		// A worker invokes nothing past the time and the recovery wait.
		if op.IsClient() && op.Type == histories.Invoke && !strings.HasPrefix(op.OpID, "final-") && time.Duration(op.Time) > cfg.Duration+cfg.RecoveryWait {
			t.Errorf("%s invoked at %v, past the run's %v and its recovery wait of %v", op.OpID, time.Duration(op.Time), cfg.Duration, cfg.RecoveryWait)
		}
	}
	// Without a backoff each worker completed about a thousand refused operations per
	// second of downtime (scripts/bench-downtime); with it, a few dozen at most. The
	// bound is loose on purpose: a slower machine only completes fewer.
	down := time.Duration(start - kill).Seconds()
	if limit := int(float64(cfg.Workers) * 100 * down); inDowntime > limit {
		t.Errorf("%d operations completed in %.2fs of downtime by %d workers: they spin on refused dials (want at most %d)", inDowntime, down, cfg.Workers, limit)
	}
	t.Logf("%d operations completed in %.2fs of downtime", inDowntime, down)
}
