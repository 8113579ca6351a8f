package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/catalog"
	"github.com/indoubt/indoubt/workloads/insert"
)

const runHelp = `indoubt run: run a workload against a database, record every operation in a
history, check it, and report what correctness cost.

Without --dsn it launches a throwaway local server (PostgreSQL from the installed
binaries) and stops it afterwards. With --fault it puts the commit-aware proxy in front.
Each run writes a directory under --out: config.json, history.jsonl, faults.jsonl,
results.json, report.html, and the launched server's log.

Usage: indoubt run [flags]

Examples:
  indoubt run                                   # the stand: budget 1000, 16 workers x 100 attempts, every local store
  indoubt run --store postgres
  indoubt run --time 30s --workers 32
  indoubt run --fault commit-cut:0.2 --retry naive        # exits 1: double-applied decrements
  indoubt run --fault commit-cut:0.2 --retry idempotent   # exits 0: reconciles exactly
  indoubt run --dsn postgres://user@db:5432/app --json > results.json
  indoubt run --workload counter --mechanism read-write --workers 1,4,16,32 --time 10s   # contention sweep
  indoubt run --workload counter --mechanism read-write --isolation read-committed --workers 16 --time 10s
  indoubt run --workload insert --key all --workers 16,32,64 --time 30s --pg-version 18   # primary-key table
  indoubt run --workload insert --key bigserial,client-mono --fault commit-cut:0.1 --retry naive --time 10s

Exit codes: 0 valid, 1 invalid, 2 unknown, 3 could not run. An interrupted run
(SIGINT, SIGTERM) is checked and published as far as it got, and exits 2 when that is
valid so far, 1 when it already shows an anomaly: never 0. Every flag is checked before
any server launches.

A DSN's password and other secrets (URL user info, password= and similar query or
keyword=value parameters) are masked wherever the run writes or prints it. The run
directory is created 0700, and config.json and results.json 0600.
`

// multiFlag collects a repeatable flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// runArgs is what the run command's flags ask for, parsed.
type runArgs struct {
	cfg     runner.Config
	counts  []int
	keys    []insert.Key // the insert workload's key shapes (--key)
	rounds  int          // the insert workload's rounds (--rounds)
	store   string       // --store as given: a store, all, or empty
	jsonOut bool
}

func runCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if twoPCWorkload(args) {
		return runTwoPC(ctx, args, stdout, stderr)
	}
	a, err := parseRunArgs(args, stdout, stderr)
	if err != nil {
		return err
	}
	human := stdout
	if a.jsonOut {
		human = stderr
	}
	stores, skipped, err := pickStores(a.cfg, a.store)
	if err != nil {
		return err
	}
	if err := validateEach(a.cfg, stores, a.counts); err != nil {
		return err
	}
	for _, s := range skipped {
		fmt.Fprintln(stderr, s)
	}
	var all []*results.Results
	if a.cfg.Workload == workloads.Insert {
		all, err = runInserts(ctx, a, stores)
	} else {
		all, err = runEach(ctx, a.cfg, stores, a.counts)
	}
	if a.cfg.OnProgress != nil {
		fmt.Fprint(stderr, "\r\033[K") // the live line ends with the run
	}
	if err != nil {
		// Drivers quote DSNs in their errors; the runner scrubs what it returns, and
		// this catches whatever reaches the console another way.
		return redact.Error(err, a.cfg.DSN)
	}
	if err := printRuns(human, a.cfg, all, len(stores)); err != nil {
		return err
	}
	if a.jsonOut {
		var v any = all[0]
		if len(all) > 1 {
			v = all
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return verdictOf(all, ctx.Err() != nil)
}

// validateEach checks every run the command will make before the first launches a
// server: a bad --mechanism for the third store must not wait behind two runs.
func validateEach(cfg runner.Config, stores []runner.StoreName, counts []int) error {
	for _, s := range stores {
		for _, n := range counts {
			c := cfg
			c.Store, c.Workers = s, n
			if err := c.Validate(); err != nil {
				if len(stores) > 1 {
					return fmt.Errorf("%s: %w", s, err)
				}
				return err
			}
		}
	}
	return nil
}

// parseRunArgs parses the run command's flags into a configuration with typed,
// validated values: the workload, the retry policy and the fault schedule.
func parseRunArgs(args []string, stdout, stderr io.Writer) (runArgs, error) {
	fs := newFlags("run", runHelp, stdout)
	var (
		a        runArgs
		cfg      = &a.cfg
		workers  = fs.String("workers", "16", "concurrent workers; a comma list (1,4,16,32) runs one sweep row per count")
		timeFlag = fs.Duration("time", 0, "run for this long instead of a number of operations (e.g. 30s)")
		retry    = fs.String("retry", "", "retry policy: none, conflict, naive, idempotent, driver (default none; conflict for the counter)")
		workload = fs.String("workload", string(workloads.Budget), "workload: budget, register, counter, insert; transfer and two-rows (two-phase commit over several servers: see --workload transfer --help)")
		specs    multiFlag
		quiet    = fs.Bool("quiet", false, "no progress on stderr (neither launch lines nor the live line)")
		checkTO  = fs.Duration("check-timeout", time.Minute, "longest a search checker may take before the verdict is unknown")
		keys     = fs.String("key", string(insert.Identity), "insert workload: primary-key shape, a comma list, or all: "+choice.List(insert.Keys))
	)
	fs.IntVar(&a.rounds, "rounds", 1, "insert workload: rounds of every key shape, each round in a rotated order")
	fs.StringVar(&a.store, "store", "", "store: postgres, redis, mongo, cql, cockroach, or all (default: all launchable here; with --dsn, the DSN's scheme)")
	fs.BoolVar(&a.jsonOut, "json", false, "print results.json to stdout (the summary goes to stderr)")
	fs.StringVar(&cfg.PGVersion, "pg-version", "", "a launched PostgreSQL's version: 15, 18 (scripts/prepare-postgres18), or a directory of its binaries (default: INDOUBT_PG_VERSION, INDOUBT_PG_BIN, else the installed one)")
	fs.StringVar(&cfg.Persistence, "persistence", "none", "a launched Redis's durability: none, everysec, always")
	fs.StringVar(&cfg.SynchronousCommit, "synchronous-commit", "", "a launched PostgreSQL's synchronous_commit: on or off (default PostgreSQL's, on)")
	fs.StringVar(&cfg.Fsync, "fsync", "", "a launched PostgreSQL's fsync: on or off (default PostgreSQL's, on)")
	fs.StringVar(&cfg.CommitLogSync, "commitlog-sync", "", "a launched Cassandra's commitlog_sync: periodic (acknowledge at once, sync every 10000ms), batch (sync before acknowledging) or group (batch sharing a sync per 15ms window); default Cassandra's, periodic")
	fs.BoolVar(&cfg.PowerFS, "powerfs", false, "put a launched PostgreSQL's, Redis's or Cassandra's data directory on powerfs, which can forget what was never fsynced (implied by --fault power-loss@T; needs root and /dev/fuse)")
	fs.StringVar(&cfg.PowerFSEntries, "powerfs-entries", "posix", "powerfs's rule for new, removed and renamed names: posix (durable once their directory is fsynced) or ordered (a journaling filesystem's: any fsync makes earlier ones durable; launched Cassandra only)")
	fs.StringVar(&cfg.Topology, "topology", "single", "launched server: single, or replicated (PostgreSQL: a primary and a streaming standby; Redis: a primary, a replica and 3 Sentinels; --fault failover@T)")
	fs.StringVar(&cfg.Replication, "replication", "async", "replicated topology: async, or sync (every commit waits for the standby; PostgreSQL only)")
	fs.StringVar(&cfg.Network, "network", "", "isolated: every launched node in a network namespace of its own (root and nftables; implied by --fault partition:SHAPE@START-END; Redis replicated is then Jepsen's five nodes)")
	fs.StringVar(&cfg.DSN, "dsn", "", "connect to this server instead of launching one (a URL, e.g. postgres://user@host:5432/db)")
	fs.IntVar(&cfg.Ops, "ops", 100, "operations per worker (ignored with --time)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of every random choice (fault decisions, backoff, generators)")
	fs.StringVar(&cfg.Out, "out", "runs", "parent directory of run directories")
	fs.StringVar(&cfg.Mechanism, "mechanism", "", "store mechanism: postgres budget: autocommit (default) or transaction; counter: increment (default), read-write, for-update")
	fs.StringVar(&cfg.Isolation, "isolation", "", "counter: transaction isolation, verified in every transaction: serializable (default), repeatable-read, read-committed")
	fs.Int64Var(&cfg.Budget, "budget", 1000, "budget workload: the initial balance")
	fs.IntVar(&cfg.MaxAnomalies, "max-anomalies", results.DefaultMaxAnomalies, "list at most this many anomalies and ground-truth items in results.json and the console (counts stay exact; -1 lists all)")
	fs.Var(&specs, "fault", "fault NAME[:P][@START-END], repeatable: commit-cut, commit-drop, commit-mixed, latency, ...; on a launched server kill@START-END, pause@START-END, restart@T, failover@T, power-loss[:tear]@T")
	fs.StringVar(&cfg.Proxy, "proxy", "auto", "put the fault proxy in front: auto (when --fault is given), on, off")
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	if fs.NArg() > 0 {
		return a, fmt.Errorf("run: unexpected argument %q", fs.Arg(0))
	}
	w, err := catalog.Parse(*workload)
	if err != nil {
		return a, fmt.Errorf("run: %v", err)
	}
	cfg.Workload = w
	if *retry == "" {
		*retry = string(runner.DefaultPolicy(w))
	}
	if cfg.Retry, err = runner.ParsePolicy(*retry); err != nil {
		return a, fmt.Errorf("run: %v", err)
	}
	if cfg.Faults, err = faults.ParseSchedule(specs); err != nil {
		return a, fmt.Errorf("run: %v", err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// A zero or negative duration has no meaning here: refused, rather than read as
	// "the default" (--time) or "no limit" (--check-timeout).
	if *checkTO <= 0 {
		return a, fmt.Errorf("run: --check-timeout must be positive (got %v)", *checkTO)
	}
	cfg.CheckTimeout = *checkTO
	if set["time"] && *timeFlag <= 0 {
		return a, fmt.Errorf("run: --time must be positive (got %v)", *timeFlag)
	}
	if *timeFlag > 0 {
		cfg.Duration, cfg.Ops = *timeFlag, 0
	}
	if cfg.Budget < 0 {
		return a, fmt.Errorf("run: --budget must not be negative")
	}
	if a.counts, err = parseCounts(*workers); err != nil {
		return a, fmt.Errorf("run: --workers: %v", err)
	}
	if cfg.MaxAnomalies < 1 && cfg.MaxAnomalies != -1 {
		return a, fmt.Errorf("run: --max-anomalies must be at least 1, or -1 for all")
	}
	if a.keys, err = insert.ParseKeys(*keys); err != nil {
		return a, fmt.Errorf("run: --key: %v", err)
	}
	if a.rounds < 1 {
		return a, fmt.Errorf("run: --rounds must be at least 1")
	}
	if cfg.PGVersion != "" && cfg.DSN == "" {
		// Refused before anything is launched, in one line.
		if _, err := postgres.Bin(cfg.PGVersion); err != nil {
			return a, fmt.Errorf("run: --pg-version: %v", err)
		}
	}
	if !*quiet {
		cfg.Progress = stderr
		if !a.jsonOut && isTerminal(stdout) && isTerminal(stderr) {
			t := &terminal{w: stderr}
			cfg.Progress, cfg.OnProgress = t, t.live
		}
	}
	return a, nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// terminal is stderr on a terminal: one progress line rewritten in place (live) with
// the run's messages (a fault applied, a round begun) printed above it, each on a line
// of its own.
type terminal struct {
	mu   sync.Mutex
	w    io.Writer
	line string // the live line on screen now, "" when none
}

// Write prints a message above the live line: it clears the line, writes the message
// and draws the line again.
func (t *terminal) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.line == "" {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, "\r\033[K"); err != nil {
		return 0, err
	}
	n, err := t.w.Write(p)
	if err == nil {
		_, err = io.WriteString(t.w, t.line)
	}
	return n, err
}

// live rewrites the progress line once a run has lasted two seconds.
func (t *terminal) live(p runner.Progress) {
	if p.Elapsed < 2*time.Second {
		return
	}
	line := liveLine(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.line = line
	fmt.Fprintf(t.w, "\r\033[K%s", line)
}

// liveLine is the progress line: elapsed time, operations, their rate, the faults the
// proxy fired (when there is a proxy), the process faults applied and the server's state
// while one has it down or paused, and the time left when it is known.
func liveLine(p runner.Progress) string {
	rate := float64(p.Completed) / p.Elapsed.Seconds()
	line := fmt.Sprintf("%5.1fs  %d ops  %.0f tx/s", p.Elapsed.Seconds(), p.Completed, rate)
	if p.Proxied {
		line += fmt.Sprintf("  %d faults fired", p.Faults)
	}
	if p.ProcessFaults > 0 {
		line += fmt.Sprintf("  %d process faults", p.ProcessFaults)
	}
	if p.Server != "" {
		line += "  server " + p.Server
	}
	switch {
	case p.Total > 0 && rate > 0:
		left := time.Duration(float64(p.Total-p.Completed) / rate * float64(time.Second))
		line += fmt.Sprintf("  %d/%d  ETA %s", p.Completed, p.Total, left.Round(time.Second))
	case p.Duration > 0:
		line += fmt.Sprintf("  %s left", max(0, p.Duration-p.Elapsed).Round(time.Second))
	}
	return line
}

// runEach runs every store at every worker count, and stops early when ctx ends.
func runEach(ctx context.Context, cfg runner.Config, stores []runner.StoreName, counts []int) ([]*results.Results, error) {
	var all []*results.Results
	for _, store := range stores {
		for _, n := range counts {
			c := cfg
			c.Store, c.Workers = store, n
			res, err := runner.Run(ctx, c)
			if err != nil {
				if len(stores) > 1 {
					return nil, fmt.Errorf("%s: %w", store, err)
				}
				return nil, err
			}
			all = append(all, res)
			if ctx.Err() != nil {
				return all, nil
			}
		}
	}
	return all, nil
}

// runInserts runs the insert workload's table (runner.InsertTable) on every store.
func runInserts(ctx context.Context, a runArgs, stores []runner.StoreName) ([]*results.Results, error) {
	var all []*results.Results
	for _, store := range stores {
		c := a.cfg
		c.Store = store
		res, err := runner.InsertTable(ctx, c, a.keys, a.counts, a.rounds)
		all = append(all, res...)
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// printRuns prints one run's summary, or the table (a sweep for the counter on one
// store) of several runs and the path of their summary.json.
func printRuns(w io.Writer, cfg runner.Config, all []*results.Results, stores int) error {
	if len(all) == 1 {
		report.WriteSummary(w, all[0])
		report.WriteCounterFinal(w, all[0])
		if cfg.Workload == workloads.Insert {
			report.WriteInsertTable(w, all)
		}
		return nil
	}
	if cfg.Workload == workloads.Insert {
		report.WriteInsertTable(w, all)
	} else if cfg.Workload == workloads.Counter && stores == 1 {
		report.WriteSweep(w, all)
	} else {
		report.WriteTable(w, all)
	}
	path, err := writeSummary(cfg.Out, all)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "summary: %s\n", path)
	return nil
}

// pickStores resolves --store: one store, or every store launchable here that has the
// workload, with a line for each store skipped (printed once the runs are validated).
// Without --store, a --dsn names its store by its scheme.
func pickStores(cfg runner.Config, store string) ([]runner.StoreName, []string, error) {
	if store == "" && cfg.DSN != "" {
		s, ok := runner.StoreFromDSN(cfg.DSN)
		if !ok {
			return nil, nil, fmt.Errorf("run: cannot tell the store from the DSN's scheme: give --store")
		}
		return []runner.StoreName{s}, nil, nil
	}
	if store == "" {
		store = "all"
	}
	if store != "all" {
		return []runner.StoreName{runner.StoreName(store)}, nil, nil
	}
	if cfg.DSN != "" {
		return nil, nil, fmt.Errorf("run: --store all launches its servers; it takes no --dsn")
	}
	var out []runner.StoreName
	var skipped []string
	for _, s := range runner.StoreNames() {
		if !runner.Supports(s, cfg.Workload) {
			continue
		}
		if err := runner.Available(s); err != nil {
			skipped = append(skipped, fmt.Sprintf("skipping %s: %v", s, err))
			continue
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, nil, fmt.Errorf("run: no store with the %s workload can be launched here", cfg.Workload)
	}
	return out, skipped, nil
}

// verdictOf turns the worst verdict of the runs into the exit code. An interrupted
// command never passes: what it recorded may be valid so far (unknown, exit 2), but not
// what it was asked to run; an anomaly already found still fails it (exit 1).
func verdictOf(all []*results.Results, interrupted bool) error {
	worst := checker.Valid
	for _, r := range all {
		v := r.Verdict
		if r.Interrupted && v == checker.Valid {
			v = checker.Unknown
		}
		if v == checker.Invalid || (v == checker.Unknown && worst == checker.Valid) {
			worst = v
		}
	}
	if interrupted && worst == checker.Valid {
		worst = checker.Unknown
	}
	if code := worst.ExitCode(); code != 0 {
		return verdictExit{code}
	}
	return nil
}

func parseCounts(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("%q is not a worker count from 1 to 4096", p)
		}
		out = append(out, n)
	}
	return out, nil
}

// Summary is summary.json: the runs one command made.
type Summary struct {
	Runs []SummaryRow `json:"runs"`
}

// SummaryRow names one run and its headline figures.
type SummaryRow struct {
	RunDir     string          `json:"run_dir"`
	Store      string          `json:"store"`
	Workload   workloads.Name  `json:"workload"`
	Workers    int             `json:"workers"`
	Verdict    checker.Verdict `json:"verdict"`
	Throughput float64         `json:"throughput"`
}

func writeSummary(out string, all []*results.Results) (string, error) {
	var s Summary
	for _, r := range all {
		s.Runs = append(s.Runs, SummaryRow{RunDir: r.RunDir, Store: r.Store, Workload: r.Workload, Workers: r.Workers, Verdict: r.Verdict, Throughput: r.Throughput})
	}
	path := filepath.Join(out, "summary-"+time.Now().Format("20060102-150405.000")+".json")
	b, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write summary: %v", err)
	}
	if err := report.WriteSummaryHTML(strings.TrimSuffix(path, ".json")+".html", all); err != nil {
		return "", fmt.Errorf("write summary: %v", err)
	}
	return path, nil
}
