package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/supervise"
)

const execHelp = `indoubt exec: run any program under commit faults and judge what it recorded.

It launches a throwaway server (or uses --dsn, or --upstream, for yours), starts the
commit-aware proxy in front of it, and runs the program (everything after --) with the
proxy's address in the variables its drivers read:

  postgres   DATABASE_URL, and PGHOST PGPORT PGUSER PGPASSWORD PGDATABASE PGSSLMODE
             (psql and every libpq client connect unchanged)
  redis      REDIS_URL
  mongo      MONGODB_URI
  http, grpc INDOUBT_BASE_URL     http://HOST:PORT of the proxy, in front of --upstream (a
                                  service you run; no HTTP_PROXY is set)
  mysql      DATABASE_URL, and MYSQL_HOST MYSQL_TCP_PORT MYSQL_USER MYSQL_PWD MYSQL_DATABASE
             (a launched MariaDB; the mysql and mariadb clients connect unchanged)
  every one  INDOUBT_HISTORY      the file to append the history to (docs/history-format.md;
                                  recorders/ holds writers for Python and Node)
             INDOUBT_DIRECT_URL   the server's own DSN, not through the proxy: for setup
                                  and a final read that no fault may touch
             INDOUBT_PROXY_ADDR   the proxy's host:port
             INDOUBT_SEED         the seed, for the program's own random choices

The program records every operation it makes (invoke, then ok, fail or info) with the
time in Unix nanoseconds and, so that the proxy's faults join the attempt they cut,
the local address of the connection it used (conn). When it ends, indoubt reads the
final state (from the history, or --final-sql or --final-cmd), checks the history,
joins the proxy's events to it, and writes a run directory under --out as indoubt run
does: history.jsonl (on the run's clock: nanoseconds since the program started),
faults.jsonl, results.json, report.html, config.json and program.json (how it ended).
'indoubt check RUNDIR/history.jsonl' gives the same verdict.

With --model the history's header is written before the program starts, and the
program appends events only; without it the program writes the header itself.

--final-sql QUERY (postgres) runs QUERY on the server directly after the program ends
and records its rows as the model's final read: exactly-once, two columns (op id,
count): SELECT tag, count(*) FROM payments GROUP BY tag; bank, two columns (account,
balance); budget and counter, one row of one integer (the balance, the value).
--final-cmd CMD runs CMD with sh -c and the program's environment instead; it prints
the final read's value as JSON on stdout (see docs/history-format.md).

Ctrl-C (or SIGTERM) is sent on to the program's process group; what it recorded by
the time it ends (at most --grace later, else it is killed) is checked. A second one
stops indoubt at once. The program runs in a process group of its own, under a
supervisor that kills the whole group if indoubt dies, even of SIGKILL; servers it
launched die with it too.

Usage: indoubt exec [flags] -- PROGRAM [ARG...]

Examples:
  indoubt exec --fault commit-cut:0.3 --model exactly-once \
      --final-sql 'SELECT tag, count(*) FROM payments GROUP BY tag' -- python3 app.py
  indoubt exec --store redis --fault commit-cut:0.2@2s-10s -- node app.mjs
  indoubt exec --dsn postgres://app:secret@db:5432/app --fault commit-mixed:0.1 -- ./run-tests.sh

Exit codes: 0 valid, 1 invalid, 2 unknown; also 2 when the history is valid but the
program did not end by itself with status 0 (it crashed, was killed or interrupted:
the verdict covers only what it recorded), 3 could not run (program not found, server
not launchable, a history that is not one or holds no operation).
`

// execArgs is what `indoubt exec` was asked, parsed and checked.
type execArgs struct {
	store    runner.Store
	dsn      string // --dsn, "" to launch
	upstream string // --upstream, "" unless given
	schedule schedule.Schedule
	seed     int64
	out      string
	model    string
	params   map[string]json.RawMessage
	finalSQL string
	finalCmd string
	match    string
	grace    time.Duration
	jsonOut  bool
	quiet    bool
	keep     bool // --keep: a launched PostgreSQL keeps its data (exec_keep.go)
	argv     []string
}

func execCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if os.Getenv(supervise.Env) != "" {
		// indoubt started again as the program's supervisor (runner.Exec).
		if err := supervise.Main(ctx, args); err != nil {
			if errors.Is(err, supervise.ErrReported) {
				return verdictExit{exitCouldNot}
			}
			return err
		}
		return nil
	}
	a, err := parseExecArgs(args, stdout)
	if err != nil {
		return err
	}
	human := stdout
	if a.jsonOut {
		human = stderr
	}
	x, err := runner.Exec(ctx, a.config(human, stderr))
	if err != nil {
		return redact.Error(err, a.dsn)
	}
	report.WriteSummaryNotes(human, x.Results, x.Notes)
	if a.jsonOut {
		b, _ := json.MarshalIndent(x.Results, "", "  ")
		fmt.Fprintf(stdout, "%s\n", console.JSON(b))
	}
	if x.Code != 0 {
		return verdictExit{x.Code}
	}
	return nil
}

func parseExecArgs(args []string, stdout io.Writer) (execArgs, error) {
	fs := newFlags("exec", execHelp, stdout)
	var (
		a      execArgs
		store  = fs.String("store", "", "the server: postgres (default), redis, mongo (FerretDB when launched), mysql (MariaDB when launched), cockroach (--dsn only), or an API you run: http, grpc (--upstream only); with --dsn, its scheme")
		params = fs.String("params", "", "with --model: the header's params as a JSON object, e.g. '{\"budget\":100}' (docs/history-format.md)")
		specs  multiFlag
	)
	fs.StringVar(&a.dsn, "dsn", "", "use this server instead of launching one (a URL: postgres://user:pw@host:5432/db, redis://..., mongodb://...)")
	fs.StringVar(&a.upstream, "upstream", "", "put the proxy in front of this host:port instead; the program gets the proxy's address but no DSN (no --final-sql)")
	fs.Var(&specs, "fault", "fault NAME[:P][@START-END], repeatable, windows from the program's start: commit-cut:0.3, commit-drop, commit-mixed, latency:50ms, partition@5s-7s, ...")
	fs.Int64Var(&a.seed, "seed", 1, "seed of the proxy's fault decisions (also INDOUBT_SEED for the program)")
	fs.StringVar(&a.out, "out", "runs", "parent directory of run directories")
	fs.StringVar(&a.model, "model", "", "the checker's model, written in the history's header before the program starts: "+strings.Join(checker.Models, ", "))
	fs.StringVar(&a.finalSQL, "final-sql", "", "postgres: a query whose rows are the final read, run on the server directly after the program ends")
	fs.StringVar(&a.finalCmd, "final-cmd", "", "a shell command, run with the program's environment after it ends, that prints the final read's value as JSON")
	fs.StringVar(&a.match, "match", "", "regular expression: only statements whose SQL matches count as commit points (as indoubt proxy --match)")
	fs.DurationVar(&a.grace, "grace", 10*time.Second, "after Ctrl-C, how long the program may take to stop before it is killed")
	fs.BoolVar(&a.jsonOut, "json", false, "print results.json to stdout (the summary goes to stderr)")
	fs.BoolVar(&a.quiet, "quiet", false, "no progress lines on stderr")
	fs.BoolVar(&a.keep, "keep", false, "postgres, launched: keep the server's data directory after the run, and say how to start a server on it and remove it")
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	a.argv = fs.Args()
	if len(a.argv) == 0 {
		return a, fmt.Errorf("exec: no program: indoubt exec [flags] -- PROGRAM [ARG...]")
	}
	var err error
	if a.store, err = pickExecStore(*store, a.dsn, a.upstream != ""); err != nil {
		return a, err
	}
	if a.dsn != "" && a.upstream != "" {
		return a, fmt.Errorf("exec: --dsn and --upstream both name the server: give one")
	}
	if a.schedule, err = schedule.Parse(specs); err != nil {
		return a, fmt.Errorf("exec: %v", err)
	}
	if p := a.schedule.Processes(); len(p) > 0 {
		return a, fmt.Errorf("exec: --fault %s: process faults are for indoubt run; exec applies the proxy's faults", p[0].Spec)
	}
	if a.match != "" {
		if _, err := regexp.Compile(a.match); err != nil {
			return a, fmt.Errorf("exec: --match: %v", err)
		}
	}
	if a.grace <= 0 {
		return a, fmt.Errorf("exec: --grace must be positive (got %v)", a.grace)
	}
	if err := a.checkModel(*params); err != nil {
		return a, err
	}
	if err := a.checkKeep(); err != nil {
		return a, err
	}
	if _, err := exec.LookPath(a.argv[0]); err != nil {
		return a, fmt.Errorf("exec: program %s not found: %v", a.argv[0], errors.Unwrap(err))
	}
	return a, nil
}

// checkModel checks --model, --params and the final read's flags against each other.
func (a *execArgs) checkModel(params string) error {
	if a.model != "" && !slices.Contains(checker.Models, a.model) {
		return fmt.Errorf("exec: unknown --model %q (want one of %s)", a.model, strings.Join(checker.Models, ", "))
	}
	if params != "" {
		if a.model == "" {
			return fmt.Errorf("exec: --params goes into the header exec writes: give --model too")
		}
		if err := json.Unmarshal([]byte(params), &a.params); err != nil || a.params == nil {
			return fmt.Errorf("exec: --params %s: want a JSON object, e.g. '{\"budget\":100}'", params)
		}
	}
	if a.finalSQL != "" && a.finalCmd != "" {
		return fmt.Errorf("exec: --final-sql and --final-cmd both read the final state: give one")
	}
	if a.finalSQL != "" {
		if !a.store.SQL() {
			return fmt.Errorf("exec: --final-sql needs a SQL store (%s), not %s: use --final-cmd", sqlStores(), a.store.Name())
		}
		if a.upstream != "" {
			return fmt.Errorf("exec: --final-sql needs a DSN to query: give --dsn instead of --upstream")
		}
	}
	switch a.model {
	case checker.RegisterModel, checker.CASRegisterModel:
		if a.finalSQL != "" || a.finalCmd != "" {
			return fmt.Errorf("exec: the %s model needs no final read (drop --final-sql/--final-cmd)", a.model)
		}
	}
	return nil
}

// pickExecStore resolves --store, or the store --dsn names by its scheme; a store that
// cannot be launched needs --dsn or --upstream.
func pickExecStore(name, dsn string, upstream bool) (runner.Store, error) {
	if err := storeAgrees(name, dsn); err != nil {
		return runner.Store{}, err
	}
	if name == "" && dsn != "" {
		s, ok := runner.StoreFromDSN(dsn)
		if !ok {
			return runner.Store{}, fmt.Errorf("exec: cannot tell the store from the DSN's scheme: give --store")
		}
		name = string(s)
	}
	if name == "" {
		name = string(runner.Postgres)
	}
	s, ok := runner.ProgramStore(name)
	if !ok {
		var have []string
		for _, s := range runner.ProgramStores() {
			have = append(have, string(s.Name()))
		}
		return runner.Store{}, fmt.Errorf("exec: unknown --store %q (want one of %s)", name, strings.Join(have, ", "))
	}
	if !s.Launchable() && dsn == "" && !upstream {
		return runner.Store{}, fmt.Errorf("exec: no %s can be launched here: give --dsn or --upstream", name)
	}
	return s, nil
}

// sqlStores lists the stores whose final state --final-sql reads.
func sqlStores() string {
	var have []string
	for _, s := range runner.ProgramStores() {
		if s.SQL() {
			have = append(have, string(s.Name()))
		}
	}
	return strings.Join(have, ", ")
}

// config is the runner's ExecConfig of these flags: the lines beside the verdict go
// to human, warnings and progress (unless --quiet) to stderr. The program's own output
// is indoubt's, but with --json, when stdout is results.json's alone, it goes to stderr.
func (a execArgs) config(human, stderr io.Writer) runner.ExecConfig {
	c := runner.ExecConfig{
		Store: a.store, DSN: a.dsn, Upstream: a.upstream, Schedule: a.schedule, Seed: a.seed, Out: a.out,
		Model: a.model, Params: a.params, FinalSQL: a.finalSQL, FinalCmd: a.finalCmd, Match: a.match,
		Grace: a.grace, Keep: a.keep, Argv: a.argv,
		Console: human, Warn: stderr, ProgramOut: os.Stdout, ProgramErr: os.Stderr,
	}
	if !a.quiet {
		c.Progress = stderr
	}
	if a.jsonOut {
		c.ProgramOut = os.Stderr
	}
	return c
}
