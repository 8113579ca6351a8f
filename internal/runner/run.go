// Package runner runs one workload against one store: it launches or dials the server,
// puts the fault proxy in front when faults are asked for, drives the workers under a
// retry policy, records every attempt's outcome in the history, reads the final state,
// checks the history and writes the run directory.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/indoubt/indoubt/internal/atomicfile"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/servers"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/twopc"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
	"github.com/indoubt/indoubt/workloads/txn"
)

// Config is one run.
type Config struct {
	Workload  workloads.Name `json:"workload"`
	Store     StoreName      `json:"store"`
	DSN       string         `json:"dsn,omitempty"`
	Workers   int            `json:"workers"`
	Ops       int            `json:"ops_per_worker"`
	Duration  time.Duration  `json:"duration"`
	Seed      int64          `json:"seed"`
	Out       string         `json:"out"`
	Retry     Policy         `json:"retry"`
	Mechanism string         `json:"mechanism,omitempty"`
	// Isolation is the transaction isolation level of workloads that take one (counter,
	// list-append, rw-register).
	Isolation string `json:"isolation,omitempty"`
	// Txn shapes the transactions of list-append and rw-register and names the models
	// their history is checked for; ReadFrom is where a replicated PostgreSQL's
	// read-only transactions run: primary (also "") or standby. See backends_txn.go.
	Txn      txn.Options `json:"txn,omitzero"`
	ReadFrom string      `json:"read_from,omitempty"`
	Budget   int64       `json:"budget,omitempty"`
	// Key is the insert workload's primary-key shape (insert.Key).
	Key string `json:"key,omitempty"`
	// Keys is the register workload's number of registers; 0 for its default
	// (register.DefaultKeys). See keys.go.
	Keys int `json:"keys,omitempty"`
	// Persistence is a launched Redis's durability: none, everysec or always.
	Persistence string `json:"persistence,omitempty"`
	// SynchronousCommit and Fsync are a launched PostgreSQL's settings of those names,
	// on or off; "" keeps PostgreSQL's default (on). PowerFS puts a launched server's
	// data directory on powerfs (a power-loss fault implies it). See powerloss.go.
	SynchronousCommit string `json:"synchronous_commit,omitempty"`
	Fsync             string `json:"fsync,omitempty"`
	PowerFS           bool   `json:"powerfs,omitempty"`
	// CommitLogSync is a launched Cassandra's commitlog_sync: periodic, batch or group;
	// "" keeps Cassandra's default (periodic, every 10000ms).
	CommitLogSync string `json:"commitlog_sync,omitempty"`
	// PowerFSEntries is powerfs's rule for directory entries: posix (also "": durable
	// once the directory is fsynced) or ordered (a journaling filesystem's: any fsync
	// makes every earlier entry change durable). Ordered is wired for Cassandra only.
	PowerFSEntries string `json:"powerfs_entries,omitempty"`
	// Topology is single (also "") or replicated (a launched PostgreSQL primary and
	// streaming standby, or a Redis primary, replica and three Sentinels); Replication
	// is async (also "") or sync (PostgreSQL only). See process_faults.go.
	Topology    string `json:"topology,omitempty"`
	Replication string `json:"replication,omitempty"`
	// PGVersion chooses a launched PostgreSQL's binaries: "15", "18" or a bin directory
	// (internal/servers/postgres.Bin); "" for the default.
	PGVersion string `json:"pg_version,omitempty"`
	// Faults is the fault schedule, parsed by the caller (schedule.Parse); in
	// config.json, one NAME[:P][@START-END] per entry.
	Faults schedule.Schedule `json:"-"`
	// Proxy is auto (through the proxy when faults are asked for), on or off.
	Proxy string `json:"proxy"`
	// Progress receives human-readable progress lines; nil for none.
	Progress io.Writer `json:"-"`
	// CheckTimeout bounds a search checker; 0 means a minute.
	CheckTimeout time.Duration `json:"check_timeout"`
	// RecoveryWait is how long past Duration a timed run with process faults goes on,
	// at most, waiting for an operation acknowledged after the last fault ended (see
	// runEnd); 0 means RecoveryWait, a minute. It is refused without a timed run with a
	// process fault.
	RecoveryWait time.Duration `json:"recovery_wait,omitempty"`
	// MaxAnomalies bounds the anomalies and ground-truth items results.json lists
	// (counts stay exact); 0 means results.DefaultMaxAnomalies, -1 lists all.
	MaxAnomalies int `json:"max_anomalies,omitempty"`
	// OnProgress, when set, receives a snapshot of the run a few times a second while
	// its workers run.
	OnProgress func(Progress) `json:"-"`
	// Network is "" (the servers on loopback) or isolated: every node of the topology
	// in a network namespace of its own, as partitions between nodes need (implied by
	// them). See partitions.go.
	Network string `json:"network,omitempty"`
	// dial, when set, dials the store's connections: the clients beside one node of an
	// isolated topology (partitions.go).
	dial func(ctx context.Context, network, addr string) (net.Conn, error) `json:"-"`
	// ring, on the admin's and the sides' Configs of a Cassandra ring on nodes of its
	// own, holds the admin's client, which the sides' clients stand beside (the data of
	// its Reset is theirs).
	ring *cqlRing `json:"-"`

	// The two-phase commit workloads (transfer, two-rows) run over several PostgreSQL
	// servers: Servers launched ones (2 to 5; 2 when 0), or the servers DSNs name (DSN
	// is for one server and is refused there). Placement puts a transaction's two rows
	// on one server (local) or on two (distributed, the default); Coordinator is logged
	// (the default: an fsynced decision log, presumed abort) or naive (recovery commits
	// whatever is prepared). Reads is the share of a transfer run's operations that read
	// the total across the servers; RowsPerWorker sizes the table (1000 when 0);
	// RecoverAfter is how long the transactions a coordinator-crash@T leaves in doubt
	// stay so before recovery (1s when 0). Each is refused for the other workloads.
	// See twophase.go.
	Servers       int                `json:"servers,omitempty"`
	DSNs          []string           `json:"dsns,omitempty"`
	Placement     transfer.Placement `json:"placement,omitempty"`
	Coordinator   twopc.Mode         `json:"coordinator,omitempty"`
	Reads         float64            `json:"reads,omitempty"`
	RowsPerWorker int                `json:"rows_per_worker,omitempty"`
	RecoverAfter  time.Duration      `json:"recover_after,omitempty"`

	// standbyDSN is the launched standby's, for ReadFrom standby.
	standbyDSN string `json:"-"`
}

// ErrCouldNotRun wraps every error that kept a run from producing a verdict: bad
// configuration, an unreachable server, a run directory that cannot be written.
var ErrCouldNotRun = errors.New("could not run")

// couldNotRun wraps the error format and a describe with ErrCouldNotRun; give an error
// with %w, so that its chain survives (errors.Is and errors.As see through both).
func couldNotRun(format string, a ...any) error {
	return fmt.Errorf("%w: %w", ErrCouldNotRun, fmt.Errorf(format, a...))
}

// MarshalJSON writes config.json: the configuration with the fault schedule as written
// and the DSN's secrets masked (redact.DSN), so that no encoding of a Config holds a
// password.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config
	c.DSN = redact.DSN(c.DSN)
	if c.DSNs != nil {
		masked := make([]string, len(c.DSNs))
		for i, d := range c.DSNs {
			masked[i] = redact.DSN(d)
		}
		c.DSNs = masked
	}
	return json.Marshal(struct {
		plain
		Faults []string `json:"faults,omitempty"`
	}{plain(c), specs(c.Faults)})
}

// specs returns the schedule's entries as written.
func specs(s schedule.Schedule) []string {
	var out []string
	for _, f := range s {
		out = append(out, f.Spec)
	}
	return out
}

// Validate checks the configuration as Run does before it launches anything: the store
// (and, without a DSN, that its server can be launched here: ErrUnavailable), its
// workload, mechanism and isolation, the counts, the faults and the proxy setting, and
// that nothing is set that the store or workload would ignore. The error wraps
// ErrCouldNotRun, and a *FieldError when one field is at fault. A caller that makes
// several runs validates them all before the first, so that a bad combination never
// waits behind a run that launched a server.
func (c Config) Validate() error { return c.defaults() }

// proxied reports whether the run goes through the fault proxy. Process faults and the
// coordinator's crash need none (process_faults.go, twophase.go).
func (c Config) proxied() bool {
	return c.Proxy == "on" || (c.Proxy == "auto" && len(c.Faults.OnProxy()) > 0)
}

// Run performs one run and returns its results. The error wraps ErrCouldNotRun when no
// verdict could be reached; an invalid history is a verdict, not an error. When ctx is
// cancelled mid-run, the workers stop, what was recorded is checked, and the results are
// marked interrupted.
//
// Nothing Run writes or returns holds a DSN's secrets: config.json carries the DSN
// masked (redact.DSN), and error texts (returned, and recorded in the history) are
// scrubbed of the secrets of the user's DSN and of the launched server's. The run
// directory is created 0700 and config.json and results.json 0600: a run directory is
// its owner's, as a shell history is; share it by copying it (or chmod), which is safe
// because what is inside is redacted.
func Run(ctx context.Context, cfg Config) (*results.Results, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	b, _ := lookupBackend(cfg.Store)
	start := time.Now()
	name := runName(cfg, start)
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, couldNotRun("create %s: %w", cfg.Out, err)
	}
	partial := filepath.Join(cfg.Out, "."+name+".partial")
	final := filepath.Join(cfg.Out, name)
	if err := os.Mkdir(partial, 0o700); err != nil {
		return nil, couldNotRun("create run directory: %w", err)
	}
	// A run killed before it publishes leaves its .partial directory: the marker lets
	// indoubt clean tell it from a live run's.
	if err := servers.MarkOwned(partial); err != nil {
		os.RemoveAll(partial)
		return nil, couldNotRun("create run directory: %v", err)
	}
	sc := &scrubber{}
	sc.add(cfg.DSN)
	for _, d := range cfg.DSNs {
		sc.add(d)
	}
	res, err := runIn(ctx, cfg, b, partial, sc)
	if err != nil {
		os.RemoveAll(partial)
		return nil, sc.err(err)
	}
	res.RunDir = final
	res.Trim(cfg.MaxAnomalies) // filled in by defaults: never 0
	if err := publish(cfg, res, partial, final, sc); err != nil {
		os.RemoveAll(partial)
		return nil, err
	}
	return res, nil
}

// publish writes report.html and results.json into the run directory and renames it
// from .NAME.partial to NAME. Nothing is published half-written: each file is written
// whole or not at all (atomicfile), and the directory is fsynced before the rename and
// its parent after. The report is a view of results.json: when it cannot be written
// (a full disk) the run is published without it, results.json listing it in
// not_written and a warning saying so, rather than the verdict thrown away. When
// results.json cannot be written, nothing is published: the run could not run.
func publish(cfg Config, res *results.Results, partial, final string, sc *scrubber) error {
	if err := report.WriteHTML(filepath.Join(partial, "report.html"), res); err != nil {
		why := sc.text(cause(err))
		res.NotWritten = append(res.NotWritten, "report.html: "+why)
		cfg.progressf("warning: report.html not written (%s): the run is published without it, results.json says so in not_written; indoubt report %s writes it", why, final)
	}
	if err := writeJSON(filepath.Join(partial, "results.json"), res); err != nil {
		return couldNotRun("write results: %w", sc.err(err))
	}
	if err := atomicfile.SyncDir(partial); err != nil {
		return couldNotRun("publish run directory: %w", err)
	}
	if err := os.Rename(partial, final); err != nil {
		return couldNotRun("publish run directory: %w", err)
	}
	// Published: no longer a leftover should this process die now.
	_ = servers.Unmark(final)
	if err := atomicfile.SyncDir(filepath.Dir(final)); err != nil {
		cfg.progressf("warning: fsync %s: %v", filepath.Dir(final), err)
	}
	return nil
}

// cause is why err's file could not be written, without the path (which, inside the
// run directory, names it before it was published).
func cause(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// scrubber masks the secrets of the DSNs a run uses (the user's, the launched server's,
// the proxy's rewrite) in text the run writes or returns: drivers quote parts of a DSN
// in their errors. Its DSNs are added before the workers start and only read after.
type scrubber struct{ dsns []string }

func (s *scrubber) add(dsn string) {
	if dsn != "" && !slices.Contains(s.dsns, dsn) {
		s.dsns = append(s.dsns, dsn)
	}
}

// text masks the secrets written as parts of DSNs in t, and the forms drivers quote
// the run's DSNs in (redact.Text).
func (s *scrubber) text(t string) string { return redact.Text(t, s.dsns...) }

// err scrubs err's message; the result still unwraps to err (ErrCouldNotRun, the error
// contract's classes).
func (s *scrubber) err(err error) error { return redact.Error(err, s.dsns...) }

func (c Config) progressf(format string, a ...any) {
	if c.Progress != nil {
		console.Fprintf(c.Progress, format+"\n", a...)
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	// config.json and results.json carry the configuration: the owner's only, like
	// the run directory. Whole or not at all.
	return atomicfile.Write(path, append(b, '\n'), 0o600)
}

// runIn does the run with dir as its (not yet published) run directory.
// Every DSN it dials is added to sc before any error can quote it.
func runIn(ctx context.Context, cfg Config, b backend, dir string, sc *scrubber) (res *results.Results, err error) {
	if err := writeJSON(filepath.Join(dir, "config.json"), cfg); err != nil {
		return nil, couldNotRun("write config: %w", err)
	}
	ph, cpu := &results.Phases{}, &results.Phases{}
	lap, cpuLap := time.Now(), processCPU()
	// took ends a phase: its wall time into wall, the process's CPU time into used.
	took := func(wall, used *float64) {
		now, c := time.Now(), processCPU()
		*wall, *used = now.Sub(lap).Seconds(), (c - cpuLap).Seconds()
		lap, cpuLap = now, c
	}
	dsns, serverDesc, srv, err := serve(ctx, cfg, b, dir)
	if err != nil {
		return nil, couldNotRun("%w", err)
	}
	// Deferred first, so it runs last: Stop counts closing the store's sessions and the
	// proxy as well as stopping the server.
	defer func() {
		srv.stop()
		took(&ph.Stop, &cpu.Stop)
	}()
	for _, d := range dsns {
		sc.add(d)
	}
	cfg.standbyDSN = srv.standby
	sc.add(srv.standby)
	var nem *nemesis
	if cfg.proxied() || len(cfg.Faults) > 0 || srv.topo != nil || srv.roles != nil {
		n, pdsns, err := startNemesis(ctx, cfg, b, dsns, dir, srv)
		if err != nil {
			return nil, couldNotRun("%w", err)
		}
		// What close writes (the windows' ends, the last events) must reach the file
		// too: a faults.jsonl that could not be written whole fails the run.
		defer func() {
			if cerr := n.close(); cerr != nil && err == nil {
				res, err = nil, couldNotRun("write faults.jsonl: %w", cerr)
			}
		}()
		nem, dsns = n, pdsns
		for _, d := range dsns {
			sc.add(d)
		}
	}
	// A run on a database it did not launch holds that database's run lock from here,
	// before anything is written, to its end (LockDSN): indoubt run, a suite's case and
	// shrink's runs alike. Taken once the DSN has passed every check above.
	unlock, err := LockDSN(ctx, cfg.Store, cfg.DSN)
	if err != nil {
		return nil, couldNotRun("%w", err)
	}
	defer unlock()
	took(&ph.Launch, &cpu.Launch)
	var tp *twoPhase
	var wl workloads.Workload
	var closeStore func()
	if cfg.twoPhase() {
		tp, wl, closeStore, err = openTwoPhase(ctx, cfg, dsns, dir)
	} else {
		wl, closeStore, err = openWorkload(ctx, cfg, b, dsns[0], srv.topo)
	}
	if err != nil {
		return nil, couldNotRun("%w", err)
	}
	defer closeStore()
	if err := wl.Setup(ctx); err != nil {
		return nil, couldNotRun("set up %s on %s: %w", cfg.Workload, cfg.Store, err)
	}
	took(&ph.Setup, &cpu.Setup)
	r, err := record(ctx, cfg, wl, nem, tp, dir, sc)
	if err != nil {
		return nil, couldNotRun("%w", nem.explain(err))
	}
	// Every fault event has reached faults.jsonl (or the run fails here): a run whose
	// evidence could not be written is not presented as complete.
	if err := nem.flush(); err != nil {
		return nil, couldNotRun("write faults.jsonl: %w", err)
	}
	took(&ph.Workload, &cpu.Workload)
	j, notWritten, err := check(ctx, cfg, wl, dir, nem.proxied())
	if err != nil {
		return nil, couldNotRun("%w", err)
	}
	res = r.results(j, serverDesc)
	res.NotWritten = notWritten
	if nem != nil {
		nem.account(res)
	}
	if tp != nil {
		res.TwoPhase = tp.section(r)
	}
	took(&ph.Check, &cpu.Check)
	// Stop is filled in when the server has stopped, before Run writes the results.
	res.Phases, res.PhasesCPU = ph, cpu
	return res, nil
}

// serve dials --dsn (the DSNs of a two-phase commit run), or launches a throwaway
// server (several for a two-phase commit run). It returns the DSNs, the servers'
// description for the report, and what was launched (what stops it, what faults it).
func serve(ctx context.Context, cfg Config, b backend, dir string) (dsns []string, desc string, srv launched, err error) {
	switch {
	case len(cfg.DSNs) > 0:
		return cfg.DSNs, "external", launched{stop: func() error { return nil }}, nil
	case cfg.DSN != "":
		return []string{cfg.DSN}, "external", launched{stop: func() error { return nil }}, nil
	}
	cfg.progressf("launching a local %s ...", b.name)
	if cfg.isolated() {
		srv, err = launchIsolated(ctx, cfg, dir)
	} else {
		srv, err = b.launch(ctx, cfg, dir)
	}
	if err != nil {
		return nil, "", launched{}, err
	}
	dsns = srv.dsns
	if dsns == nil {
		dsns = []string{srv.dsn}
	}
	return dsns, "launched " + srv.desc, srv, nil
}

// record drives the workers with the history open, then records the final reads (of a
// two-phase commit run, once recovery has finished what was left in doubt). The history
// is closed when it returns.
func record(ctx context.Context, cfg Config, wl workloads.Workload, nem *nemesis, tp *twoPhase, dir string, sc *scrubber) (*run, error) {
	hdr := histories.Header{
		Workload: string(wl.Name()), Model: wl.Model(), Store: string(cfg.Store), Seed: cfg.Seed, Params: wl.Params(),
	}
	hw, err := histories.Create(filepath.Join(dir, "history.jsonl"), hdr)
	if err != nil {
		return nil, err
	}
	defer hw.Close()

	r := &run{cfg: cfg, wl: wl, hw: hw, scrub: sc, tally: newTally()}
	// The sessions open before the run's clock starts: the schedule's times and
	// --time count from when every worker can work, not from a loaded machine's
	// connecting (a failover at 1 s once struck while the tenth session opened).
	workers, err := r.open(ctx)
	if err != nil {
		return nil, err
	}
	r.start = time.Now()
	wait := time.Duration(0)
	if len(cfg.Faults.Processes()) > 0 {
		wait = cfg.RecoveryWait
		if wait == 0 {
			// Left at zero, not filled in by defaults: a configuration validated once
			// is validated again as it is (indoubt shrink re-runs it).
			wait = RecoveryWait
		}
	}
	r.end = newRunEnd(r.start, cfg.Duration, wait)
	if tp != nil {
		r.tally.tx = newTxTally(tp.txFunction())
	}
	if nem != nil {
		nem.begin(r)
	}
	stopCrash := tp.arm(r, nem)
	stopWatch := r.watch(nem)
	interrupted, err := r.drive(ctx, workers)
	stopWatch()
	stopCrash()
	if nem != nil {
		if nerr := nem.end(); nerr != nil && err == nil {
			err = fmt.Errorf("fault schedule: %w", nerr)
		}
	}
	if err != nil {
		return nil, err
	}
	r.interrupted, r.elapsed = interrupted, time.Since(r.start)
	r.warnUnapplied(nem)

	// Final reads run on a fresh context: an interrupted run is still reconciled.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := tp.settle(fctx, r); err != nil {
		return nil, fmt.Errorf("recovery: %w", err)
	}
	if err := r.finalReads(fctx); err != nil {
		return nil, fmt.Errorf("final read: %w", err)
	}
	return r, hw.Close()
}

// check reads the history back from the run directory, writes check.json (the run's
// limits, whether it was proxied, the workload's final state) and judges the directory
// (judge.History), as `indoubt check RUNDIR` does. notWritten names porcupine's
// visualization when it could not be written (results.json's not_written).
func check(ctx context.Context, cfg Config, wl workloads.Workload, dir string, proxied bool) (j *judge.Judgement, notWritten []string, err error) {
	h, ops, err := histories.ReadFile(filepath.Join(dir, rundir.HistoryFile), false)
	if err != nil {
		return nil, nil, fmt.Errorf("reread history: %w", err)
	}
	c := rundir.Check{Limits: rundir.Limits{Timeout: cfg.CheckTimeout}, Proxied: proxied}
	if f := wl.Summary(ops); f != nil {
		if c.Final, err = json.Marshal(f); err != nil {
			return nil, nil, fmt.Errorf("final state: %w", err)
		}
	}
	if err := rundir.WriteCheck(dir, c); err != nil {
		return nil, nil, fmt.Errorf("write %s: %w", rundir.CheckFile, err)
	}
	vizPath := ""
	if wl.Model() == checker.RegisterModel || wl.Model() == checker.CASRegisterModel {
		vizPath = filepath.Join(dir, "linearizability.html")
	}
	j, err = judge.History(context.WithoutCancel(ctx), dir, h, ops, judge.Options{VisualizePath: vizPath})
	if err != nil {
		return nil, nil, err
	}
	if j.CheckErr != nil {
		// The verdict was reached and only the visualization failed: keep the verdict,
		// and not the part of the page porcupine wrote.
		os.Remove(vizPath)
		cfg.progressf("warning: %v", j.CheckErr)
		notWritten = []string{"linearizability.html: " + cause(j.CheckErr)}
	}
	return j, notWritten, nil
}

// results assembles results.json: the judgement of the run directory (its figures
// counted from the history), and what only the run measured (its length, throughput
// and latency, the server).
func (r *run) results(j *judge.Judgement, serverDesc string) *results.Results {
	cfg := r.cfg
	res := j.Results
	res.Workload, res.Store, res.Mechanism, res.Retry = r.wl.Name(), string(cfg.Store), r.wl.Mechanism(), string(cfg.Retry.Name)
	res.Seed, res.Workers, res.Interrupted = cfg.Seed, cfg.Workers, r.interrupted
	res.StartedAt, res.DurationS = r.startWall(), r.elapsed.Seconds()
	res.Server = serverDesc
	res.Faults.Schedule = specs(cfg.Faults)
	if r.elapsed > 0 {
		res.Throughput = float64(r.completed.Load()) / r.elapsed.Seconds()
	}
	lat := r.tally.lat
	res.LatencyMs = results.Latency{
		P50: ms(lat.ValueAtQuantile(50)), P95: ms(lat.ValueAtQuantile(95)),
		P99: ms(lat.ValueAtQuantile(99)), Max: ms(lat.Max()),
	}
	return res
}

func ms(us int64) float64 { return math.Round(float64(us)/10) / 100 }

// run is the state of one run while workers drive it.
type run struct {
	cfg   Config
	wl    workloads.Workload
	hw    *histories.Writer
	scrub *scrubber
	start time.Time

	// completed counts finished operations for the progress line; each worker keeps
	// the rest of its metrics in a tally of its own, added to tally when it stops.
	completed atomic.Int64
	tally     *tally

	mu       sync.Mutex
	nextProc int

	// end says when the workers stop (runEnd).
	end *runEnd
	// halted is set when the run must end before its workers are done: the coordinator
	// of a two-phase commit run crashed. Each worker stops after its operation.
	halted atomic.Bool

	// Set when the workers have stopped.
	interrupted bool
	elapsed     time.Duration
}

func (r *run) startWall() time.Time { return r.start.UTC() }

func (r *run) now() int64 { return int64(time.Since(r.start)) }

// open opens every worker's session; on an error it closes those it opened.
func (r *run) open(ctx context.Context) ([]workloads.Worker, error) {
	workers := make([]workloads.Worker, r.cfg.Workers)
	for i := range workers {
		w, err := r.wl.Worker(ctx, i)
		if err != nil {
			for _, o := range workers[:i] {
				o.Close()
			}
			return nil, fmt.Errorf("open session %d: %w", i, err)
		}
		workers[i] = w
	}
	return workers, nil
}

// drive runs the workers until each has done its operations or the deadline passes,
// and closes them. It reports whether ctx ended the run early.
func (r *run) drive(ctx context.Context, workers []workloads.Worker) (bool, error) {
	r.nextProc = r.cfg.Workers
	var wg sync.WaitGroup
	errc := make(chan error, len(workers))
	tallies := make([]*tally, len(workers))
	for i, w := range workers {
		tallies[i] = newTally()
		tallies[i].tx = r.tally.tx.empty()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close()
			rng := rand.New(rand.NewPCG(uint64(r.cfg.Seed), uint64(i)+1))
			if err := r.work(ctx, i, w, rng, tallies[i]); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	for _, t := range tallies {
		r.tally.add(t)
	}
	close(errc)
	if err := <-errc; err != nil {
		return false, err
	}
	return ctx.Err() != nil, nil
}

// work is one worker's loop.
func (r *run) work(ctx context.Context, id int, w workloads.Worker, rng *rand.Rand, tl *tally) error {
	process := id
	t := &retrier{r: r, w: w, rng: rng, end: r.end}
	idPrefix := strconv.Itoa(id) + "-"
	for i := 0; r.cfg.Ops == 0 || i < r.cfg.Ops; i++ {
		if ctx.Err() != nil || r.halted.Load() || !t.pace(ctx) {
			return nil
		}
		// Two clock reads per operation: its invocation and its completion give the
		// history's times and the latency.
		t0 := time.Now()
		if r.end.past(t0) {
			return nil
		}
		call := w.Next(rng)
		opID := idPrefix + strconv.Itoa(i)
		at := int64(t0.Sub(r.start))
		inv, err := r.hw.Write(histories.Op{
			Time: at, Process: process, Type: histories.Invoke, F: call.F, Key: call.Key,
			Value: histories.Value(call.Value), OpID: opID, Conn: w.Conn(),
		})
		if err != nil {
			return err
		}
		comp := t.do(ctx, operation{call: call, id: opID, process: process, invoke: inv, at: at})
		t1 := time.Now()
		comp.Time = int64(t1.Sub(r.start))
		comp.Process = process
		comp.F, comp.Key, comp.OpID = call.F, call.Key, opID
		if _, err := r.hw.Write(comp); err != nil {
			return err
		}
		tl.account(comp, t1.Sub(t0))
		r.completed.Add(1)
		if comp.Type == histories.OK {
			r.end.acked(t1)
		}
		if comp.Type == histories.Info {
			// Jepsen's rule: a process whose operation is open never invokes again.
			r.mu.Lock()
			process = r.nextProc
			r.nextProc++
			r.mu.Unlock()
		}
	}
	return nil
}

// tally is one worker's latencies, kept without a lock while it works and added to the
// run's when it stops: what the run timed itself. Every other figure of the
// operations is counted from the history (judge.Figures), where the completions
// record their attempts, how they ended and their conflicts.
type tally struct {
	lat *hdrhistogram.Histogram // microseconds
	// tx counts a two-phase commit run's transactions; nil for the other workloads.
	tx *txTally
}

func newTally() *tally {
	return &tally{lat: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// account adds one completed operation and its latency.
func (t *tally) account(comp histories.Op, lat time.Duration) {
	t.lat.RecordValue(max(lat.Microseconds(), 1))
	t.tx.account(comp, lat)
}

// add adds o's metrics to t's.
func (t *tally) add(o *tally) {
	t.lat.Merge(o.lat)
	t.tx.add(o.tx)
}

// finalReadWait is how long a run tries its final read again before it gives up.
const finalReadWait = time.Minute

// finalReads records the workload's final reads as operations of a process of their own.
//
// A read that fails is tried again, every second for up to finalReadWait: after a
// fault a cluster may have no leader that takes the read for a while (a Patroni cluster
// just healed: the old leader shutting down, the others still read-only until one is
// elected), and the final state is what the run is judged by.
func (r *run) finalReads(ctx context.Context) error {
	var calls []workloads.Call
	var replies []workloads.Reply
	var err error
	for until := time.Now().Add(finalReadWait); ; {
		if calls, replies, err = r.wl.Final(ctx); err == nil {
			break
		}
		if time.Now().Add(time.Second).After(until) || ctx.Err() != nil {
			return err
		}
		r.cfg.progressf("final read: %s; trying again in 1s", strings.Join(strings.Fields(err.Error()), " "))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
	r.mu.Lock()
	proc := r.nextProc
	r.nextProc++
	r.mu.Unlock()
	for i, c := range calls {
		if _, err := r.hw.Write(histories.Op{Time: r.now(), Process: proc, Type: histories.Invoke, F: c.F, Key: c.Key, Value: histories.Value(c.Value), OpID: histories.FinalReadID(i)}); err != nil {
			return err
		}
		typ := histories.OK
		if replies[i].Failed {
			typ = histories.Fail
		}
		if _, err := r.hw.Write(histories.Op{Time: r.now(), Process: proc, Type: typ, F: c.F, Key: c.Key, Value: histories.Value(replies[i].Value), OpID: histories.FinalReadID(i)}); err != nil {
			return err
		}
	}
	return nil
}
