package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// twoServers is the package's pair of PostgreSQL servers with prepared transactions on,
// for the two-phase commit runs.
type twoServers []*pgserver.Server

func (s twoServers) Stop() error {
	var errs []error
	for _, p := range s {
		errs = append(errs, p.Stop())
	}
	return errors.Join(errs...)
}

var pgs = servertest.New("postgres x2", func(ctx context.Context) (twoServers, error) {
	return pgserver.StartMany(ctx, 2, pgserver.Options{MaxPreparedTransactions: 64})
})

// twoPhaseConfig is a small two-phase commit run on the package's servers: 4 workers of
// 40 operations over 200 rows, few enough for reads to meet transfers in flight.
func twoPhaseConfig(t *testing.T, w workloads.Name, pl transfer.Placement, faults ...string) runner.Config {
	var dsns []string
	for _, p := range pgs.Get(t) {
		dsns = append(dsns, p.DSN)
	}
	c := runner.Config{
		Workload: w, Store: runner.Postgres, DSNs: dsns, Placement: pl,
		Workers: 4, Ops: 40, RowsPerWorker: 50, Seed: 1, Out: t.TempDir(),
		Faults: parseSchedule(t, faults...),
	}
	if testing.Verbose() {
		c.Progress = os.Stderr
	}
	return c
}

// runTwoPhase runs cfg, holds `indoubt check`'s verdict on its history to the run's, and
// checks that nothing is left prepared on the servers.
func runTwoPhase(t *testing.T, cfg runner.Config) *results.Results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	h, ops, err := histories.ReadFile(filepath.Join(res.RunDir, "history.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	again, err := checker.Check(ctx, h, ops, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Verdict != res.Verdict || again.Summary != res.Summary {
		t.Errorf("re-check: %s %q; the run: %s %q", again.Verdict, again.Summary, res.Verdict, res.Summary)
	}
	for i, dsn := range cfg.DSNs {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		err = c.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_xacts").Scan(&n)
		c.Close(ctx)
		if err != nil || n != 0 {
			t.Errorf("server %d: %d transactions left prepared (%v)", i, n, err)
		}
	}
	return res
}

// TestTwoPhaseCommitCutRecovers: a COMMIT PREPARED cut after the first participant
// committed leaves the second prepared; recovery commits it, because the decision is in
// the log, and the run is valid. Its results.json matches the schema.
func TestTwoPhaseCommitCutRecovers(t *testing.T) {
	// At most three cuts: each leaves a row locked until recovery, and a transfer that
	// meets one waits out its lock_timeout.
	cfg := twoPhaseConfig(t, workloads.Transfer, transfer.Distributed, "commit-cut:0.3,max=1")
	// 4000 rows: few transfers meet the cut ones' rows, which stay locked until recovery.
	cfg.Reads, cfg.RowsPerWorker = 0.2, 1000
	res := runTwoPhase(t, cfg)
	if res.Faults.ByKind["commit-cut"] == 0 {
		t.Fatalf("no COMMIT PREPARED was cut: %v", res.Faults.ByKind)
	}
	f := res.Final.(transfer.Final)
	if res.Verdict != checker.Valid || f.Total == nil || *f.Total != f.Expected {
		t.Fatalf("%s: %s; final %+v", res.Verdict, res.Summary, f)
	}
	tp := res.TwoPhase
	if tp == nil || len(tp.Recovery) == 0 || tp.Transactions.Committed == 0 || tp.LatencyMs.Mean <= 0 {
		t.Fatalf("two_phase_commit %+v: want recovery to have finished the cut transactions", tp)
	}
	for _, r := range tp.Recovery {
		if r.Decision != "commit" || !r.Logged || r.Error != "" {
			t.Errorf("resolution %+v, want a logged commit", r)
		}
	}
	if tp.Transactions.Committed != f.Applied || f.Reads == 0 {
		t.Errorf("committed %d, applied %d, reads %d", tp.Transactions.Committed, f.Applied, f.Reads)
	}
	b, err := os.ReadFile(filepath.Join(res.RunDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := validate(resultsSchema(t), b); err != nil {
		t.Errorf("results.json does not match the schema: %v", err)
	}
	var back results.Results
	if err := json.Unmarshal(b, &back); err != nil || back.Final.(transfer.Final).Applied != f.Applied {
		t.Errorf("results.json read back: %v", err)
	}
}

// TestTwoPhaseCrashLogged: a coordinator crash leaves transactions in doubt that hold
// locks and block writers until recovery, which finishes every gid the same way on
// every participant, from the log: valid.
func TestTwoPhaseCrashLogged(t *testing.T) {
	// At 1 s, not sooner: every worker has a transaction in flight by then, so the
	// crash leaves some prepared whatever the load (at 300 ms a loaded machine had
	// begun two transactions, and both stopped before preparing).
	cfg := twoPhaseConfig(t, workloads.Transfer, transfer.Distributed, "coordinator-crash@1s")
	cfg.Workers, cfg.Ops, cfg.Duration, cfg.RecoverAfter, cfg.Seed = 12, 0, 5*time.Second, 500*time.Millisecond, 3
	res := runTwoPhase(t, cfg)
	c := res.TwoPhase.Crash
	if c == nil || len(c.InDoubt) == 0 {
		t.Fatalf("crash report %+v: want transactions in doubt", c)
	}
	if res.Verdict != checker.Valid {
		t.Fatalf("%s: %s", res.Verdict, res.Summary)
	}
	// The outcome: the crash ended the run, which did not go on to its 5 s.
	if res.DurationS >= cfg.Duration.Seconds() {
		t.Errorf("the run went on for %.1fs, its whole time, after a crash at 1s", res.DurationS)
	}
	rec := res.TwoPhase.Recovery
	if len(rec) != len(c.InDoubt) {
		t.Errorf("recovery resolved %d branches, %d were in doubt", len(rec), len(c.InDoubt))
	}
	decided := map[string]string{}
	for _, r := range rec {
		if d, ok := decided[r.GID]; ok && d != r.Decision {
			t.Errorf("%s: %s on one participant, %s on another", r.GID, d, r.Decision)
		}
		decided[r.GID] = r.Decision
		if r.Error != "" {
			t.Errorf("resolution %+v failed", r)
		}
	}
	locks, blocked := 0, 0
	for _, d := range c.InDoubt {
		locks += d.Locks
	}
	for _, p := range c.Probes {
		if p.Error != "" {
			t.Errorf("probe %+v failed", p)
		}
		if p.Timeouts > 0 && p.BlockedMs >= 400 {
			blocked++
		}
	}
	if locks == 0 {
		t.Error("no in-doubt transaction holds a lock in pg_locks")
	}
	if blocked == 0 {
		t.Errorf("no probe was blocked until recovery: %+v", c.Probes)
	}
	// The crash is in the history as a nemesis event, and in faults.jsonl.
	_, ops, err := histories.ReadFile(filepath.Join(res.RunDir, "history.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ops, func(op histories.Op) bool { return !op.IsClient() && op.F == "coordinator-crash" }) {
		t.Error("the history holds no coordinator-crash event")
	}
	if b, _ := os.ReadFile(filepath.Join(res.RunDir, "faults.jsonl")); !bytes.Contains(b, []byte(`"coordinator_fault":"coordinator-crash"`)) {
		t.Errorf("faults.jsonl does not record the crash: %s", b)
	}
}

// TestTwoPhaseRefuses: settings that do not apply to a workload, and bad two-phase
// commit settings, are refused before anything launches, naming the field.
func TestTwoPhaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		edit        func(*runner.Config)
	}{
		{"servers on budget", "Servers", func(c *runner.Config) { c.Workload, c.Servers, c.DSNs = "budget", 3, nil }},
		{"placement on register", "Placement", func(c *runner.Config) { c.Workload, c.DSNs, c.Placement = "register", nil, transfer.Local }},
		{"too many servers", "Servers", func(c *runner.Config) { c.DSNs, c.Servers = nil, 9 }},
		{"a placement of none", "Placement", func(c *runner.Config) { c.Placement = "nowhere" }},
		{"a magic coordinator", "Coordinator", func(c *runner.Config) { c.Coordinator = "magic" }},
		{"crash of local transactions", "Faults", func(c *runner.Config) {
			c.Placement, c.Faults = transfer.Local, parseSchedule(t, "coordinator-crash@1s")
		}},
		{"faults of two phases", "Faults", func(c *runner.Config) { c.Faults = parseSchedule(t, "commit-cut@0s-1s", "prepare-drop@2s-3s") }},
		{"a kill", "Faults", func(c *runner.Config) { c.Faults = parseSchedule(t, "kill@1s-2s") }},
		{"naive retries", "Retry", func(c *runner.Config) { c.Retry = policy(t, "naive") }},
		{"reads on two-rows", "Reads", func(c *runner.Config) { c.Workload, c.Reads = workloads.TwoRows, 0.5 }},
		{"persistence on postgres", "Persistence", func(c *runner.Config) { c.Persistence = "always" }},
		{"one DSN", "DSN", func(c *runner.Config) { c.DSN, c.DSNs = c.DSNs[0], nil }},
		{"prepare-cut on budget", "Faults", func(c *runner.Config) { c.Workload, c.DSNs, c.Faults = "budget", nil, parseSchedule(t, "prepare-cut") }},
		{"a window after the end", "Faults", func(c *runner.Config) {
			c.Ops, c.Duration, c.Faults = 0, 3*time.Second, parseSchedule(t, "commit-cut:0.1@10s-20s")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := runner.Config{Workload: workloads.Transfer, Store: runner.Postgres, DSNs: []string{"postgres://a:1/x", "postgres://b:1/x"},
				Workers: 2, Ops: 5, Out: t.TempDir()}
			tc.edit(&cfg)
			err := cfg.Validate()
			var fe *runner.FieldError
			if !errors.Is(err, runner.ErrCouldNotRun) || !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("Validate: %v; want a FieldError on %s wrapped in ErrCouldNotRun", err, tc.field)
			}
			if left, _ := os.ReadDir(cfg.Out); len(left) != 0 {
				t.Errorf("%d entries in Out", len(left))
			}
		})
	}
}

// TestErrorsKeepTheirChain: an error that keeps a run from starting wraps
// ErrCouldNotRun and still unwraps to its cause, so that errors.Is and errors.As see
// through both.
func TestErrorsKeepTheirChain(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := budgetConfig(t)
	cfg.Out = filepath.Join(file, "runs")
	_, err := runner.Run(context.Background(), cfg)
	var pe *fs.PathError
	if !errors.Is(err, runner.ErrCouldNotRun) || !errors.Is(err, syscall.ENOTDIR) || !errors.As(err, &pe) {
		t.Fatalf("err = %v: want ErrCouldNotRun wrapping the *fs.PathError of ENOTDIR", err)
	}
}
