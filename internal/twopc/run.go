package twopc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// GIDPrefix starts the gid of every transaction these runs prepare; recovery touches
// nothing else.
const GIDPrefix = "indoubt-2pc-"

// Config is one two-phase commit run.
type Config struct {
	Workload    workloads.Name     `json:"workload"` // workloads.Transfer or workloads.TwoRows
	Placement   transfer.Placement `json:"placement"`
	Servers     int                `json:"servers"`
	Workers     int                `json:"workers"`
	Ops         int                `json:"ops_per_worker"` // ignored when Duration is set
	Duration    time.Duration      `json:"duration"`
	Seed        int64              `json:"seed"`
	Coordinator Mode               `json:"coordinator"`
	Faults      []Fault            `json:"-"`
	// Reads is the share of a transfer run's operations that read the total across
	// servers (one server after another, no global snapshot).
	Reads float64 `json:"reads"`
	// RowsPerWorker is the table's size per worker (the paper's 1000 when 0).
	RowsPerWorker int `json:"rows_per_worker"`
	// RecoverAfter is how long the in-doubt transactions stay in doubt after a
	// coordinator crash before recovery runs (1s when 0), while probes time how long
	// they block writers.
	RecoverAfter time.Duration `json:"recover_after"`
	// Out is the parent of the run directory ("runs" when empty).
	Out string `json:"out"`
	// DSNs, when given, are the servers to use instead of launching Servers of them.
	DSNs []string `json:"-"`
	// Progress receives human-readable progress lines; nil for none.
	Progress io.Writer `json:"-"`
}

// ErrCouldNotRun wraps every error that kept a run from reaching a verdict.
var ErrCouldNotRun = errors.New("could not run")

func couldNotRun(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrCouldNotRun, fmt.Sprintf(format, a...))
}

func (c *Config) defaults() error {
	if c.Workload != workloads.Transfer && c.Workload != workloads.TwoRows {
		return couldNotRun("workload %q is not a two-phase commit workload (transfer, two-rows)", c.Workload)
	}
	if c.Placement == "" {
		c.Placement = transfer.Distributed
	}
	if _, err := transfer.ParsePlacement(string(c.Placement)); err != nil {
		return couldNotRun("%v", err)
	}
	if len(c.DSNs) > 0 {
		c.Servers = len(c.DSNs)
	}
	if c.Servers < 2 || c.Servers > 5 {
		return couldNotRun("--servers must be 2 to 5")
	}
	if c.Workers < 1 {
		return couldNotRun("--workers must be at least 1")
	}
	if c.Ops <= 0 && c.Duration <= 0 {
		return couldNotRun("give --ops or --time")
	}
	if c.Coordinator == "" {
		c.Coordinator = Logged
	}
	if _, err := ParseMode(string(c.Coordinator)); err != nil {
		return couldNotRun("%v", err)
	}
	if c.Reads < 0 || c.Reads > 1 {
		return couldNotRun("--reads must be between 0 and 1")
	}
	if c.RowsPerWorker == 0 {
		c.RowsPerWorker = 1000
	}
	if c.RecoverAfter == 0 {
		c.RecoverAfter = time.Second
	}
	if c.Out == "" {
		c.Out = "runs"
	}
	proxyFaults := 0
	for _, f := range c.Faults {
		if f.Kind == CoordinatorCrash {
			if c.Placement != transfer.Distributed {
				return couldNotRun("coordinator-crash needs --placement distributed: local transactions have no coordinator")
			}
			continue
		}
		proxyFaults++
	}
	if proxyFaults > 1 {
		return couldNotRun("give at most one of prepare-cut, prepare-drop, commit-cut, commit-drop")
	}
	return nil
}

// Stats are a run's throughput and latency over its transactions (the reads of the
// total are checks and are left out).
type Stats struct {
	Transactions int64         `json:"transactions"`
	Committed    int64         `json:"committed"`
	Aborted      int64         `json:"aborted"`
	Abandoned    int64         `json:"abandoned"`
	Elapsed      time.Duration `json:"elapsed_ns"`
	PerSecond    float64       `json:"tx_per_second"` // committed transactions
	Mean         time.Duration `json:"mean_ns"`
	P99          time.Duration `json:"p99_ns"`
	// AbortReasons counts aborted transactions by their error's first words.
	AbortReasons map[string]int64 `json:"abort_reasons,omitempty"`
}

// LockProbe is one writer that tried a row an in-doubt transaction held.
type LockProbe struct {
	GID         string `json:"gid"`
	Participant int    `json:"participant"`
	Row         int    `json:"row"`
	// Blocked is how long the probe waited (lock_timeout after lock_timeout) until
	// its update went through; Timeouts counts the waits.
	Blocked  time.Duration `json:"blocked_ns"`
	Timeouts int           `json:"timeouts"`
	// LockedFor is from the row's PREPARE TRANSACTION to the probe's success.
	LockedFor time.Duration `json:"locked_for_ns"`
	Err       string        `json:"error,omitempty"`
}

// CrashReport is what a coordinator crash left and how it was repaired.
type CrashReport struct {
	At time.Duration `json:"at_ns"`
	// Stops counts the transactions abandoned at each protocol point.
	Stops   map[string]int64 `json:"stops"`
	InDoubt []InDoubt        `json:"in_doubt"`
	Probes  []LockProbe      `json:"lock_probes,omitempty"`
	// Recovery is how long Recover took; Resolved is from the crash until every
	// in-doubt transaction was finished.
	Recovery time.Duration `json:"recovery_ns"`
	Resolved time.Duration `json:"resolved_ns"`
}

// Result is the outcome of one run, written to results.json in its directory.
type Result struct {
	Config Config   `json:"config"`
	Faults []string `json:"faults,omitempty"`
	Dir    string   `json:"dir"`
	Valid  bool     `json:"valid"`
	Stats  Stats    `json:"stats"`
	// ProxyFaults counts the proxy's faults that fired, by kind.
	ProxyFaults map[string]int64 `json:"proxy_faults,omitempty"`
	Crash       *CrashReport     `json:"crash,omitempty"`
	// Recovery is what the end-of-run recovery resolved (after a crash: the crash's).
	Recovery []Resolution   `json:"recovery"`
	Final    transfer.Final `json:"final"`
	// Bank is the bank checker's verdict on history.jsonl (transfer runs only).
	Bank *checker.Result `json:"bank,omitempty"`
}

// cluster is the run's servers: pools through the proxies (the workers' path) and
// direct pools (setup, recovery, probes, final reads).
type cluster struct {
	work, direct []*pgxpool.Pool
	proxies      []*faults.Proxy
	stops        []func() error
	n            int
}

func (c *cluster) close() {
	for _, p := range append(c.work, c.direct...) {
		if p != nil {
			p.Close()
		}
	}
	for _, p := range c.proxies {
		_ = p.Close()
	}
	for _, s := range c.stops {
		_ = s()
	}
}

// server returns the server that holds row.
func (c *cluster) server(row int) int { return row % c.n }

// Run performs one run. An invalid final state is a Result with Valid false; the
// error wraps ErrCouldNotRun when no verdict could be reached.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	say := progress(cfg.Progress)
	dir, err := runDir(cfg)
	if err != nil {
		return nil, err
	}
	res := &Result{Config: cfg, Dir: dir, Faults: faultSpecs(cfg.Faults)}
	proxyFault, crash := splitFaults(cfg.Faults)
	var fired firedCounts
	cl, err := openCluster(ctx, cfg, dir, proxyFault, fired.count, say)
	if err != nil {
		return nil, err
	}
	defer cl.close()
	rows := cfg.RowsPerWorker * cfg.Workers
	if err := setup(ctx, cl, rows); err != nil {
		return nil, couldNotRun("setup: %v", err)
	}
	logPath := filepath.Join(dir, "decisions.jsonl")
	co, dlog, err := openCoordinator(cfg, cl, logPath)
	if err != nil {
		return nil, err
	}
	if dlog != nil {
		defer dlog.Close()
	}
	armProxies(cl, proxyFault)

	say("%s %s on %d servers, %d workers, coordinator %s", cfg.Workload, cfg.Placement, cfg.Servers, cfg.Workers, cfg.Coordinator)
	start := time.Now()
	w, err := newWorkers(cfg, cl, co, rows, dir, start)
	if err != nil {
		return nil, err
	}
	crashed, stopCrash := scheduleCrash(co, crash, say)
	defer stopCrash()
	runWorkers(ctx, cfg.Duration, w)
	var crashAt time.Time
	if co.crashed.Load() {
		crashAt = <-crashed
	}
	res.Stats = w.stats(time.Since(start))
	say("%d transactions, %.0f committed/s, mean %v, p99 %v", res.Stats.Transactions, res.Stats.PerSecond, res.Stats.Mean.Round(time.Microsecond), res.Stats.P99.Round(time.Microsecond))
	disarmProxies(cl)

	// Whatever happened, the rest must finish even when ctx was cancelled.
	fin, finCancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer finCancel()
	if crash != nil && !crashAt.IsZero() {
		res.Crash, res.Recovery, err = afterCrash(fin, cfg, cl, co, w.attemptsByGID(), crashAt, logPath, start, say)
	} else {
		res.Recovery, err = Recover(fin, cl.direct, cfg.Coordinator, logPath, GIDPrefix)
	}
	if err != nil {
		return nil, couldNotRun("recovery: %v", err)
	}
	res.ProxyFaults = fired.counts()
	if err := judge(fin, res, cl, w, rows); err != nil {
		return nil, err
	}
	if err := writeResult(res); err != nil {
		return nil, couldNotRun("%v", err)
	}
	return res, nil
}

// progress gives the line printer of a run: to out when there is one, else nowhere.
func progress(out io.Writer) func(string, ...any) {
	return func(format string, a ...any) {
		if out != nil {
			fmt.Fprintf(out, format+"\n", a...)
		}
	}
}

// runDir makes the run's directory under cfg.Out, named for when and what ran, so that
// runs side by side sort by time and read at a glance.
func runDir(cfg Config) (string, error) {
	dir := filepath.Join(cfg.Out, time.Now().UTC().Format("20060102T150405.000")+"-"+string(cfg.Workload)+"-"+string(cfg.Placement)+"-"+strconv.Itoa(cfg.Servers))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", couldNotRun("run directory: %v", err)
	}
	return dir, nil
}

// faultSpecs lists the faults as the user gave them, nil for none.
func faultSpecs(faults []Fault) []string {
	var specs []string
	for _, f := range faults {
		specs = append(specs, f.Spec)
	}
	return specs
}

// openCoordinator opens the coordinator over the cluster; a logged one first opens its
// decision log at logPath, which the caller closes.
func openCoordinator(cfg Config, cl *cluster, logPath string) (*Coordinator, *Log, error) {
	var dlog *Log
	if cfg.Coordinator == Logged {
		var err error
		if dlog, err = OpenLog(logPath); err != nil {
			return nil, nil, couldNotRun("%v", err)
		}
	}
	co, err := New(cl.work, cfg.Coordinator, dlog, cfg.Seed)
	if err != nil {
		if dlog != nil {
			dlog.Close()
		}
		return nil, nil, couldNotRun("%v", err)
	}
	return co, dlog, nil
}

// splitFaults tells the fault the proxies inject from the coordinator crash, which the
// run itself schedules; either may be nil. Of several of a kind the last wins.
func splitFaults(faults []Fault) (proxyFault, crash *Fault) {
	for i := range faults {
		if faults[i].Kind == CoordinatorCrash {
			crash = &faults[i]
		} else {
			proxyFault = &faults[i]
		}
	}
	return proxyFault, crash
}

// firedCounts counts the proxy events by kind; the proxies report from their own
// goroutines.
type firedCounts struct{ m sync.Map } // kind -> *atomic.Int64

func (f *firedCounts) count(e toxics.Event) {
	v, _ := f.m.LoadOrStore(e.Kind.String(), new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

// counts is the count per kind, nil when no event fired.
func (f *firedCounts) counts() map[string]int64 {
	var out map[string]int64
	f.m.Range(func(k, v any) bool {
		if out == nil {
			out = map[string]int64{}
		}
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// armProxies arms the proxy fault, if any, on every proxy: only once setup is done, so
// that the fault hits the workload and not the schema.
func armProxies(cl *cluster, f *Fault) {
	if f == nil {
		return
	}
	for _, p := range cl.proxies {
		k := &p.Faults().Drop
		if f.Kind.cut() {
			k = &p.Faults().Cut
		}
		k.Set(f.P, 0)
	}
}

// disarmProxies stops every proxy fault, so that recovery and the final read see the
// servers as they are.
func disarmProxies(cl *cluster) {
	for _, p := range cl.proxies {
		p.Faults().Drop.Disarm()
		p.Faults().Cut.Disarm()
	}
}

// scheduleCrash crashes the coordinator crash.At after now, when there is a crash to
// run; the channel then receives the moment. stop cancels a crash not yet made.
func scheduleCrash(co *Coordinator, crash *Fault, say func(string, ...any)) (crashed chan time.Time, stop func()) {
	crashed = make(chan time.Time, 1)
	if crash == nil {
		return crashed, func() {}
	}
	t := time.AfterFunc(crash.At, func() {
		co.Crash()
		crashed <- time.Now()
		say("coordinator crashed at %v", crash.At)
	})
	return crashed, func() { t.Stop() }
}

// newWorkers prepares the workers of a run; a transfer workload also keeps a history
// in dir, for the bank checker.
func newWorkers(cfg Config, cl *cluster, co *Coordinator, rows int, dir string, start time.Time) (*workers, error) {
	w := &workers{cfg: cfg, cl: cl, co: co, rows: rows}
	if cfg.Workload == workloads.Transfer {
		var err error
		if w.hist, err = newHistory(dir, cfg, rows, start); err != nil {
			return nil, couldNotRun("%v", err)
		}
	}
	return w, nil
}

// runWorkers runs the workload until ctx ends, or for d when d is positive.
func runWorkers(ctx context.Context, d time.Duration, w *workers) {
	runCtx, cancel := context.WithCancel(ctx)
	if d > 0 {
		runCtx, cancel = context.WithTimeout(ctx, d)
	}
	w.run(runCtx)
	cancel()
}

// judge reads the final balances and holds them, and the history when one was kept,
// to the transfers made, setting the result's verdicts.
func judge(fin context.Context, res *Result, cl *cluster, w *workers, rows int) error {
	obs, balances, err := observe(fin, cl, rows)
	if err != nil {
		return couldNotRun("final read: %v", err)
	}
	obs.Attempts, obs.Reads = w.attempts(), w.reads()
	res.Final = transfer.Check(obs)
	res.Valid = res.Final.Valid
	if w.hist != nil {
		bank, err := w.hist.check(fin, finalProcess, balances)
		if err != nil {
			return couldNotRun("check history: %v", err)
		}
		res.Bank = &bank
		res.Valid = res.Valid && bank.Verdict == checker.Valid
	}
	return nil
}

func openCluster(ctx context.Context, cfg Config, dir string, fault *Fault, events func(toxics.Event), say func(string, ...any)) (*cluster, error) {
	cl := &cluster{n: cfg.Servers}
	dsns := cfg.DSNs
	if len(dsns) == 0 {
		t0 := time.Now()
		opt := postgres.Options{
			LogPath:                 filepath.Join(dir, "postgres.log"),
			MaxPreparedTransactions: max(64, 2*cfg.Workers+8),
		}
		if conns := 2*cfg.Workers + 20; conns > 200 {
			opt.Settings = map[string]string{"max_connections": strconv.Itoa(conns)}
		}
		pgs, err := postgres.StartMany(ctx, cfg.Servers, opt)
		if err != nil {
			return nil, couldNotRun("%v", err)
		}
		for _, pg := range pgs {
			dsns = append(dsns, pg.DSN)
			cl.stops = append(cl.stops, pg.Stop)
		}
		say("launched %d PostgreSQL servers in %v", len(pgs), time.Since(t0).Round(time.Millisecond))
	}
	for i, dsn := range dsns {
		workDSN := dsn
		if fault != nil {
			u, err := url.Parse(dsn)
			if err != nil || u.Host == "" {
				cl.close()
				return nil, couldNotRun("server %d: the DSN must be a URL with host:port", i)
			}
			stmt := fault.Kind.statement()
			px, err := faults.Start(faults.Options{
				Upstream: u.Host, Protocol: toxics.Postgres{}, Seed: cfg.Seed + int64(i),
				Name:   "indoubt-2pc-" + strconv.Itoa(i),
				Match:  func(text string) bool { return strings.Contains(strings.ToUpper(text), stmt) },
				Events: events,
			})
			if err != nil {
				cl.close()
				return nil, couldNotRun("proxy for server %d: %v", i, err)
			}
			cl.proxies = append(cl.proxies, px)
			u.Host = px.Addr()
			workDSN = u.String()
		}
		work, err := pool(ctx, workDSN, int32(cfg.Workers+4))
		if err != nil {
			cl.close()
			return nil, couldNotRun("server %d: %v", i, err)
		}
		cl.work = append(cl.work, work)
		direct, err := pool(ctx, dsn, int32(cfg.Workers+4))
		if err != nil {
			cl.close()
			return nil, couldNotRun("server %d: %v", i, err)
		}
		cl.direct = append(cl.direct, direct)
	}
	return cl, nil
}

func pool(ctx context.Context, dsn string, conns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("the DSN does not parse")
	}
	pc.MaxConns = conns
	// A distributed deadlock is invisible to each server's detector; the rows are
	// locked in one global order so none should form, and lock_timeout ends one that
	// would.
	pc.ConnConfig.RuntimeParams["lock_timeout"] = "10s"
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// setup creates the tables on every server (row r on server r mod n, every row at
// transfer.Initial) and rolls back what an earlier run left prepared.
func setup(ctx context.Context, cl *cluster, rows int) error {
	left, err := ListInDoubt(ctx, cl.direct, GIDPrefix)
	if err != nil {
		return err
	}
	for _, d := range left {
		if _, err := cl.direct[d.Participant].Exec(ctx, "ROLLBACK PREPARED '"+d.GID+"'"); err != nil {
			return err
		}
	}
	for i, p := range cl.direct {
		_, err := p.Exec(ctx, `
			DROP TABLE IF EXISTS simplecount, applied;
			CREATE TABLE simplecount (id int PRIMARY KEY, counter bigint NOT NULL);
			CREATE TABLE applied (gid text NOT NULL, row_id int NOT NULL, PRIMARY KEY (gid, row_id))`)
		if err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
		_, err = p.Exec(ctx, `INSERT INTO simplecount SELECT g, $1 FROM generate_series(0, $2 - 1) g WHERE g % $3 = $4`,
			transfer.Initial, rows, len(cl.direct), i)
		if err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
		if _, err := p.Exec(ctx, "VACUUM ANALYZE simplecount"); err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
	}
	return nil
}

// finalProcess is the process of the history's final read: no worker's.
const finalProcess = 1 << 30

// observe reads the final state: every row, the markers and what is still prepared.
func observe(ctx context.Context, cl *cluster, rows int) (transfer.Observed, checker.Balances, error) {
	o := transfer.Observed{Rows: rows, Markers: map[string][]int{}}
	bal := checker.Balances{}
	for i, p := range cl.direct {
		r, err := p.Query(ctx, "SELECT id, counter FROM simplecount")
		if err != nil {
			return o, nil, fmt.Errorf("server %d: %w", i, err)
		}
		var id int
		var counter int64
		_, err = pgx.ForEachRow(r, []any{&id, &counter}, func() error {
			o.Total += counter
			bal[account(id)] = counter
			return nil
		})
		if err != nil {
			return o, nil, fmt.Errorf("server %d: %w", i, err)
		}
		r, err = p.Query(ctx, "SELECT gid, row_id FROM applied")
		if err != nil {
			return o, nil, fmt.Errorf("server %d: %w", i, err)
		}
		var gid string
		var row int
		_, err = pgx.ForEachRow(r, []any{&gid, &row}, func() error {
			o.Markers[gid] = append(o.Markers[gid], row)
			return nil
		})
		if err != nil {
			return o, nil, fmt.Errorf("server %d: %w", i, err)
		}
	}
	left, err := ListInDoubt(ctx, cl.direct, "")
	if err != nil {
		return o, nil, err
	}
	for _, d := range left {
		o.Prepared = append(o.Prepared, fmt.Sprintf("%s@%d", d.GID, d.Participant))
	}
	return o, bal, nil
}

// afterCrash lists what the crash left in doubt, starts a writer on each row those
// transactions hold, waits cfg.RecoverAfter, recovers, and times how long the writers
// were blocked.
func afterCrash(ctx context.Context, cfg Config, cl *cluster, co *Coordinator, byGID map[string]transfer.Attempt, crashAt time.Time, logPath string, start time.Time, say func(string, ...any)) (*CrashReport, []Resolution, error) {
	rep := &CrashReport{At: crashAt.Sub(start), Stops: co.Stops()}
	doubt, err := ListInDoubt(ctx, cl.direct, GIDPrefix)
	if err != nil {
		return nil, nil, err
	}
	rep.InDoubt = doubt
	say("%d transactions in doubt on the participants (abandoned: %v)", len(doubt), rep.Stops)
	var wg sync.WaitGroup
	probes := make([]LockProbe, 0, len(doubt))
	for _, d := range doubt {
		a, ok := byGID[d.GID]
		if !ok {
			continue
		}
		for _, row := range []int{a.From, a.To} {
			if cl.server(row) == d.Participant && a.From != a.To {
				probes = append(probes, LockProbe{GID: d.GID, Participant: d.Participant, Row: row})
			}
		}
	}
	prepared := map[string]time.Time{}
	for _, d := range doubt {
		prepared[fmt.Sprintf("%s@%d", d.GID, d.Participant)] = d.Prepared
	}
	for i := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &probes[i]
			var perr error
			p.Blocked, p.Timeouts, perr = probe(ctx, cl.direct[p.Participant], p.Row)
			if perr != nil {
				p.Err = perr.Error()
			}
			p.LockedFor = time.Since(prepared[fmt.Sprintf("%s@%d", p.GID, p.Participant)])
		}()
	}
	select {
	case <-time.After(cfg.RecoverAfter):
	case <-ctx.Done():
	}
	t0 := time.Now()
	res, err := Recover(ctx, cl.direct, cfg.Coordinator, logPath, GIDPrefix)
	rep.Recovery = time.Since(t0)
	rep.Resolved = time.Since(crashAt)
	wg.Wait()
	rep.Probes = probes
	say("recovery finished %d in-doubt branches in %v (%v after the crash)", len(res), rep.Recovery.Round(time.Microsecond), rep.Resolved.Round(time.Millisecond))
	return rep, res, err
}

// probe updates row in a loop of short lock timeouts until the update goes through, and
// returns how long that took and how many timeouts it met.
func probe(ctx context.Context, p *pgxpool.Pool, row int) (time.Duration, int, error) {
	t0 := time.Now()
	timeouts := 0
	for {
		err := pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '20ms'"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE simplecount SET counter = counter WHERE id = $1", row)
			if err == nil {
				return errRollback // the probe changes nothing
			}
			return err
		})
		var pe *pgconn.PgError
		switch {
		case errors.Is(err, errRollback):
			if timeouts == 0 {
				return 0, 0, nil
			}
			return time.Since(t0), timeouts, nil
		case errors.As(err, &pe) && pe.Code == "55P03":
			timeouts++
		default:
			return time.Since(t0), timeouts, err
		}
		if ctx.Err() != nil {
			return time.Since(t0), timeouts, ctx.Err()
		}
	}
}

var errRollback = errors.New("rollback")

func writeResult(res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(res.Dir, "results.json.partial")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(res.Dir, "results.json"))
}

// workers drives the run's workers and keeps what they saw.
type workers struct {
	cfg  Config
	cl   *cluster
	co   *Coordinator
	rows int
	hist *history // transfer runs only

	mu        sync.Mutex
	lat       []time.Duration
	all       []transfer.Attempt
	totals    []int64
	committed int64
	aborted   int64
	abandoned int64
	reasons   map[string]int64
}

func (w *workers) run(ctx context.Context) {
	var wg sync.WaitGroup
	for id := range w.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.worker(ctx, id)
		}()
	}
	wg.Wait()
}

func (w *workers) worker(ctx context.Context, id int) {
	rng := rand.New(rand.NewPCG(uint64(w.cfg.Seed), uint64(id)+1))
	process := id // a process whose operation ended unknown never invokes again
	for seq := 0; w.cfg.Duration > 0 || seq < w.cfg.Ops; seq++ {
		if ctx.Err() != nil {
			return
		}
		if w.cfg.Workload == workloads.Transfer && w.cfg.Reads > 0 && rng.Float64() < w.cfg.Reads {
			if total, err := w.readTotal(ctx); err == nil {
				w.mu.Lock()
				w.totals = append(w.totals, total)
				w.mu.Unlock()
			}
			continue
		}
		a, b := w.pick(rng)
		gid := fmt.Sprintf("%s%d-%d", GIDPrefix, id, seq)
		// The end of the run stops new transactions, never one under way: a
		// cancelled PREPARE or COMMIT PREPARED would be a fault the run did not ask for.
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		if w.hist != nil {
			w.hist.invoke(process, gid, a, b)
		}
		t0 := time.Now()
		var out Outcome
		var err error
		if w.cfg.Placement == transfer.Local {
			out, err = w.local(opCtx, a, b, gid)
		} else {
			out, err = w.distributed(opCtx, a, b, gid)
		}
		cancel()
		got := w.record(gid, a, b, out, err, time.Since(t0))
		if w.hist != nil {
			w.hist.complete(process, gid, got, err)
		}
		if got == transfer.Info {
			process += w.cfg.Workers
		}
		if errors.Is(err, ErrCrashed) {
			return
		}
	}
}

// pick returns two distinct rows, from and to: on one server (local) or on two
// (distributed).
func (w *workers) pick(rng *rand.Rand) (int, int) {
	n := w.cl.n
	perServer := w.rows / n
	row := func(server int) int { return rng.IntN(perServer)*n + server }
	s1 := rng.IntN(n)
	if w.cfg.Placement == transfer.Local {
		a, b := row(s1), row(s1)
		for b == a {
			b = row(s1)
		}
		return a, b
	}
	s2 := rng.IntN(n - 1)
	if s2 >= s1 {
		s2++
	}
	return row(s1), row(s2)
}

// work is one side of a transaction on its server: the read of two-rows, or the
// update of a transfer and its marker.
func (w *workers) work(gid string, row, delta int) func(context.Context, *pgx.Conn) error {
	if w.cfg.Workload == workloads.TwoRows {
		return func(ctx context.Context, c *pgx.Conn) error {
			var v int64
			return c.QueryRow(ctx, "SELECT counter FROM simplecount WHERE id = $1", row).Scan(&v)
		}
	}
	return func(ctx context.Context, c *pgx.Conn) error {
		if _, err := c.Exec(ctx, "UPDATE simplecount SET counter = counter + $1 WHERE id = $2", delta, row); err != nil {
			return err
		}
		_, err := c.Exec(ctx, "INSERT INTO applied (gid, row_id) VALUES ($1, $2)", gid, row)
		return err
	}
}

// local runs both sides in one transaction on the rows' server.
func (w *workers) local(ctx context.Context, a, b int, gid string) (Outcome, error) {
	c, err := w.cl.work[w.cl.server(a)].Acquire(ctx)
	if err != nil {
		return Aborted, err
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return Aborted, err
	}
	sides := []struct{ row, delta int }{{a, -1}, {b, 1}}
	if b < a { // every transaction locks its rows in one order: no deadlock
		sides[0], sides[1] = sides[1], sides[0]
	}
	for _, side := range sides {
		if err := w.work(gid, side.row, side.delta)(ctx, c.Conn()); err != nil {
			_ = tx.Rollback(ctx)
			return Aborted, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return Aborted, err
		}
		return Abandoned, err // the commit's outcome is unknown
	}
	return Committed, nil
}

// distributed runs one side on each row's server under two-phase commit.
func (w *workers) distributed(ctx context.Context, a, b int, gid string) (Outcome, error) {
	branches := []Branch{
		{Participant: w.cl.server(a), Work: w.work(gid, a, -1)},
		{Participant: w.cl.server(b), Work: w.work(gid, b, 1)},
	}
	// Each server's detector sees only its own waits, so a cycle across servers would
	// go unbroken: every transaction takes its servers in one order.
	if branches[1].Participant < branches[0].Participant {
		branches[0], branches[1] = branches[1], branches[0]
	}
	return w.co.Do(ctx, gid, branches)
}

// readTotal sums every server's rows, one server after another: no global snapshot.
func (w *workers) readTotal(ctx context.Context) (int64, error) {
	var total int64
	for _, p := range w.cl.work {
		var s int64
		if err := p.QueryRow(ctx, "SELECT sum(counter) FROM simplecount").Scan(&s); err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

func (w *workers) record(gid string, a, b int, out Outcome, err error, d time.Duration) transfer.Outcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := transfer.Attempt{GID: gid, From: a, To: b}
	switch out {
	case Committed:
		w.committed++
		w.lat = append(w.lat, d)
		at.Outcome = transfer.OK
	case Aborted:
		w.aborted++
		at.Outcome = transfer.Fail
		if w.reasons == nil {
			w.reasons = map[string]int64{}
		}
		w.reasons[reason(err)]++
	default:
		w.abandoned++
		at.Outcome = transfer.Info
	}
	if w.cfg.Workload == workloads.Transfer {
		w.all = append(w.all, at)
	}
	return at.Outcome
}

// reason is an error's SQLSTATE, or its text up to the first colon.
func reason(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code + " " + pe.Message
	}
	if err == nil {
		return "none"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

func (w *workers) stats(elapsed time.Duration) Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{Committed: w.committed, Aborted: w.aborted, Abandoned: w.abandoned, Elapsed: elapsed, AbortReasons: w.reasons}
	s.Transactions = s.Committed + s.Aborted + s.Abandoned
	if elapsed > 0 {
		s.PerSecond = float64(s.Committed) / elapsed.Seconds()
	}
	if len(w.lat) > 0 {
		l := slices.Clone(w.lat)
		slices.Sort(l)
		var sum time.Duration
		for _, d := range l {
			sum += d
		}
		s.Mean = sum / time.Duration(len(l))
		s.P99 = l[min(len(l)-1, len(l)*99/100)]
	}
	return s
}

func (w *workers) attempts() []transfer.Attempt {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.all)
}

func (w *workers) attemptsByGID() map[string]transfer.Attempt {
	m := map[string]transfer.Attempt{}
	for _, a := range w.attempts() {
		m[a.GID] = a
	}
	return m
}

func (w *workers) reads() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.totals)
}
