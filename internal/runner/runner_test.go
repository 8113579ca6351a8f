package runner_test

import (
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/internal/supervise"
	"github.com/indoubt/indoubt/workloads/budget"
)

var pg = servertest.Postgres(postgres.Options{})

func TestMain(m *testing.M) {
	if os.Getenv(supervise.Env) != "" {
		os.Exit(superviseMain())
	}
	// The parallel tests each run on servers of their own and spend most of their time
	// waiting on them (a failover's promotion, a power loss's restart, a run's fixed
	// length): four at a time, unless -test.parallel says otherwise.
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "4")
	}
	code := servertest.Main(m, pg, pgs)
	if code == 0 {
		// Every worker, sync loop and pool goroutine must be gone once runs return.
		if err := goleak.Find(goleak.IgnoreCurrent()); err != nil {
			os.Stderr.WriteString("goroutines leaked: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

func policy(t *testing.T, name string) runner.Policy {
	p, err := runner.ParsePolicy(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// schedule parses a fault schedule, as the command line does before a run.
func parseSchedule(t *testing.T, specs ...string) schedule.Schedule {
	t.Helper()
	s, err := schedule.Parse(specs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func budgetConfig(t *testing.T) runner.Config {
	return runner.Config{
		Workload: "budget", Store: "postgres", DSN: pg.Get(t).DSN,
		Workers: budget.DefaultWorkers, Ops: budget.DefaultAttempts, Budget: budget.DefaultBudget,
		Seed: 1, Out: t.TempDir(), Retry: policy(t, "none"),
	}
}

func finalOf(t *testing.T, r any) budget.Final {
	f, ok := r.(budget.Final)
	if !ok {
		t.Fatalf("final is %T, want budget.Final", r)
	}
	return f
}

// The stand's scenario: 16 workers x 100 attempts on a budget of 1000.
func TestBudgetReconcilesExactly(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, mech := range []string{"autocommit", "transaction"} {
		t.Run(mech, func(t *testing.T) {
			cfg := budgetConfig(t)
			cfg.Mechanism = mech
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			f := finalOf(t, res.Final)
			if f.Applied != 1000 || f.Rejected != 600 || f.Balance == nil || *f.Balance != 0 {
				t.Fatalf("applied %d, rejected %d, balance %v; want 1000, 600, 0", f.Applied, f.Rejected, f.Balance)
			}
			if res.Verdict != checker.Valid {
				t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
			}
			if res.Ops.Invoked != 1601 || res.Ops.OK != 1601 {
				t.Errorf("ops = %+v, want 1600 decrements and a final read, all ok", res.Ops)
			}
			if res.Throughput <= 0 || res.LatencyMs.P50 <= 0 || res.LatencyMs.Max < res.LatencyMs.P99 {
				t.Errorf("throughput %v, latency %+v", res.Throughput, res.LatencyMs)
			}
			for _, name := range []string{"config.json", "history.jsonl", "results.json", "report.html"} {
				if _, err := os.Stat(filepath.Join(res.RunDir, name)); err != nil {
					t.Errorf("run directory lacks %s: %v", name, err)
				}
			}
			// The history on disk re-checks to the same verdict without flags.
			h, ops, err := histories.ReadFile(filepath.Join(res.RunDir, "history.jsonl"), false)
			if err != nil {
				t.Fatal(err)
			}
			again, err := checker.Check(context.Background(), h, ops, checker.Options{})
			if err != nil || again.Verdict != checker.Valid {
				t.Fatalf("re-check: %v %v", again.Verdict, err)
			}
		})
	}
}

func TestTimedRunStopsAtTheDeadline(t *testing.T) {
	cfg := budgetConfig(t)
	cfg.Ops, cfg.Duration, cfg.Workers, cfg.Budget = 0, 1500*time.Millisecond, 4, 1_000_000
	// With no operation count, only the deadline ends this run: that Run returns is
	// the outcome (how long it took to on this machine is not).
	res, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	if res.Ops.OK < 10 || res.Verdict != checker.Valid {
		t.Fatalf("ops %+v, verdict %v", res.Ops, res.Verdict)
	}
	f := finalOf(t, res.Final)
	if *f.Balance != 1_000_000-f.Applied {
		t.Fatalf("balance %d after %d applied of 1000000", *f.Balance, f.Applied)
	}
}

// A run interrupted once its workers have completed operations (the context
// cancelled, as Ctrl-C does) is checked, valid and marked interrupted.
func TestInterruptedRunIsCheckedAndMarked(t *testing.T) {
	cfg := budgetConfig(t)
	cfg.Ops, cfg.Duration, cfg.Workers, cfg.Budget = 0, time.Minute, 4, 1_000_000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Cancelled after a hundred operations, not after a time, which a loaded machine
	// can spend setting the run up.
	var interrupt sync.Once
	cfg.OnProgress = func(p runner.Progress) {
		if p.Completed >= 100 {
			interrupt.Do(cancel)
		}
	}
	res, err := runner.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	if !res.Interrupted {
		t.Error("results not marked interrupted")
	}
	if res.Verdict != checker.Valid {
		t.Errorf("verdict %v: %s", res.Verdict, res.Summary)
	}
	// The outcome: the interruption ended the run, not its minute.
	if res.DurationS >= cfg.Duration.Seconds() {
		t.Errorf("interrupted run lasted %.1f s, its whole time", res.DurationS)
	}
}

func TestUnreachableServerLeavesNoRunDirectory(t *testing.T) {
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	cfg := budgetConfig(t)
	cfg.DSN = "postgres://indoubt@127.0.0.1:" + strconv.Itoa(port) + "/indoubt?connect_timeout=2"
	_, err = runner.Run(context.Background(), cfg)
	if !errors.Is(err, runner.ErrCouldNotRun) {
		t.Fatalf("err = %v, want ErrCouldNotRun", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	entries, _ := os.ReadDir(cfg.Out)
	if len(entries) != 0 {
		t.Errorf("out directory holds %v after a run that could not start", entries)
	}
}

func TestBadConfigIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*runner.Config)
	}{
		{"no workers", func(c *runner.Config) { c.Workers = 0 }},
		{"unknown store", func(c *runner.Config) { c.Store = "dynamodb" }},
		{"unknown workload", func(c *runner.Config) { c.Workload = "bank" }},
		{"neither ops nor time", func(c *runner.Config) { c.Ops = 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := budgetConfig(t)
			tc.edit(&cfg)
			if _, err := runner.Run(context.Background(), cfg); !errors.Is(err, runner.ErrCouldNotRun) {
				t.Fatalf("err = %v, want ErrCouldNotRun", err)
			}
		})
	}
}

func TestLaunchesItsOwnServer(t *testing.T) {
	pg.Get(t) // skip where PostgreSQL is not installed
	cfg := budgetConfig(t)
	cfg.DSN, cfg.Workers, cfg.Ops, cfg.Budget = "", 2, 10, 15
	res, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	f := finalOf(t, res.Final)
	if f.Applied != 15 || f.Rejected != 5 || res.Verdict != checker.Valid {
		t.Fatalf("applied %d rejected %d verdict %v", f.Applied, f.Rejected, res.Verdict)
	}
	if _, err := os.Stat(filepath.Join(res.RunDir, "postgres.log")); err != nil {
		t.Errorf("launched server's log not in the run directory: %v", err)
	}
}
