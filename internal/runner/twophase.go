package runner

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/twopc"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// A two-phase commit run (the transfer and two-rows workloads) is a run like any other,
// over several PostgreSQL servers: Servers launched (max_prepared_transactions on) or the
// DSNs given, each behind a proxy of its own when the schedule has proxy faults, whose
// commit faults act on one statement of the protocol (COMMIT PREPARED, or PREPARE
// TRANSACTION for prepare-cut and prepare-drop). The table and the coordinator are
// twopc.Cluster's. What it adds to a run:
//
//   - coordinator-crash@T crashes the coordinator at T (recorded as a nemesis event) and
//     ends the run: each worker stops after its operation, which the crash abandons
//     (info) where it stood in the protocol;
//   - after the workers, before the final reads, recovery finishes what is in doubt
//     (twopc.Cluster.Settle: after a crash it first times the writers the in-doubt rows
//     block for RecoverAfter);
//   - the final reads record every row, each server's markers and what is still
//     prepared, from which the checker decides (checker.CheckTransfer);
//   - results.json's two_phase_commit section: the transactions, the crash, recovery.

// twoPhase is a two-phase commit run's cluster and what its recovery reported.
type twoPhase struct {
	cfg   Config
	cl    *twopc.Cluster
	crash *schedule.Fault // the schedule's coordinator-crash, nil without one

	report      *twopc.CrashReport
	resolutions []twopc.Resolution
}

// openTwoPhase opens the cluster over dsns (through the proxies when there are) and the
// workload over it; the decision log goes in the run directory.
func openTwoPhase(ctx context.Context, cfg Config, dsns []string, dir string) (*twoPhase, workloads.Workload, func(), error) {
	cl, err := twopc.Open(ctx, twopc.Options{
		DSNs: dsns, Mode: cfg.Coordinator, LogPath: filepath.Join(dir, "decisions.jsonl"),
		Seed: cfg.Seed, Conns: int32(cfg.Workers + 4),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	wl, err := transfer.New(cl, cfg.Workload, cfg.Placement, cfg.RowsPerWorker*cfg.Workers, cfg.Reads)
	if err != nil {
		cl.Close()
		return nil, nil, nil, err
	}
	tp := &twoPhase{cfg: cfg, cl: cl}
	for i, f := range cfg.Faults {
		if f.Coordinator {
			tp.crash = &cfg.Faults[i]
		}
	}
	cfg.progressf("%s %s on %d servers, %d workers, coordinator %s", cfg.Workload, cfg.Placement, len(dsns), cfg.Workers, cfg.Coordinator)
	return tp, wl, cl.Close, nil
}

// commitPoint is the proxies' matcher of a two-phase commit run: the statement its commit
// faults act on. nil (every commit point) for the other workloads.
func (c Config) commitPoint() func(string) bool {
	if !c.twoPhase() {
		return nil
	}
	stmt := commitPrepared
	for _, f := range c.Faults {
		if f.Statement != "" {
			stmt = f.Statement
		}
	}
	return func(text string) bool { return strings.Contains(strings.ToUpper(text), stmt) }
}

// txFunction is the history function of the run's transactions.
func (tp *twoPhase) txFunction() string {
	if tp.cfg.Workload == workloads.TwoRows {
		return transfer.FRows
	}
	return transfer.FTransfer
}

// arm schedules the coordinator's crash, if the schedule has one: at its time the
// coordinator dies, the crash is recorded, and the run ends. stop cancels a crash not
// yet made; it is a no-op for a nil twoPhase.
func (tp *twoPhase) arm(r *run, nem *nemesis) (stop func()) {
	if tp == nil || tp.crash == nil {
		return func() {}
	}
	f := *tp.crash
	t := time.AfterFunc(time.Until(r.start.Add(f.Start)), func() {
		tp.cl.Crash()
		r.halted.Store(true)
		at := r.now()
		nem.note(rundir.CoordinatorLine(f.Name, f.Spec, at, time.Now()),
			histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: f.Name, Value: histories.Value(map[string]string{"fault": f.Spec})})
		r.cfg.progressf("coordinator crashed at %v (%s): the run ends", time.Duration(at).Round(time.Millisecond), f.Spec)
	})
	return func() { t.Stop() }
}

// settle runs recovery on what the run left in doubt; a no-op for a nil twoPhase.
func (tp *twoPhase) settle(ctx context.Context, r *run) error {
	if tp == nil {
		return nil
	}
	rep, res, err := tp.cl.Settle(ctx, tp.cfg.RecoverAfter)
	if err != nil {
		return err
	}
	tp.report, tp.resolutions = rep, res
	if rep != nil {
		r.cfg.progressf("%d transactions in doubt on the participants (abandoned: %v); recovery took %v, %v after the crash",
			len(rep.InDoubt), rep.Stops, rep.Recovery.Round(time.Microsecond), rep.Resolved.Round(time.Millisecond))
	}
	if len(res) > 0 {
		decided := map[twopc.Decision]int{}
		for _, x := range res {
			decided[x.Decision]++
		}
		r.cfg.progressf("recovery: %d committed, %d rolled back", decided[twopc.Commit], decided[twopc.Abort])
	}
	return nil
}

// section is results.json's two_phase_commit section of the run.
func (tp *twoPhase) section(r *run) *results.TwoPhase {
	s := &results.TwoPhase{
		Servers: tp.cl.Servers(), Placement: string(tp.cfg.Placement), Coordinator: string(tp.cfg.Coordinator),
		Recovery: []results.Resolution{},
	}
	if tx := r.tally.tx; tx != nil {
		s.Transactions = results.TxCounts{Committed: tx.ok, Aborted: tx.fail, Abandoned: tx.info}
		if r.elapsed > 0 {
			s.CommittedPerSecond = float64(tx.ok) / r.elapsed.Seconds()
		}
		if tx.ok > 0 {
			s.LatencyMs = results.TxLatency{Mean: math.Round(tx.lat.Mean()/10) / 100, P99: ms(tx.lat.ValueAtQuantile(99))}
		}
	}
	for _, x := range tp.resolutions {
		s.Recovery = append(s.Recovery, results.Resolution{GID: x.GID, Server: x.Participant, Decision: string(x.Decision), Logged: x.Logged, Error: x.Err})
	}
	if c := tp.report; c != nil {
		cr := &results.Crash{
			AtS: c.At.Sub(r.start).Seconds(), Stops: c.Stops, InDoubt: []results.InDoubt{}, Probes: []results.LockProbe{},
			RecoveryMs: msOf(c.Recovery), ResolvedMs: msOf(c.Resolved),
		}
		for _, d := range c.InDoubt {
			cr.InDoubt = append(cr.InDoubt, results.InDoubt{GID: d.GID, Server: d.Participant, AgeMs: msOf(d.Age), Locks: d.Locks})
		}
		for _, p := range c.Probes {
			cr.Probes = append(cr.Probes, results.LockProbe{GID: p.GID, Server: p.Participant, Row: p.Row,
				BlockedMs: msOf(p.Blocked), Timeouts: p.Timeouts, LockedForMs: msOf(p.LockedFor), Error: p.Err})
		}
		s.Crash = cr
	}
	return s
}

func msOf(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// txTally counts the completions of one function by outcome, with the latency of the ok
// ones: a two-phase commit run's transactions, apart from its reads of the total. Its
// methods do nothing on a nil tally.
type txTally struct {
	f              string
	ok, fail, info int64
	lat            *hdrhistogram.Histogram // microseconds
}

func newTxTally(f string) *txTally {
	return &txTally{f: f, lat: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// empty returns a fresh tally of the same function, or nil for nil.
func (t *txTally) empty() *txTally {
	if t == nil {
		return nil
	}
	return newTxTally(t.f)
}

func (t *txTally) account(comp histories.Op, lat time.Duration) {
	if t == nil || comp.F != t.f {
		return
	}
	switch comp.Type {
	case histories.OK:
		t.ok++
		t.lat.RecordValue(max(lat.Microseconds(), 1))
	case histories.Fail:
		t.fail++
	default:
		t.info++
	}
}

func (t *txTally) add(o *txTally) {
	if t == nil || o == nil {
		return
	}
	t.ok, t.fail, t.info = t.ok+o.ok, t.fail+o.fail, t.info+o.info
	t.lat.Merge(o.lat)
}

// warnUnapplied says which faults of a run sized by operations never started: the run
// was over first. (With a duration, Validate refuses them before the run.)
func (r *run) warnUnapplied(nem *nemesis) {
	for _, f := range r.cfg.Faults {
		if f.Start > r.elapsed {
			r.cfg.progressf("warning: fault %s was never applied: the run ended at %v, before its start at %v", f.Spec, r.elapsed.Round(time.Millisecond), f.Start)
		}
	}
}

// launchPostgresMany launches the servers of a two-phase commit run, concurrently, with
// room for every worker's prepared transactions and connections.
func launchPostgresMany(ctx context.Context, cfg Config, dir string) (launched, error) {
	opt := pgserver.Options{
		LogPath:                 filepath.Join(dir, "postgres.log"),
		MaxPreparedTransactions: max(64, 2*cfg.Workers+8),
		Version:                 cfg.PGVersion,
	}
	if conns := 2*cfg.Workers + 20; conns > 200 {
		opt.Settings = map[string]string{"max_connections": strconv.Itoa(conns)}
	}
	pgs, err := pgserver.StartMany(ctx, cfg.Servers, opt)
	if err != nil {
		return launched{}, err
	}
	l := launched{stop: func() error {
		var first error
		for _, pg := range pgs {
			if err := pg.Stop(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}}
	var addrs []string
	for _, pg := range pgs {
		l.dsns = append(l.dsns, pg.DSN)
		addrs = append(addrs, pg.Addr)
	}
	l.dsn = l.dsns[0]
	l.desc = fmt.Sprintf("%d PostgreSQL %s servers at %s", len(pgs), pgs[0].Version, strings.Join(addrs, ", "))
	return l, nil
}
