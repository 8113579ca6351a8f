package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/catalog"
	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/twopc"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/insert"
	"github.com/indoubt/indoubt/workloads/transfer"
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

Distributed transactions: --workload transfer (move 1 between two rows) or two-rows
(read two rows in one transaction) run over --servers PostgreSQL servers (2 to 5,
launched with prepared transactions on, or one --dsn per server), with the table
simplecount spread over them, --rows-per-worker rows per worker. --placement local keeps
both rows on one server; distributed puts them on two, committed by indoubt's
coordinator: PREPARE TRANSACTION on each, the decision fsynced to decisions.jsonl
(--coordinator logged; naive keeps no log and recovers by committing whatever is
prepared), COMMIT PREPARED on each. Recovery finishes what is left prepared before the
final reads; the checker then holds the history to: the total conserved, no transfer
half applied, none acknowledged and lost, none failed and applied, nothing left
prepared. Reads of the total across servers (--reads) that see half of a transfer are
counted as fractured reads, which do not make a run invalid. The faults: commit-cut,
commit-drop and commit-mixed act on COMMIT PREPARED, prepare-cut and prepare-drop on
PREPARE TRANSACTION (one phase per run), with windows as everywhere;
coordinator-crash@T kills the coordinator at T, abandoning its transactions in flight,
and ends the run: what is left in doubt is listed, writers time how long its rows stay
locked, and recovery runs after --recover-after. Each transaction runs once (--retry
none).

Examples of distributed transactions:
  indoubt run --workload transfer --placement distributed --servers 3 --time 10s
  indoubt run --workload transfer --fault coordinator-crash@2s --time 5s                       # valid after recovery
  indoubt run --workload transfer --fault coordinator-crash@2s --coordinator naive --time 5s  # exits 1
  indoubt run --workload transfer --fault prepare-cut:0.1@1s-3s --time 4s
  indoubt run --workload two-rows --placement local --servers 5 --workers 32 --time 10s

Listed faults fire exactly where listed, with no random decision: --fault
commit-cut@commit:N cuts the N-th commit point the proxy counts (from 1: the writes and
commits a fault can hit, in the order they reach the proxy, the workload's setup
included: the budget workload's makes points 1 to 3), and
commit-cut@conn:C/txn:T the T-th transaction (from 1) of the C-th connection the proxy
accepted (from 0); commit-drop likewise. faults.jsonl names every fault both ways
(point, conn_index, txn.seq), so a fault of one run can be listed in the next;
indoubt shrink writes its reproducers with them. With one worker the N-th commit point
is the same operation in every run.
  indoubt run --workers 1 --ops 5 --budget 3 --retry naive --fault commit-cut@commit:5   # exits 1

Flags that do not apply to the workload or store (--persistence on PostgreSQL, --fsync
on Redis, --rounds on budget, --servers on budget, ...) are refused by name, and so is a
fault that starts after a --time run has ended; with --ops the run's length is not
known in advance, so a fault that never started is named in a warning after the run.

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
		return flagError(err)
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
		for _, d := range append([]string{a.cfg.DSN}, a.cfg.DSNs...) {
			err = redact.Error(err, d)
		}
		return err
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
		fmt.Fprintf(stdout, "%s\n", console.JSON(b))
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
					return fmt.Errorf("%s: %w", s, flagError(err))
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
		timeFlag = fs.Duration("time", 0, "run for this long instead of a number of operations (e.g. 30s); with process faults, until an operation is acknowledged after the last one ended, at most --recovery-wait longer")
		retry    = fs.String("retry", "", "retry policy: none, conflict, naive, idempotent, driver (default none; conflict for the counter)")
		workload = fs.String("workload", string(workloads.Budget), "workload: budget, register, counter, insert; list-append and rw-register (transactions of micro-ops, checked for isolation); transfer and two-rows (two-phase commit over several servers)")
		specs    multiFlag
		dsns     multiFlag
		place    = fs.String("placement", "", "transfer, two-rows: local (both rows on one server) or distributed (on two, two-phase commit; the default)")
		coord    = fs.String("coordinator", "", "transfer, two-rows: logged (decision log, presumed abort; the default) or naive (recovery commits whatever is prepared)")
		reads    = fs.Float64("reads", 0.1, "transfer: share of the operations that read the total across the servers")
		quiet    = fs.Bool("quiet", false, "no progress on stderr (neither launch lines nor the live line)")
		checkTO  = fs.Duration("check-timeout", time.Minute, "longest a search checker may take before the verdict is unknown")
		keys     = fs.String("key", string(insert.Identity), "insert workload: primary-key shape, a comma list, or all: "+choice.List(insert.Keys))
		models   = fs.String("consistency-models", "", "list-append, rw-register: the models the history is checked for, comma-separated (default: the store's promise, e.g. serializable)")
	)
	fs.IntVar(&cfg.Txn.Keys, "txn-keys", 0, "list-append, rw-register: keys active at a time (default 10)")
	fs.IntVar(&cfg.Txn.MaxOps, "txn-ops", 0, "list-append, rw-register: at most this many micro-ops a transaction (default 4)")
	fs.Float64Var(&cfg.Txn.ReadFraction, "read-fraction", 0, "list-append, rw-register: probability that a micro-op is a read (default 0.5)")
	fs.StringVar((*string)(&cfg.Txn.Distribution), "distribution", "", "list-append, rw-register: key distribution, uniform (default) or zipf")
	fs.StringVar((*string)(&cfg.Txn.Pattern), "pattern", "", "list-append, rw-register: random (default) or read-modify-write transactions")
	fs.IntVar(&cfg.Txn.MaxWritesPerKey, "max-writes-per-key", 0, "list-append, rw-register: writes to a key before a fresh key replaces it")
	fs.StringVar(&cfg.ReadFrom, "read-from", "", "list-append, rw-register on --topology replicated PostgreSQL: where read-only transactions run, primary (default) or standby")
	fs.IntVar(&a.rounds, "rounds", 1, "insert workload: rounds of every key shape, each round in a rotated order")
	fs.StringVar(&a.store, "store", "", "store: postgres, redis, mongo, cql, cockroach, mysql, etcd, or all (default: all launchable here; with --dsn, the DSN's scheme)")
	fs.BoolVar(&a.jsonOut, "json", false, "print results.json to stdout (the summary goes to stderr)")
	fs.StringVar(&cfg.PGVersion, "pg-version", "", "a launched PostgreSQL's version: 15, 18 (scripts/prepare-postgres18), or a directory of its binaries (default: INDOUBT_PG_VERSION, INDOUBT_PG_BIN, else the installed one)")
	fs.StringVar(&cfg.Persistence, "persistence", "", "a launched Redis's durability: none (the default), everysec, always")
	fs.IntVar(&cfg.Servers, "servers", 0, "transfer, two-rows: PostgreSQL servers to launch, 2 to 5 (default 2)")
	fs.IntVar(&cfg.RowsPerWorker, "rows-per-worker", 0, "transfer, two-rows: rows of the table per worker (default 1000)")
	fs.DurationVar(&cfg.RecoveryWait, "recovery-wait", 0, "a --time run with process faults: how long past --time it goes on, at most, for an operation acknowledged after the last fault (default 1m)")
	fs.DurationVar(&cfg.RecoverAfter, "recover-after", 0, "transfer, two-rows: after coordinator-crash@T, how long its transactions stay in doubt before recovery (default 1s)")
	fs.StringVar(&cfg.SynchronousCommit, "synchronous-commit", "", "a launched PostgreSQL's synchronous_commit: on or off (default PostgreSQL's, on)")
	fs.StringVar(&cfg.Fsync, "fsync", "", "a launched PostgreSQL's fsync: on or off (default PostgreSQL's, on)")
	fs.StringVar(&cfg.CommitLogSync, "commitlog-sync", "", "a launched Cassandra's commitlog_sync: periodic (acknowledge at once, sync every 10000ms), batch (sync before acknowledging) or group (batch sharing a sync per 15ms window); default Cassandra's, periodic")
	fs.BoolVar(&cfg.PowerFS, "powerfs", false, "put a launched PostgreSQL's, Redis's or Cassandra's data directory on powerfs, which can forget what was never fsynced (implied by --fault power-loss@T; needs root and /dev/fuse)")
	fs.StringVar(&cfg.PowerFSEntries, "powerfs-entries", "posix", "powerfs's rule for new, removed and renamed names: posix (durable once their directory is fsynced) or ordered (a journaling filesystem's: any fsync makes earlier ones durable; launched Cassandra only)")
	fs.StringVar(&cfg.Topology, "topology", "single", "launched server: single, replicated (PostgreSQL: a primary and a streaming standby; Redis: a primary, a replica and 3 Sentinels; etcd: 3 members; --fault failover@T), or patroni (PostgreSQL: 3 nodes under Patroni with an etcd DCS; --replication sync for its synchronous mode)")
	fs.StringVar(&cfg.Replication, "replication", "async", "replicated topology: async, or sync (every commit waits for the standby; PostgreSQL only)")
	fs.StringVar(&cfg.Network, "network", "", "isolated: every launched node in a network namespace of its own (root and nftables; implied by --fault partition:SHAPE@START-END; Redis replicated is then Jepsen's five nodes)")
	fs.Var(&dsns, "dsn", "connect to this server instead of launching one (a URL, e.g. postgres://user@host:5432/db); transfer, two-rows: once per server, 2 to 5, prepared transactions on")
	fs.IntVar(&cfg.Ops, "ops", 100, "operations per worker (ignored with --time)")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of every random choice (fault decisions, backoff, generators)")
	fs.StringVar(&cfg.Out, "out", "runs", "parent directory of run directories")
	fs.StringVar(&cfg.Mechanism, "mechanism", "", "store mechanism: postgres budget: autocommit (default) or transaction; counter: increment (default), read-write, for-update")
	fs.StringVar(&cfg.Isolation, "isolation", "", "counter: transaction isolation, verified in every transaction: serializable (default), repeatable-read, read-committed")
	fs.Int64Var(&cfg.Budget, "budget", 1000, "budget workload: the initial balance")
	fs.IntVar(&cfg.Keys, "keys", 0, "register workload: the number of registers (default 8)")
	fs.IntVar(&cfg.MaxAnomalies, "max-anomalies", results.DefaultMaxAnomalies, "list at most this many anomalies and ground-truth items in results.json and the console (counts stay exact; -1 lists all)")
	fs.Var(&specs, "fault", "fault NAME[:P][@START-END], repeatable: commit-cut, commit-drop, commit-mixed, latency, ...; on a launched server kill@START-END, pause@START-END, restart@T, failover@T, power-loss[:tear]@T; transfer, two-rows: prepare-cut, prepare-drop, coordinator-crash@T")
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
	if *models != "" {
		for _, m := range strings.Split(*models, ",") {
			cfg.Txn.ConsistencyModels = append(cfg.Txn.ConsistencyModels, strings.TrimSpace(m))
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := applies(set, w); err != nil {
		return a, err
	}
	twoPhase := w == workloads.Transfer || w == workloads.TwoRows
	switch {
	case twoPhase:
		cfg.DSNs = dsns
	case len(dsns) > 1:
		return a, fmt.Errorf("run: --dsn given %d times: only the transfer and two-rows workloads run over several servers", len(dsns))
	case len(dsns) == 1:
		cfg.DSN = dsns[0]
	}
	cfg.Placement, cfg.Coordinator = transfer.Placement(*place), twopc.Mode(*coord)
	if w == workloads.Transfer || set["reads"] {
		cfg.Reads = *reads // refused by the runner where it does not apply
	}
	if w != workloads.Budget {
		cfg.Budget = 0
	}
	if *retry == "" {
		*retry = string(runner.DefaultPolicy(w))
	}
	if cfg.Retry, err = runner.ParsePolicy(*retry); err != nil {
		return a, fmt.Errorf("run: %v", err)
	}
	if cfg.Faults, err = schedule.Parse(specs); err != nil {
		return a, fmt.Errorf("run: %v", err)
	}
	cfg.CheckTimeout = *checkTO
	if *timeFlag > 0 || set["time"] {
		cfg.Duration, cfg.Ops = *timeFlag, 0
	}
	// The bounds of what was given, as a suite's keys have them (runner.Settings): a zero
	// or negative duration has no meaning here, and is refused rather than read as "the
	// default" (--time) or "no limit" (--check-timeout).
	set["check-timeout"], set["max-anomalies"] = true, true
	for _, s := range runner.Settings {
		if set[s.Flag] && s.Flag != "workers" {
			if err := s.Bounds(*cfg); err != nil {
				return a, flagError(err)
			}
		}
	}
	if a.counts, err = parseCounts(*workers); err != nil {
		return a, fmt.Errorf("run: --workers: %v", err)
	}
	if a.keys, err = insert.ParseKeys(*keys); err != nil {
		return a, fmt.Errorf("run: --key: %v", err)
	}
	if a.rounds < 1 {
		return a, fmt.Errorf("run: --rounds must be at least 1")
	}
	if cfg.PGVersion != "" && cfg.DSN == "" && len(cfg.DSNs) == 0 {
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

// applies refuses, by name, a flag given for a workload it does not apply to, when the
// runner cannot tell (the flag has a default, or is the command line's own). The flags
// of Config fields whose zero value means "not set" are the runner's to refuse
// (runner.FieldError, named by flagError).
func applies(set map[string]bool, w workloads.Name) error {
	for _, f := range []struct {
		flag string
		ok   bool
	}{
		{"budget", w == workloads.Budget},
		{"rounds", w == workloads.Insert},
		{"key", w == workloads.Insert},
	} {
		if set[f.flag] && !f.ok {
			return fmt.Errorf("run: --%s does not apply to the %s workload", f.flag, w)
		}
	}
	return nil
}

// flagError says a runner.FieldError in the command line's words: the flag of its field
// (runner.Settings).
func flagError(err error) error {
	var fe *runner.FieldError
	if errors.As(err, &fe) {
		if s, ok := runner.SettingByField(fe.Field); ok && s.Flag != "" {
			return fmt.Errorf("run: --%s: %s", s.Flag, fe.Text(flagName))
		}
	}
	return err
}

// flagName names a Config field as the command line does: its flag.
func flagName(field string) string {
	if s, ok := runner.SettingByField(field); ok && s.Flag != "" {
		return "--" + s.Flag
	}
	return "Config." + field
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
			unlock, err := lockDSN(ctx, c.Store, c.DSN)
			if err != nil {
				return nil, fmt.Errorf("run: %w", err)
			}
			res, err := runner.Run(ctx, c)
			unlock()
			if err != nil {
				if len(stores) > 1 {
					return nil, fmt.Errorf("%s: %w", store, flagError(err))
				}
				return nil, flagError(err)
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
		writeTwoPhase(w, all[0])
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
	console.Fprintf(w, "summary: %s\n", path)
	return nil
}

// pickStores resolves --store: one store, or every store launchable here that has the
// workload, with a line for each store skipped (printed once the runs are validated).
// Without --store, a --dsn names its store by its scheme.
func pickStores(cfg runner.Config, store string) ([]runner.StoreName, []string, error) {
	dsn := cfg.DSN
	if len(cfg.DSNs) > 0 {
		dsn = cfg.DSNs[0]
	}
	if store == "" && dsn != "" {
		s, ok := runner.StoreFromDSN(dsn)
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
	if dsn != "" {
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
	w, _ := runner.SettingByFlag("workers")
	var out []int
	for _, p := range strings.Split(s, ",") {
		var c runner.Config
		if err := w.Set(&c, p); err != nil {
			return nil, err
		}
		var fe *runner.FieldError
		if err := w.Bounds(c); errors.As(err, &fe) {
			return nil, fe.Err
		}
		out = append(out, c.Workers)
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

// writeTwoPhase prints a transfer or two-rows run's two-phase commit section: its
// transactions, what a coordinator crash left in doubt, and what recovery did.
func writeTwoPhase(w io.Writer, r *results.Results) {
	tp := r.TwoPhase
	if tp == nil {
		return
	}
	tx := tp.Transactions
	console.Fprintf(w, "two-phase commit: %s over %d servers, coordinator %s: %d transactions committed, %d aborted, %d abandoned; %.0f committed/s, mean %.2f ms, p99 %.2f ms\n",
		tp.Placement, tp.Servers, tp.Coordinator, tx.Committed, tx.Aborted, tx.Abandoned, tp.CommittedPerSecond, tp.LatencyMs.Mean, tp.LatencyMs.P99)
	if f, ok := r.Final.(transfer.Final); ok && r.Workload == workloads.Transfer {
		total := "none read"
		if f.Total != nil {
			total = strconv.FormatInt(*f.Total, 10)
		}
		console.Fprintf(w, "  total %s (want %d); transfers ok %d, failed %d, unknown %d (%d of them applied); %d reads of the total, %d fractured\n",
			total, f.Expected, f.Applied, f.Rejected, f.Unknown, f.UnknownApplied, f.Reads, f.FracturedReads)
	}
	if c := tp.Crash; c != nil {
		console.Fprintf(w, "  coordinator crash at %.2fs: abandoned %v; %d branches in doubt\n", c.AtS, counts(c.Stops), len(c.InDoubt))
		for i, d := range c.InDoubt {
			if i == 10 {
				console.Fprintf(w, "    ... and %d more in results.json\n", len(c.InDoubt)-10)
				break
			}
			console.Fprintf(w, "    %s on server %d: prepared %.0f ms before, %d locks\n", d.GID, d.Server, d.AgeMs, d.Locks)
		}
		var worst float64
		blocked := 0
		for _, p := range c.Probes {
			if p.Timeouts > 0 {
				blocked++
				worst = max(worst, p.BlockedMs)
			}
		}
		console.Fprintf(w, "  %d of %d writers blocked by in-doubt rows, longest %.0f ms; recovery took %.1f ms, %.0f ms after the crash\n",
			blocked, len(c.Probes), worst, c.RecoveryMs, c.ResolvedMs)
	}
	if len(tp.Recovery) > 0 {
		decided := map[string]int{}
		for _, x := range tp.Recovery {
			decided[x.Decision]++
		}
		console.Fprintf(w, "  recovery: %d committed, %d rolled back\n", decided["commit"], decided["abort"])
	}
}

// counts shows counts by name in name order: "a=1 b=2".
func counts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// shareInitdb makes the PostgreSQL servers that a command launches, until the returned
// function is called, copies of one initdb'd cluster (postgres.ShareInitdb): a suite
// or a shrink launches one for every run. The function removes the template and says
// on stderr when it could not.
func shareInitdb(stderr io.Writer) func() {
	release := postgres.ShareInitdb()
	return func() {
		if err := release(); err != nil {
			fmt.Fprintf(stderr, "indoubt: %v\n", err)
		}
	}
}
