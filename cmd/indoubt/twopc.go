package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/twopc"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

const twoPCHelp = `indoubt run --workload transfer|two-rows: distributed transactions over several
PostgreSQL servers, committed with two-phase commit through indoubt's coordinator.

It launches --servers throwaway PostgreSQL servers (max_prepared_transactions on) and a
table simplecount (id, counter) spread over them, --rows-per-worker rows per worker.
transfer moves 1 between two rows; two-rows reads two rows (the Schism paper's
workload). --placement local keeps both rows on one server (a local transaction);
distributed puts them on two servers: BEGIN and the work on each, PREPARE TRANSACTION
on each, the decision fsynced to decisions.jsonl (--coordinator logged), COMMIT
PREPARED on each. After the run, recovery finishes whatever is still prepared from the
decision log; the check then reads every server: the total must be conserved, no
transfer half applied, nothing left prepared. Reads of the total across servers that
see half of a transfer are counted as fractured reads, which do not make a run invalid.

Faults (--fault, repeatable): commit-cut[:P], commit-drop[:P] at COMMIT PREPARED;
prepare-cut[:P], prepare-drop[:P] at PREPARE TRANSACTION (through the commit-aware proxy,
P per point, default 0.1); coordinator-crash@T: the coordinator dies T after the start,
abandoning its transactions in flight between the phases; the run ends, the
transactions left in doubt are listed, writers time how long their rows stay locked,
and recovery runs after --recover-after.

Examples:
  indoubt run --workload transfer --placement distributed --servers 3 --time 10s
  indoubt run --workload transfer --fault coordinator-crash@2s --time 5s
  indoubt run --workload transfer --fault coordinator-crash@2s --coordinator naive --time 5s  # exits 1
  indoubt run --workload two-rows --placement local --servers 5 --workers 32 --time 10s

Exit codes: 0 valid, 1 invalid, 3 could not run.
`

// twoPCWorkload reports whether args ask for a two-phase commit workload, which runs
// on its own path (internal/twopc) rather than the single-store runner.
func twoPCWorkload(args []string) bool {
	for i, a := range args {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "workload" {
			continue
		}
		if !hasVal && i+1 < len(args) {
			val = args[i+1]
		}
		return val == string(workloads.Transfer) || val == string(workloads.TwoRows)
	}
	return false
}

func runTwoPC(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", twoPCHelp, stdout)
	var (
		cfg       twopc.Config
		specs     multiFlag
		dsns      multiFlag
		workload  = fs.String("workload", string(workloads.Transfer), "transfer or two-rows")
		placement = fs.String("placement", string(transfer.Distributed), "local (both rows on one server) or distributed (two servers, two-phase commit)")
		coord     = fs.String("coordinator", string(twopc.Logged), "logged (decision log, presumed abort) or naive (commits whatever is prepared)")
		jsonOut   = fs.Bool("json", false, "print results.json to stdout (the summary goes to stderr)")
		quiet     = fs.Bool("quiet", false, "no progress lines on stderr")
	)
	fs.IntVar(&cfg.Servers, "servers", 2, "PostgreSQL servers to launch, 2 to 5")
	fs.IntVar(&cfg.Workers, "workers", 16, "concurrent clients")
	fs.IntVar(&cfg.Ops, "ops", 100, "transactions per worker (ignored with --time)")
	fs.DurationVar(&cfg.Duration, "time", 0, "run for this long instead of --ops")
	fs.Int64Var(&cfg.Seed, "seed", 1, "seed of every random choice")
	fs.StringVar(&cfg.Out, "out", "runs", "parent directory of run directories")
	fs.Float64Var(&cfg.Reads, "reads", 0.1, "transfer: share of operations that read the total across the servers")
	fs.IntVar(&cfg.RowsPerWorker, "rows-per-worker", 1000, "rows of simplecount per worker")
	fs.DurationVar(&cfg.RecoverAfter, "recover-after", time.Second, "after a coordinator crash, how long transactions stay in doubt before recovery")
	fs.Var(&specs, "fault", "commit-cut[:P], commit-drop[:P], prepare-cut[:P], prepare-drop[:P], coordinator-crash@T (repeatable)")
	fs.Var(&dsns, "dsn", "use this PostgreSQL server instead of launching one (repeatable, 2 to 5; prepared transactions must be enabled)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("run: unexpected argument %q", fs.Arg(0))
	}
	cfg.Workload = workloads.Name(*workload)
	cfg.Placement = transfer.Placement(*placement)
	cfg.Coordinator = twopc.Mode(*coord)
	cfg.DSNs = dsns
	if cfg.Duration > 0 {
		cfg.Ops = 0
	}
	if cfg.RowsPerWorker < 2 {
		return fmt.Errorf("run: --rows-per-worker must be at least 2")
	}
	for _, s := range specs {
		f, err := twopc.ParseFault(s)
		if err != nil {
			return fmt.Errorf("run: %v", err)
		}
		cfg.Faults = append(cfg.Faults, f)
	}
	human := stdout
	if *jsonOut {
		human = stderr
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	res, err := twopc.Run(ctx, cfg)
	if err != nil {
		return err
	}
	printTwoPC(human, res)
	if *jsonOut {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if !res.Valid {
		return verdictExit{exitInvalid}
	}
	return nil
}

func printTwoPC(w io.Writer, r *twopc.Result) {
	c, s, f := r.Config, r.Stats, r.Final
	verdict := "valid"
	if !r.Valid {
		verdict = "INVALID"
	}
	console.Fprintf(w, "%s %s, %d servers, %d workers, coordinator %s: %s\n", c.Workload, c.Placement, c.Servers, c.Workers, c.Coordinator, verdict)
	console.Fprintf(w, "  %d transactions: %d committed, %d aborted, %d abandoned; %.0f committed/s, mean %v, p99 %v\n",
		s.Transactions, s.Committed, s.Aborted, s.Abandoned, s.PerSecond, s.Mean.Round(time.Microsecond), s.P99.Round(time.Microsecond))
	if c.Workload == workloads.Transfer {
		console.Fprintf(w, "  total %d (want %d); transfers ok %d, failed %d, unknown %d (%d of them applied)\n",
			f.Total, f.Expected, f.Applied, f.Rejected, f.Unknown, f.UnknownApplied)
	}
	if len(r.ProxyFaults) > 0 {
		console.Fprintf(w, "  proxy faults: %v\n", r.ProxyFaults)
	}
	if cr := r.Crash; cr != nil {
		console.Fprintf(w, "  coordinator crash at %v: abandoned %v; %d branches in doubt\n", cr.At.Round(time.Millisecond), cr.Stops, len(cr.InDoubt))
		for _, d := range cr.InDoubt {
			console.Fprintf(w, "    %s on server %d: prepared %v ago, %d locks\n", d.GID, d.Participant, d.Age.Round(time.Millisecond), d.Locks)
		}
		var worst time.Duration
		blocked := 0
		for _, p := range cr.Probes {
			if p.Timeouts > 0 {
				blocked++
				worst = max(worst, p.Blocked)
			}
		}
		console.Fprintf(w, "  %d of %d writers blocked by in-doubt rows, longest %v; recovery took %v, %v after the crash\n",
			blocked, len(cr.Probes), worst.Round(time.Millisecond), cr.Recovery.Round(time.Millisecond), cr.Resolved.Round(time.Millisecond))
	}
	decided := map[twopc.Decision]int{}
	for _, x := range r.Recovery {
		decided[x.Decision]++
	}
	if len(r.Recovery) > 0 {
		console.Fprintf(w, "  recovery: %d committed, %d rolled back\n", decided[twopc.Commit], decided[twopc.Abort])
	}
	names := make([]string, 0, len(f.Anomalies))
	for a := range f.Anomalies {
		names = append(names, string(a))
	}
	sort.Strings(names)
	for _, a := range names {
		console.Fprintf(w, "  %s: %d  e.g. %s\n", a, f.Anomalies[transfer.Anomaly(a)], strings.Join(f.Examples[transfer.Anomaly(a)], "; "))
	}
	if r.Bank != nil {
		// The checker's sentences list every account: with thousands of rows, the
		// kinds say enough here, and results.json holds the rest.
		kinds := map[string]int{}
		for _, a := range r.Bank.Anomalies {
			kinds[a.Kind]++
		}
		console.Fprintf(w, "  bank checker on history.jsonl: %s", r.Bank.Verdict)
		if len(kinds) > 0 {
			console.Fprintf(w, " %v", kinds)
		}
		fmt.Fprintln(w)
	}
	console.Fprintf(w, "  run directory: %s\n", r.Dir)
}
