package runner_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/redis"
)

// nemesisPids returns the pid of each nemesis event of the history, by action.
func nemesisPids(t *testing.T, res *results.Results) map[string]int {
	t.Helper()
	_, ops, err := histories.ReadFile(res.RunDir+"/history.jsonl", false)
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, op := range ops {
		if op.IsClient() {
			continue
		}
		var v struct {
			Pid int `json:"pid"`
		}
		if json.Unmarshal(op.Value, &v) == nil && v.Pid != 0 {
			pids[op.F] = v.Pid
		}
	}
	return pids
}

// promotedElsewhere checks that the failover killed one redis-server and the
// Sentinels promoted another, on which the workload went on: an operation was
// acknowledged after the promotion.
func promotedElsewhere(t *testing.T, res *results.Results, actions ...string) {
	t.Helper()
	faultsHappened(t, res, append([]string{"failover", "promoted"}, actions...)...)
	pids := nemesisPids(t, res)
	if pids["failover"] == 0 || pids["promoted"] == 0 || pids["failover"] == pids["promoted"] {
		t.Errorf("failover of pid %d, promoted pid %d: want two servers", pids["failover"], pids["promoted"])
	}
	f := res.ProcessFaults[0]
	if f.FirstAckS == nil || *f.FirstAckS < f.DowntimeS {
		t.Errorf("fault %+v: want an acknowledgement after the promotion", f)
	}
}

// A Redis primary killed under 16 writers: the Sentinels promote the replica, the
// workload carries on against it through go-redis's failover client, and the budget
// is reconciled against the new primary. Replication is asynchronous, so the last
// decrements the old primary acknowledged may be missing: every try must tell the truth
// (valid with none lost, or invalid with the lost decrements counted and the failover
// named); whether a loss shows up in a bounded number of tries is logged, not asserted.
func TestFailoverRedisSentinel(t *testing.T) {
	const tries = 2 // scripts/failover-table measures more
	for try := int64(1); try <= tries; try++ {
		cfg := budgetConfig(t)
		cfg.Store, cfg.Topology, cfg.Seed = "redis", runner.TopologyReplicated, try
		cfg.Workers, cfg.Ops, cfg.Duration, cfg.Budget = 16, 0, 6*time.Second, 1_000_000
		cfg.Faults = parseSchedule(t, "failover@1s")
		res := processRun(t, cfg)
		promotedElsewhere(t, res)
		f := res.ProcessFaults[0]
		t.Logf("try %d: promoted %.2fs after the kill, first acknowledgement after %.2fs, %d acknowledged decrements lost", try, f.DowntimeS, *f.FirstAckS, f.LostWrites)
		switch res.Verdict {
		case checker.Invalid:
			if len(res.LostWrites) != 1 || res.LostWrites[0].Fault != "failover@1s" || res.LostWrites[0].Count < 1 || res.LostWrites[0].OpID == "" {
				t.Fatalf("invalid without the lost decrements named: %+v: %s", res.LostWrites, res.Summary)
			}
			t.Logf("try %d: %s", try, res.LostWrites[0].Explanation)
			return
		case checker.Valid:
			if len(res.LostWrites) != 0 || f.LostWrites != 0 {
				t.Fatalf("valid with lost writes %+v", res.LostWrites)
			}
		default:
			t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
		}
	}
	t.Logf("no acknowledged decrement lost in %d Redis failovers", tries)
}

// failover:rejoin starts the old primary again after the promotion, as it would come
// back in production; the register histories across the failover are checked for
// linearizability as usual, and whatever they show is named with its operations.
// The run lasts 7 s: under load the Sentinels take up to ~3 s to promote and go-redis
// up to a second more to find the new primary, and an acknowledgement after the
// promotion is required.
func TestFailoverRedisRejoinRegister(t *testing.T) {
	cfg := redisRegister(t, redis.NoPersistence, "failover:rejoin@1s")
	cfg.Topology, cfg.Workers, cfg.Duration = runner.TopologyReplicated, 3, 7*time.Second
	res := processRun(t, cfg)
	promotedElsewhere(t, res, "rejoin")
	pids := nemesisPids(t, res)
	if pids["rejoin"] != pids["failover"] {
		t.Errorf("rejoin names pid %d, want the old primary's %d", pids["rejoin"], pids["failover"])
	}
	switch res.Verdict {
	case checker.Valid:
		if len(res.LostWrites) != 0 {
			t.Errorf("valid with lost writes %+v", res.LostWrites)
		}
	case checker.Invalid:
		if len(res.Anomalies) == 0 {
			t.Fatalf("invalid without an anomaly: %s", res.Summary)
		}
		for _, a := range res.Anomalies {
			if len(a.Ops) == 0 && a.Kind != "lost-write" {
				t.Errorf("anomaly %+v names no operation", a)
			}
		}
		t.Logf("invalid: %s", res.Summary)
	default:
		t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
	}
}

// What a replicated Redis cannot do is refused before anything launches, in one line.
func TestReplicatedRedisRefused(t *testing.T) {
	for _, tc := range []struct {
		name, topology, replication, dsn, fault, want string
	}{
		{"sync replication", runner.TopologyReplicated, "sync", "", "failover@1s", "Redis replicates asynchronously only"},
		{"proxy in front of Sentinels", "", "", "redis://:pw@127.0.0.1:1/0?master_name=m&addr=127.0.0.1:2", "commit-cut:0.1", "Sentinel DSN"},
		{"bad Sentinel DSN behind a proxy", "", "", "redis://:pw@127.0.0.1:1/0?master_name=&addr=127.0.0.1:2", "commit-cut:0.1", "master_name is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := budgetConfig(t)
			cfg.Store, cfg.Workload, cfg.DSN = "redis", "register", tc.dsn
			cfg.Topology, cfg.Replication = tc.topology, tc.replication
			cfg.Faults = parseSchedule(t, tc.fault)
			var progress strings.Builder
			cfg.Progress = &progress
			_, err := runner.Run(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want one line with %q", err, tc.want)
			}
			if progress.Len() > 0 { // refused before anything started
				t.Errorf("a refused run printed %q", progress.String())
			}
		})
	}
}
