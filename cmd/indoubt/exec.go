package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/atomicfile"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/ferret"
	"github.com/indoubt/indoubt/workloads"
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
	store    execStore
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
	if os.Getenv(supervisorEnv) != "" {
		return superviseProgram(ctx, args)
	}
	a, err := parseExecArgs(args, stdout)
	if err != nil {
		return err
	}
	human := stdout
	if a.jsonOut {
		human = stderr
	}
	res, code, err := a.run(ctx, human, stderr)
	if err != nil {
		return redact.Error(err, a.dsn)
	}
	if a.jsonOut {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", console.JSON(b))
	}
	if code != 0 {
		return verdictExit{code}
	}
	return nil
}

func parseExecArgs(args []string, stdout io.Writer) (execArgs, error) {
	fs := newFlags("exec", execHelp, stdout)
	var (
		a      execArgs
		store  = fs.String("store", "", "the server: postgres (default), redis, mongo (FerretDB when launched), cockroach (--dsn only), or an API you run: http, grpc (--upstream only); with --dsn, its scheme")
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
		if a.store.finalSQL == nil {
			return fmt.Errorf("exec: --final-sql needs a SQL store (postgres, cockroach), not %s: use --final-cmd", a.store.name)
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

// execStore is a store as exec serves it to a program: how to launch it, how its DSN
// points at the proxy, and the variables a program's drivers read it from.
type execStore struct {
	name runner.StoreName
	// launch starts a throwaway server whose files go in dir; nil: --dsn only.
	launch func(ctx context.Context, dir string) (dsn, desc string, stop func() error, err error)
	// through returns dsn pointed at the proxy's addr.
	through func(dsn, addr string) (string, error)
	// env returns the variables that give the proxied DSN (or, with --upstream, only
	// the proxy's address) to the program's drivers.
	env func(proxied, addr string) ([]string, error)
	// finalSQL reads the final state with a query; nil for a store without SQL.
	finalSQL func(ctx context.Context, dsn, query, model string) (json.RawMessage, error)
}

// execStores are the stores exec can put a program in front of.
var execStores = []execStore{
	{name: runner.Postgres, launch: launchExecPostgres, through: pgThrough, env: pgEnv, finalSQL: queryFinal},
	{name: runner.Cockroach, through: pgThrough, env: pgEnv, finalSQL: queryFinal},
	{name: runner.Redis, launch: launchExecRedis, through: urlThrough, env: urlEnv("REDIS_URL")},
	{name: runner.Mongo, launch: launchExecFerretDB, through: mongoThrough, env: urlEnv("MONGODB_URI")},
	{name: "http", env: apiEnv}, // --upstream only: a service the user runs
	{name: "grpc", env: apiEnv},
	{name: runner.MySQL, launch: launchExecMariaDB, through: urlThrough, env: mysqlEnv},
}

// pickExecStore resolves --store, or the store --dsn names by its scheme; a store that
// cannot be launched needs --dsn or --upstream.
func pickExecStore(name, dsn string, upstream bool) (execStore, error) {
	if err := storeAgrees(name, dsn); err != nil {
		return execStore{}, err
	}
	if name == "" && dsn != "" {
		s, ok := runner.StoreFromDSN(dsn)
		if !ok {
			return execStore{}, fmt.Errorf("exec: cannot tell the store from the DSN's scheme: give --store")
		}
		name = string(s)
	}
	if name == "" {
		name = string(runner.Postgres)
	}
	var have []string
	for _, s := range execStores {
		if string(s.name) == name {
			if s.launch == nil && dsn == "" && !upstream {
				return execStore{}, fmt.Errorf("exec: no %s can be launched here: give --dsn or --upstream", name)
			}
			return s, nil
		}
		have = append(have, string(s.name))
	}
	return execStore{}, fmt.Errorf("exec: unknown --store %q (want one of %s)", name, strings.Join(have, ", "))
}

func launchExecPostgres(ctx context.Context, dir string) (string, string, func() error, error) {
	pg, err := pgserver.Start(ctx, pgserver.Options{LogPath: filepath.Join(dir, "postgres.log")})
	if err != nil {
		return "", "", nil, err
	}
	return pg.DSN, "launched PostgreSQL " + pg.Version + " at " + pg.Addr, pg.Stop, nil
}

func launchExecRedis(ctx context.Context, dir string) (string, string, func() error, error) {
	r, err := redisserver.Start(ctx, redisserver.Options{Persistence: "none", LogPath: filepath.Join(dir, "redis.log")})
	if err != nil {
		return "", "", nil, err
	}
	// The user named: redis-cli -u refuses a URL with a password and an empty user.
	dsn := strings.Replace(r.DSN, "redis://:", "redis://default:", 1)
	return dsn, "launched Redis " + r.Version + " at " + r.Addr, r.Stop, nil
}

func launchExecFerretDB(ctx context.Context, dir string) (string, string, func() error, error) {
	f, err := ferret.Start(ctx, ferret.Options{LogPath: filepath.Join(dir, "ferretdb.log")})
	if err != nil {
		return "", "", nil, err
	}
	return f.URI, "launched FerretDB (" + f.Handler + ") at " + f.Addr, f.Stop, nil
}

// urlThrough points a URL-form DSN at addr.
func urlThrough(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("exec: --dsn must be a URL with host:port, to put the proxy in front of it")
	}
	u.Host = addr
	return u.String(), nil
}

// pgThrough points a PostgreSQL URL at addr, without TLS unless it asks for it: the
// proxy cannot see commits inside TLS.
func pgThrough(dsn, addr string) (string, error) {
	s, err := urlThrough(dsn, addr)
	if err != nil {
		return "", err
	}
	u, _ := url.Parse(s)
	q := u.Query()
	if q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// mongoThrough points a mongodb:// URI at addr and connects directly, so that the
// driver does not follow the server's own address around the proxy.
func mongoThrough(dsn, addr string) (string, error) {
	s, err := urlThrough(dsn, addr)
	if err != nil {
		return "", err
	}
	u, _ := url.Parse(s)
	q := u.Query()
	q.Set("directConnection", "true")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// pgEnv gives a PostgreSQL DSN as DATABASE_URL and libpq's variables. Variables that
// would send libpq elsewhere (PGHOSTADDR, PGSERVICE) are removed by the caller.
func pgEnv(proxied, addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	env := []string{"PGHOST=" + host, "PGPORT=" + port}
	if proxied == "" {
		return env, nil
	}
	u, err := url.Parse(proxied)
	if err != nil {
		return nil, err
	}
	env = append(env, "DATABASE_URL="+proxied)
	if u.User != nil {
		env = append(env, "PGUSER="+u.User.Username())
		if pw, ok := u.User.Password(); ok {
			env = append(env, "PGPASSWORD="+pw)
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		env = append(env, "PGDATABASE="+db)
	}
	if m := u.Query().Get("sslmode"); m != "" {
		env = append(env, "PGSSLMODE="+m)
	}
	return env, nil
}

// urlEnv gives the proxied DSN in the variable name.
func urlEnv(name string) func(proxied, addr string) ([]string, error) {
	return func(proxied, addr string) ([]string, error) {
		if proxied == "" {
			return nil, nil
		}
		return []string{name + "=" + proxied}, nil
	}
}

// execRun is one exec while it runs: what it launched, in the order to stop it.
type execRun struct {
	a        execArgs
	dir      string // the run directory, .partial until published
	name     string
	start    time.Time
	direct   string // the server's own DSN; "" with --upstream
	desc     string // the server, for the report
	proxied  string // the DSN through the proxy; "" with --upstream
	px       *faults.Proxy
	pxOnce   sync.Once
	env      []string
	history  string // the program's history file
	progress io.Writer
	kept     []string // --keep: what to tell the user about the kept data, line by line

	mu     sync.Mutex
	events []rundir.FaultLine // faults.jsonl, written when the run ends
	pstart time.Time          // the program's start: the run clock's zero
}

func (r *execRun) progressf(format string, a ...any) {
	if r.progress != nil {
		console.Fprintf(r.progress, "indoubt exec: "+format+"\n", a...)
	}
}

// run does the whole exec and returns the results, the exit code, and an error when it
// could not run.
func (a execArgs) run(ctx context.Context, human, stderr io.Writer) (*results.Results, int, error) {
	r := &execRun{a: a, start: time.Now()}
	if !a.quiet {
		r.progress = stderr
	}
	r.name = strings.NewReplacer(":", "_", "/", "_").Replace(fmt.Sprintf("%s-exec-%s-%s", r.start.Format("20060102-150405.000"), a.store.name, faultNames(a.schedule)))
	if err := os.MkdirAll(a.out, 0o755); err != nil {
		return nil, 0, fmt.Errorf("exec: create %s: %v", a.out, err)
	}
	r.dir = filepath.Join(a.out, "."+r.name+".partial")
	if err := os.Mkdir(r.dir, 0o700); err != nil {
		return nil, 0, fmt.Errorf("exec: create run directory: %v", err)
	}
	// A run killed before it publishes leaves its .partial directory: the marker lets
	// indoubt clean tell it from a live run's.
	if err := servers.MarkOwned(r.dir); err != nil {
		os.RemoveAll(r.dir)
		return nil, 0, fmt.Errorf("exec: create run directory: %v", err)
	}
	res, code, err := r.do(ctx, human)
	if err != nil {
		os.RemoveAll(r.dir)
		return nil, 0, err
	}
	final := filepath.Join(a.out, r.name)
	res.RunDir = final
	res.Trim(results.DefaultMaxAnomalies)
	// Nothing is published half-written: every file whole or not at all (atomicfile),
	// the directory fsynced before its rename. The report is a view of results.json:
	// one that does not fit (a full disk) is left out and said in not_written.
	if err := report.WriteHTML(filepath.Join(r.dir, "report.html"), res); err != nil {
		why := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error()
		}
		res.NotWritten = append(res.NotWritten, "report.html: "+why)
		console.Fprintf(stderr, "indoubt exec: warning: report.html not written (%s): the run is published without it, results.json says so in not_written; indoubt report %s writes it\n", why, final)
	}
	if err := writeRunJSON(filepath.Join(r.dir, "results.json"), res); err != nil {
		os.RemoveAll(r.dir)
		return nil, 0, fmt.Errorf("exec: write results: %v", err)
	}
	if err := atomicfile.SyncDir(r.dir); err != nil {
		os.RemoveAll(r.dir)
		return nil, 0, fmt.Errorf("exec: publish run directory: %v", err)
	}
	if err := os.Rename(r.dir, final); err != nil {
		os.RemoveAll(r.dir)
		return nil, 0, fmt.Errorf("exec: publish run directory: %v", err)
	}
	_ = servers.Unmark(final)
	_ = atomicfile.SyncDir(a.out)
	report.WriteSummary(human, res)
	return res, code, nil
}

// do serves the program its server and proxy, runs it, and judges what it recorded.
func (r *execRun) do(ctx context.Context, human io.Writer) (*results.Results, int, error) {
	stop, err := r.serve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("exec: interrupted before the program started")
		}
		return nil, 0, fmt.Errorf("exec: %v", err)
	}
	defer stop()
	if err := r.prepareHistory(); err != nil {
		return nil, 0, err
	}
	if err := r.writeConfig(); err != nil {
		return nil, 0, err
	}
	exit, interrupted, err := r.runProgram(ctx)
	if err != nil {
		return nil, 0, err
	}
	elapsed := time.Since(r.pstart)
	// No fault after the program: its events are complete.
	r.closeProxy()
	var final json.RawMessage
	if r.a.finalSQL != "" || r.a.finalCmd != "" {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		final, err = r.readFinal(fctx)
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("exec: final read: %v", err)
		}
	}
	stop()
	console.Fprintf(human, "indoubt exec: %s %s after %.1fs\n", programName(r.a.argv), exit, elapsed.Seconds())
	for _, l := range r.kept {
		console.Fprintf(human, "indoubt exec: %s\n", l)
	}
	if err := writeRunJSON(filepath.Join(r.dir, "program.json"), struct {
		Argv        []string `json:"argv"`
		Interrupted bool     `json:"interrupted"`
		DurationS   float64  `json:"duration_s"`
		programExit
	}{r.a.argv, interrupted, elapsed.Seconds(), exit}); err != nil {
		return nil, 0, fmt.Errorf("exec: write program.json: %v", err)
	}
	h, ops, err := r.readProgramHistory(!exit.ok() || interrupted, exit, final, elapsed)
	if err != nil {
		return nil, 0, err
	}
	res, unjoined, err := r.judge(ctx, h, ops, elapsed, interrupted)
	if err != nil {
		return nil, 0, err
	}
	for _, s := range unjoined {
		console.Fprintf(human, "not joined: %s\n", s)
	}
	code := res.Verdict.ExitCode()
	if code == exitValid && (!exit.ok() || interrupted) {
		console.Fprintf(human, "indoubt exec: the program %s: the verdict covers only what it recorded (exit 2)\n", exit)
		code = exitUnknown
	}
	return res, code, nil
}

// serve launches the server (or takes --dsn or --upstream) and starts the proxy in
// front of it. The function it returns stops both; it may be called more than once.
func (r *execRun) serve(ctx context.Context) (func(), error) {
	a := r.a
	stopServer := func() error { return nil }
	upstream := a.upstream
	switch {
	case a.dsn != "":
		r.direct, r.desc = a.dsn, "external"
		// The program's database is its own while it runs (lockDSN).
		unlock, err := lockDSN(ctx, a.store.name, a.dsn)
		if err != nil {
			return nil, fmt.Errorf("exec: %w", err)
		}
		stopServer = func() error { unlock(); return nil }
	case a.upstream != "":
		r.desc = "external at " + a.upstream
	default:
		r.progressf("launching a local %s ...", a.store.name)
		launch := a.store.launch
		if a.keep {
			launch = r.launchKept
		}
		dsn, desc, stop, err := launch(ctx, r.dir)
		if err != nil {
			return nil, err
		}
		r.direct, r.desc, stopServer = dsn, desc, stop
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			r.closeProxy()
			stopServer()
		})
	}
	if r.direct != "" {
		u, err := url.Parse(r.direct)
		if err != nil || u.Port() == "" {
			stop()
			return nil, fmt.Errorf("--dsn must be a URL with host:port, to put the proxy in front of it")
		}
		upstream = u.Host
	}
	proto, ok := runner.ProtocolFor(string(a.store.name))
	if !ok {
		proto = apiProtocols[string(a.store.name)]
	}
	opt := faults.Options{Upstream: upstream, Protocol: proto, Seed: a.seed, Events: r.onEvent}
	if a.match != "" {
		opt.Match = regexp.MustCompile(a.match).MatchString
	}
	px, err := faults.Start(opt)
	if err != nil {
		stop()
		return nil, err
	}
	r.px = px
	if r.direct != "" {
		if r.proxied, err = a.store.through(r.direct, px.Addr()); err != nil {
			stop()
			return nil, err
		}
		if u, _ := url.Parse(r.proxied); a.store.name == runner.Postgres && u.Query().Get("sslmode") != "disable" {
			r.progressf("warning: sslmode=%s: the proxy cannot see commits inside TLS, so commit faults may not fire", u.Query().Get("sslmode"))
		}
	}
	r.progressf("%s; fault proxy on %s (seed %d, faults: %s)", r.desc, px.Addr(), a.seed, orNone(specsOf(a.schedule)))
	return stop, nil
}

// closeProxy stops the proxy, once.
func (r *execRun) closeProxy() {
	r.pxOnce.Do(func() {
		if r.px != nil {
			r.px.Close()
		}
	})
}

// onEvent receives a commit fault from the proxy's goroutines.
func (r *execRun) onEvent(e toxics.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, rundir.EventLine(e, int64(e.Time.Sub(r.pstart))))
}

// onWindow records a fault window opening or closing.
func (r *execRun) onWindow(w schedule.Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, rundir.WindowLine(w, int64(w.Time.Sub(r.pstart)), nil))
}

// prepareHistory creates the program's history file (program.jsonl in the run
// directory), with the header when --model gave it, and the program's environment.
func (r *execRun) prepareHistory() error {
	r.history = filepath.Join(r.dir, "program.jsonl")
	f, err := os.OpenFile(r.history, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("exec: create the program's history: %v", err)
	}
	if r.a.model != "" {
		hdr := histories.Header{Format: histories.FormatV1, Workload: r.a.model, Model: r.a.model, Store: string(r.a.store.name), Seed: r.a.seed, Params: r.a.params}
		line, _ := json.Marshal(struct {
			Header histories.Header `json:"header"`
		}{hdr})
		_, err = f.Write(append(line, '\n'))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("exec: write the history's header: %v", err)
	}
	abs, err := filepath.Abs(r.history)
	if err != nil {
		return err
	}
	storeEnv, err := r.a.store.env(r.proxied, r.px.Addr())
	if err != nil {
		return fmt.Errorf("exec: %v", err)
	}
	ours := append(storeEnv,
		"INDOUBT_HISTORY="+abs, "INDOUBT_PROXY_ADDR="+r.px.Addr(), "INDOUBT_SEED="+strconv.FormatInt(r.a.seed, 10),
		"INDOUBT_STORE="+string(r.a.store.name))
	if r.direct != "" {
		ours = append(ours, "INDOUBT_DIRECT_URL="+r.direct)
	}
	drop := []string{"PGHOSTADDR", "PGSERVICE", "INDOUBT_DIRECT_URL", supervisorEnv}
	for _, kv := range ours {
		k, _, _ := strings.Cut(kv, "=")
		drop = append(drop, k)
	}
	r.env = append(withoutVars(os.Environ(), drop...), ours...)
	return nil
}

// writeConfig writes config.json: what exec was asked, the DSN's secrets masked.
func (r *execRun) writeConfig() error {
	a := r.a
	cfg := rundir.ExecConfig{
		Command: "exec", Argv: a.argv, Store: string(a.store.name), DSN: redact.DSN(a.dsn), Upstream: a.upstream,
		Faults: specsOf(a.schedule), Seed: a.seed, Model: a.model, Params: a.params,
		FinalSQL: a.finalSQL, FinalCmd: a.finalCmd, Match: a.match, Grace: a.grace.String(),
	}
	if err := writeRunJSON(filepath.Join(r.dir, rundir.ConfigFile), cfg); err != nil {
		return fmt.Errorf("exec: write config: %v", err)
	}
	return nil
}

// runProgram runs the program with the fault schedule armed from its start, until it
// ends. The first SIGINT or SIGTERM (ctx) is sent on to its process group; after
// --grace it is killed.
func (r *execRun) runProgram(ctx context.Context) (programExit, bool, error) {
	r.mu.Lock()
	r.pstart = time.Now()
	r.mu.Unlock()
	// With --json, stdout is results.json's alone: the program's output goes to stderr.
	out := io.Writer(os.Stdout)
	if r.a.jsonOut {
		out = os.Stderr
	}
	p, err := startProgram(r.a.argv, r.env, out, os.Stderr)
	if err != nil {
		return programExit{}, false, fmt.Errorf("exec: %v", err)
	}
	r.mu.Lock()
	r.pstart = p.started
	r.mu.Unlock()
	sctx, cancel := context.WithCancel(context.Background())
	sched := make(chan error, 1)
	go func() { sched <- r.a.schedule.Run(sctx, r.px, p.started, r.onWindow) }()
	var exit programExit
	interrupted := false
	select {
	case exit = <-p.done:
	case <-ctx.Done():
		interrupted = true
		sig := syscall.SIGINT
		if c := context.Cause(ctx); c != nil && strings.Contains(c.Error(), syscall.SIGTERM.String()) {
			sig = syscall.SIGTERM
		}
		r.progressf("%s: sent to the program; waiting up to %v for it to stop", unixSignalName(sig), r.a.grace)
		p.interrupt(sig)
		select {
		case exit = <-p.done:
		case <-time.After(r.a.grace):
			r.progressf("the program did not stop within %v: killing it", r.a.grace)
			p.kill()
			exit = <-p.done
		}
	}
	cancel()
	if err := <-sched; err != nil {
		return exit, interrupted, fmt.Errorf("exec: fault schedule: %v", err)
	}
	return exit, interrupted, nil
}

// readFinal reads the final state after the program ended, by --final-sql or
// --final-cmd.
func (r *execRun) readFinal(ctx context.Context) (json.RawMessage, error) {
	if r.a.finalSQL != "" {
		return r.a.store.finalSQL(ctx, r.direct, r.a.finalSQL, r.modelName())
	}
	var size int64
	if fi, err := os.Stat(r.history); err == nil {
		size = fi.Size()
	}
	return runFinalCmd(ctx, r.a.finalCmd, r.env, finalCmdMost(size))
}

// modelName is the model the history will be checked with: --model, else the header's.
func (r *execRun) modelName() string {
	if r.a.model != "" {
		return r.a.model
	}
	if regularHistory(r.history) != nil {
		return "" // refused when the history is read
	}
	f, err := os.Open(r.history)
	if err != nil {
		return ""
	}
	defer f.Close()
	rd, err := histories.NewReader(f, r.history)
	if err != nil || rd.Header() == nil {
		return ""
	}
	return rd.Header().Model
}

// readProgramHistory reads what the program recorded, shifts its times (Unix
// nanoseconds) to the run clock (nanoseconds since the program started), appends the
// final read when exec made one, and writes history.jsonl; program.jsonl is then
// removed. partial accepts a last line cut short, when the program did not end by itself.
func (r *execRun) readProgramHistory(partial bool, exit programExit, final json.RawMessage, elapsed time.Duration) (*histories.Header, []histories.Op, error) {
	if err := regularHistory(r.history); err != nil {
		return nil, nil, err
	}
	h, ops, err := histories.ReadFile(r.history, partial)
	if errors.Is(err, histories.ErrEmpty) || err == nil && !slices.ContainsFunc(ops, histories.Op.IsClient) {
		return nil, nil, fmt.Errorf("exec: the program (%s) wrote no history to INDOUBT_HISTORY: nothing to check (docs/history-format.md; recorders/ has writers for Python and Node)", exit)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("exec: the program's history: %v", err)
	}
	if h == nil {
		return nil, nil, fmt.Errorf("exec: the program's history has no header naming its model: give --model, or write the header (docs/history-format.md)")
	}
	if err := checkProgramHistory(r.a.model, h, ops); err != nil {
		return nil, nil, err
	}
	if err := evidence.CheckClock(ops, evidence.WallClock); err != nil {
		return nil, nil, fmt.Errorf("exec: the program's history: %v", err)
	}
	zero := r.pstart.UnixNano()
	proc := 0
	for i := range ops {
		ops[i].Time -= zero
		for k := range ops[i].Failed {
			ops[i].Failed[k].Start -= zero
			ops[i].Failed[k].End -= zero
		}
		proc = max(proc, ops[i].Process+1)
	}
	if final != nil {
		t := int64(elapsed)
		for _, op := range ops {
			t = max(t, op.Time+1)
		}
		ops = append(ops,
			histories.Op{Time: t, Process: proc, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)},
			histories.Op{Time: t + 1, Process: proc, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: final})
	}
	hdr := *h
	if hdr.Store == "" {
		hdr.Store = string(r.a.store.name)
	}
	hdr.Seed = r.a.seed
	if err := rundir.WriteHistory(r.dir, hdr, ops); err != nil {
		return nil, nil, fmt.Errorf("exec: write history.jsonl: %v", err)
	}
	os.Remove(r.history)
	// Read back as `indoubt check` will, so that the verdict is of the file.
	h, ops, err = histories.ReadFile(filepath.Join(r.dir, "history.jsonl"), false)
	if err != nil {
		return nil, nil, fmt.Errorf("exec: reread history.jsonl: %v", err)
	}
	return h, ops, nil
}

// judge writes faults.jsonl, checks the history and joins the proxy's events to it.
func (r *execRun) judge(ctx context.Context, h *histories.Header, ops []histories.Op, elapsed time.Duration, interrupted bool) (*results.Results, []string, error) {
	r.mu.Lock()
	lines, err := rundir.MarshalFaults(r.events)
	r.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("exec: write faults.jsonl: %v", err)
	}
	faultsPath := filepath.Join(r.dir, rundir.FaultsFile)
	if err := atomicfile.Write(faultsPath, lines, 0o644); err != nil {
		return nil, nil, fmt.Errorf("exec: write faults.jsonl: %v", err)
	}
	if err := rundir.WriteCheck(r.dir, rundir.Check{Limits: execLimits, Proxied: true}); err != nil {
		return nil, nil, fmt.Errorf("exec: write %s: %v", rundir.CheckFile, err)
	}
	opt := judge.Options{}
	if h.Model == checker.RegisterModel || h.Model == checker.CASRegisterModel {
		opt.VisualizePath = filepath.Join(r.dir, "linearizability.html")
	}
	j, err := judge.History(context.WithoutCancel(ctx), r.dir, h, ops, opt)
	if err != nil {
		if strings.Contains(err.Error(), "no final read") {
			return nil, nil, fmt.Errorf("exec: check: the history has no final read: record one, or give --final-sql or --final-cmd")
		}
		return nil, nil, fmt.Errorf("exec: %v", strings.TrimPrefix(err.Error(), "exec: "))
	}
	res := j.Results
	judge.Figures(res, ops, elapsed)
	res.Retry, res.StartedAt = "program", r.pstart.UTC()
	res.Workload = execWorkload
	res.Store, res.Seed, res.Server, res.Interrupted = string(r.a.store.name), r.a.seed, r.desc, interrupted
	res.Mechanism = shorten(programName(r.a.argv), 48)
	res.Faults.Schedule = specsOf(r.a.schedule)
	return res, evidence.Unjoined(j.Events, j.Spans, ops), nil
}

// execLimits bound exec's check: the register models' search stops after a minute.
var execLimits = rundir.Limits{Timeout: time.Minute}

// programName is the program's command line as the report shows it: paths by their
// last element.
func programName(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = a
		if strings.Contains(a, "/") && !strings.HasPrefix(a, "-") && !strings.ContainsAny(a, " =") {
			out[i] = filepath.Base(a)
		}
	}
	return strings.Join(out, " ")
}

// execWorkload is results.json's workload of an exec: the program's own workload is in
// its history's header.
const execWorkload workloads.Name = "exec"

// shorten cuts s to at most n bytes, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// specsOf returns the schedule's entries as written.
func specsOf(s schedule.Schedule) []string {
	out := []string{}
	for _, f := range s {
		out = append(out, f.Spec)
	}
	return out
}

func faultNames(s schedule.Schedule) string {
	if len(s) == 0 {
		return "nofault"
	}
	var ns []string
	for _, f := range s {
		ns = append(ns, f.Name)
	}
	return strings.Join(ns, "+")
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}

// writeRunJSON writes v indented, readable by its owner only, like the run directory.
func writeRunJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o600)
}

// queryFinal runs query on the server at dsn and returns its rows as the model's final
// read: exactly-once and bank, rows of (name, integer) as one object; budget and
// counter, one row of one integer as {"balance":n} or {"value":n}.
func queryFinal(ctx context.Context, dsn, query, model string) (json.RawMessage, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, query, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		return nil, fmt.Errorf("--final-sql: %v", err)
	}
	defer rows.Close()
	var pairs [][]any
	for rows.Next() {
		vs, err := rows.Values()
		if err != nil {
			return nil, fmt.Errorf("--final-sql: %v", err)
		}
		pairs = append(pairs, vs)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("--final-sql: %v", err)
	}
	switch model {
	case checker.ExactlyOnceModel, checker.BankModel:
		state := map[string]int64{}
		for _, vs := range pairs {
			if len(vs) != 2 {
				return nil, fmt.Errorf("--final-sql: the %s model's final read is rows of two columns (name, integer); the query gave %d", model, len(vs))
			}
			n, ok := integer(vs[1])
			if !ok {
				return nil, fmt.Errorf("--final-sql: the second column is not an integer (%v)", vs[1])
			}
			state[textOf(vs[0])] += n
		}
		return json.Marshal(state)
	case "budget", "counter":
		if len(pairs) != 1 || len(pairs[0]) != 1 {
			return nil, fmt.Errorf("--final-sql: the %s model's final read is one row of one integer; the query gave %d rows", model, len(pairs))
		}
		n, ok := integer(pairs[0][0])
		if !ok {
			return nil, fmt.Errorf("--final-sql: the value is not an integer (%v)", pairs[0][0])
		}
		key := "balance"
		if model == "counter" {
			key = "value"
		}
		return json.Marshal(map[string]int64{key: n})
	case "":
		return nil, fmt.Errorf("--final-sql: the history names no model to map the rows to: give --model")
	}
	return nil, fmt.Errorf("--final-sql: the %s model has no final read from rows", model)
}

// integer reads a column's value as an integer: any integer type, a numeric (sum()
// gives one) or a float without a fraction.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case float64:
		return int64(x), float64(int64(x)) == x
	case pgtype.Numeric:
		i, err := x.Int64Value()
		return i.Int64, err == nil && i.Valid
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// textOf reads a column's value as a name: text as it is, a UUID in its usual form,
// anything else as Go prints it.
func textOf(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	}
	return fmt.Sprint(v)
}
