package runner_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/powerfs"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/cassandra"
	"github.com/indoubt/indoubt/internal/servers/redis"
)

// needFuse skips a power-loss test where FUSE cannot be used, with one line saying
// why; under CI=true it fails instead.
func needFuse(t *testing.T) {
	t.Helper()
	err := powerfs.Available()
	if err == nil {
		return
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci || !errors.Is(err, powerfs.ErrUnavailable) {
		t.Fatalf("powerfs: %v (CI=true: power-loss tests need root and /dev/fuse)", err)
	}
	t.Skipf("powerfs: %v", err)
}

// powerConfig is a run of store's budget (PostgreSQL) or register (Redis) workload with
// one power loss in its middle.
func powerConfig(t *testing.T, store runner.StoreName, seed int64) runner.Config {
	cfg := budgetConfig(t)
	cfg.Store, cfg.Seed = store, seed
	cfg.Workers, cfg.Ops, cfg.Duration, cfg.Budget = 4, 0, 4*time.Second, 100_000_000
	if store == runner.Redis {
		cfg.Workload = "budget"
	}
	cfg.Faults = parseSchedule(t, "power-loss@1500ms")
	return cfg
}

func lostFigures(res *results.Results) (n int64, explanation string) {
	for _, l := range res.LostWrites {
		c := l.Count
		if c == 0 {
			c = 1
		}
		n += c
		explanation = l.Explanation
	}
	return n, explanation
}

// PostgreSQL with its defaults and Redis with appendfsync always fsync before they
// acknowledge: across seeds (which also tear the unsynced pages differently), a power
// loss loses no acknowledged write and the server recovers.
func TestPowerLossDurableSettingsValid(t *testing.T) {
	t.Parallel() // a server of its own, launched by the run
	needFuse(t)
	for _, tc := range []struct {
		name  string
		store runner.StoreName
		set   func(*runner.Config)
	}{
		{"postgres-defaults", runner.Postgres, func(*runner.Config) {}},
		{"redis-always", runner.Redis, func(c *runner.Config) { c.Persistence = redis.Always }},
	} {
		for seed := int64(1); seed <= 3; seed++ {
			t.Run(tc.name+"-seed"+strconv.FormatInt(seed, 10), func(t *testing.T) {
				cfg := powerConfig(t, tc.store, seed)
				cfg.Faults = parseSchedule(t, "power-loss:tear@1500ms")
				tc.set(&cfg)
				res := processRun(t, cfg)
				if res.Verdict != checker.Valid || len(res.LostWrites) != 0 {
					t.Fatalf("verdict %v: %s; lost %+v", res.Verdict, res.Summary, res.LostWrites)
				}
				faultsHappened(t, res, "power-loss", "start")
				if !strings.Contains(res.Server, "powerfs") {
					t.Errorf("server %q does not say it ran on powerfs", res.Server)
				}
			})
		}
	}
}

// Redis with appendfsync everysec and PostgreSQL with synchronous_commit off acknowledge
// before the fsync: a power loss while writes flow loses acknowledged decrements, which
// are counted and named with how far back before the power loss they reach. Measured,
// not tuned: each gets three tries (seeds) to show a loss.
func TestPowerLossFindsLostWrites(t *testing.T) {
	needFuse(t)
	t.Parallel() // servers of its own
	for _, tc := range []struct {
		name  string
		store runner.StoreName
		set   func(*runner.Config)
	}{
		{"redis-everysec", runner.Redis, func(c *runner.Config) { c.Persistence = redis.EverySec }},
		{"postgres-synchronous-commit-off", runner.Postgres, func(c *runner.Config) { c.SynchronousCommit = "off" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := int64(1); seed <= 3; seed++ {
				cfg := powerConfig(t, tc.store, seed)
				tc.set(&cfg)
				res := processRun(t, cfg)
				faultsHappened(t, res, "power-loss", "start")
				n, why := lostFigures(res)
				if n == 0 {
					t.Logf("seed %d: no acknowledged write lost (%v: %s)", seed, res.Verdict, res.Summary)
					continue
				}
				if res.Verdict != checker.Invalid || !strings.Contains(why, "power-loss@1500ms") || !strings.Contains(why, "before the fault") {
					t.Fatalf("verdict %v, lost %d: %s", res.Verdict, n, why)
				}
				t.Logf("seed %d: %d acknowledged decrements lost: %s", seed, n, why)
				return
			}
			t.Fatal("no acknowledged write lost in three power losses")
		})
	}
}

// A power loss, and the durability flags, are refused before anything launches where
// they cannot apply.
func TestPowerLossRefused(t *testing.T) {
	for _, tc := range []struct {
		store, dsn, fault, want string
		set                     func(*runner.Config)
	}{
		{"postgres", "postgres://u:p@127.0.0.1:1/db", "power-loss@1s", "over Config.DSN", nil},
		{"mongo", "", "power-loss@1s", "inside indoubt's own process", nil},
		{"postgres", "", "", "want on or off", func(c *runner.Config) { c.Fsync = "sometimes" }},
		{"postgres", "postgres://u:p@127.0.0.1:1/db", "", "over Config.DSN", func(c *runner.Config) { c.SynchronousCommit = "off" }},
		{"mongo", "", "", "FerretDB", func(c *runner.Config) { c.PowerFS = true }},
		{"cql", "", "", "want periodic, batch or group", func(c *runner.Config) { c.CommitLogSync = "always" }},
		{"cql", "cql://127.0.0.1:1/ks", "", "over Config.DSN", func(c *runner.Config) { c.CommitLogSync = cassandra.CommitLogBatch }},
		{"postgres", "", "power-loss@1s", "Cassandra only", func(c *runner.Config) { c.PowerFSEntries = runner.EntriesOrdered }},
		{"cql", "", "power-loss@1s", "want posix or ordered", func(c *runner.Config) { c.PowerFSEntries = "ext4" }},
	} {
		cfg := budgetConfig(t)
		cfg.Store, cfg.DSN, cfg.Workload = runner.StoreName(tc.store), tc.dsn, "register"
		if tc.fault != "" {
			cfg.Faults = parseSchedule(t, tc.fault)
		}
		if tc.set != nil {
			tc.set(&cfg)
		}
		_, err := runner.Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %s: got %v, want one line with %q", tc.store, tc.fault, err, tc.want)
		}
	}
}
