package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/report"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

// processCtl is what the process faults need of a launched server (the Servers of
// internal/servers/postgres, redis and cassandra have it).
type processCtl interface {
	Pid() int
	Kill() error
	Pause() error
	Resume() error
	Start(ctx context.Context) error
	Restart(ctx context.Context) error
}

// checkProcessFaults refuses, before anything launches, process faults that cannot be
// applied: over --dsn, to a server that runs in this process, or to one without them.
func checkProcessFaults(c Config) error {
	procs := c.Faults.Processes()
	if err := checkTopology(c); err != nil {
		return err
	}
	if len(procs) == 0 {
		return nil
	}
	f := procs[0]
	switch {
	case c.DSN != "":
		return couldNotRun("fault %q: process faults (%s) need a server indoubt launches; over --dsn it cannot reach the server's process (commit and network faults still work)", f.Spec, faults.ProcessFaults)
	case c.Store == Mongo:
		return couldNotRun("fault %q: the local MongoDB-wire server (FerretDB) runs inside indoubt's own process, which cannot kill, pause or restart itself", f.Spec)
	case c.Store != Postgres && c.Store != Redis && c.Store != CQL:
		return couldNotRun("fault %q: process faults are applied to launched PostgreSQL, Redis and Cassandra only, not to %s", f.Spec, c.Store)
	}
	for _, f := range procs {
		if f.Name == "failover" && c.Topology != TopologyReplicated {
			return couldNotRun("fault %q: failover needs a standby to promote: add --topology replicated", f.Spec)
		}
	}
	return nil
}

// procNemesis applies the process faults of the schedule to the launched server at
// their times and records each, with its ground truth (what was done to which process,
// when), as nemesis events in the history.
type procNemesis struct {
	sched  faults.Schedule
	ctl    processCtl
	server string
	cfg    Config

	// done is closed when every fault is over and the server runs again.
	done     chan struct{}
	cancel   context.CancelFunc
	timeline []report.ProcessFault
	// startFailure is set when the server did not start again after a power loss.
	startFailure error
	run          *run
	record       func(histories.Op)
	// state is what the fault being applied does to the server, for the progress line.
	state serverState
}

func newProcNemesis(cfg Config, ctl processCtl, server string) *procNemesis {
	return &procNemesis{sched: cfg.Faults.Processes(), ctl: ctl, server: server, cfg: cfg}
}

// begin applies the faults against the run's clock, in the background.
func (p *procNemesis) begin(r *run, record func(histories.Op)) {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.run, p.record = cancel, r, record
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		for i, f := range p.sched {
			if !p.sleepUntil(ctx, f.Start) {
				return
			}
			if late := time.Duration(p.run.now()) - f.Start; late > 100*time.Millisecond {
				// The fault before it took longer than its window (a slow recovery).
				p.cfg.progressf("fault %s: applied %.2fs late, the fault before it still ran", f.Spec, late.Seconds())
			}
			p.apply(ctx, i, f)
		}
	}()
}

// end stops the schedule, leaves the server running (started again or continued) and
// returns once it does: the final reads need it.
func (p *procNemesis) end() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cancel = nil
}

func (p *procNemesis) sleepUntil(ctx context.Context, at time.Duration) bool {
	return sleep(ctx, time.Until(p.run.start.Add(at)))
}

// event records one thing done to the server at run time at (taken before it was
// done: operations in flight then are the ones it hit).
func (p *procNemesis) event(at int64, f faults.Fault, action string, pid int, err error) int64 {
	v := map[string]any{"fault": f.Spec, "server": p.server, "pid": pid}
	if err != nil {
		v["error"] = err.Error()
	}
	p.record(histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: action, Value: histories.Value(v)})
	msg := fmt.Sprintf("fault %s: %s pid %d at %.2fs", f.Spec, action, pid, time.Duration(at).Seconds())
	if err != nil {
		msg += ": " + err.Error()
	}
	p.cfg.progressf("%s", msg)
	return at
}

// apply does one fault. Whatever happens, the server runs when it returns: a kill is
// followed by a start and a pause by a continue even when the run ends first.
func (p *procNemesis) apply(ctx context.Context, i int, f faults.Fault) {
	tl := report.ProcessFault{Fault: f.Spec, Action: f.Name, Server: p.server, Pid: p.ctl.Pid()}
	defer p.state.during(f)()
	var errs []string
	note := func(err error) {
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	// Starting again must not depend on the run's context: a server left down would
	// fail the final reads.
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer rcancel()
	restore := func() context.Context { return rctx }
	var start, end int64
	switch f.Name {
	// The end of a kill or a restart is when the server answers again: after Start.
	case "kill":
		at := p.run.now()
		err := p.ctl.Kill()
		note(err)
		start = p.event(at, f, "kill", tl.Pid, err)
		p.sleepUntil(ctx, f.End)
		err = p.ctl.Start(restore())
		note(err)
		end = p.event(p.run.now(), f, "start", p.ctl.Pid(), err)
	case "pause":
		at := p.run.now()
		err := p.ctl.Pause()
		note(err)
		start = p.event(at, f, "pause", tl.Pid, err)
		p.sleepUntil(ctx, f.End)
		at = p.run.now()
		err = p.ctl.Resume()
		note(err)
		end = p.event(at, f, "resume", tl.Pid, err)
	case "power-loss":
		start, end = p.powerLoss(restore(), i, f, note)
	case "failover":
		// The end of a failover is when the standby takes writes.
		start = p.event(p.run.now(), f, "failover", tl.Pid, nil)
		var err error
		if fo, ok := p.ctl.(interface{ Failover(context.Context) error }); ok {
			err = fo.Failover(restore())
		} else {
			err = fmt.Errorf("this server has no standby to promote")
		}
		note(err)
		end = p.event(p.run.now(), f, "promoted", p.ctl.Pid(), err)
		if f.Rejoin && err == nil {
			p.rejoin(ctx, restore(), f, tl.Pid, note)
		}
	case "restart":
		start = p.event(p.run.now(), f, "restart", tl.Pid, nil)
		err := p.ctl.Restart(restore())
		note(err)
		end = p.event(p.run.now(), f, "started", p.ctl.Pid(), err)
	}
	tl.StartS, tl.EndS = secs(start), secs(end)
	tl.DowntimeS = secs(end - start)
	if len(errs) > 0 {
		tl.Error = fmt.Sprint(errs)
	}
	p.timeline = append(p.timeline, tl)
}

// rejoin starts the old primary of a failover again, DefaultKillDowntime after the
// fault or at once when the run ends first (the wait follows ctx, the start rctx), and
// records it as a nemesis event; a progress line says when it was done (a PostgreSQL
// old primary then streams from the new one, a Redis one answers PING). The fault's
// end stays the promotion: the new primary took writes from then on.
func (p *procNemesis) rejoin(ctx, rctx context.Context, f faults.Fault, pid int, note func(error)) {
	p.sleepUntil(ctx, f.Start+faults.DefaultKillDowntime)
	at := p.run.now()
	var err error
	if rj, ok := p.ctl.(interface{ Rejoin(context.Context) error }); ok {
		err = rj.Rejoin(rctx)
	} else {
		err = fmt.Errorf("this topology cannot start its old primary again")
	}
	note(err)
	p.event(at, f, "rejoin", pid, err)
	if err == nil {
		p.cfg.progressf("fault %s: rejoin done %.2fs after the fault", f.Spec, (time.Duration(p.run.now()) - f.Start).Seconds())
	}
}

func secs(ns int64) float64 { return math.Round(float64(ns)/1e6) / 1e3 }

// account adds the fault timeline with its figures and the lost writes to the results.
// A lost write is an anomaly: the verdict becomes invalid.
func (p *procNemesis) account(res *report.Results, ops []histories.Op) {
	tl := append([]report.ProcessFault(nil), p.timeline...)
	figures(tl, ops)
	lost := lostWrites(res, tl, ops)
	for _, l := range lost {
		for i := range tl {
			if tl[i].Fault == l.Fault {
				n := l.Count
				if n == 0 {
					n = 1
				}
				tl[i].LostWrites += n
			}
		}
		res.Anomalies = append(res.Anomalies, anomalyOf(l))
	}
	if len(lost) > 0 && res.Verdict != checker.Invalid {
		res.Verdict = checker.Invalid
		res.Summary = fmt.Sprintf("acknowledged writes were lost after a process fault: %s", lost[0].Explanation)
	}
	res.ProcessFaults, res.LostWrites = tl, lost
	for _, f := range tl {
		line := fmt.Sprintf("fault %s: down %.2fs, %d in flight (%d info, %d ok), %d acknowledged writes lost", f.Fault, f.DowntimeS, f.InFlight, f.InFlightInfo, f.InFlightOK, f.LostWrites)
		if f.FirstAckS != nil {
			line += fmt.Sprintf(", first acknowledgement %.2fs after the fault", *f.FirstAckS)
		}
		p.cfg.progressf("%s", line)
	}
}

// interval is one client operation: its invocation and completion.
type interval struct {
	inv, comp *histories.Op
}

// intervals pairs the client operations of a history by op id.
func intervals(ops []histories.Op) []interval {
	byID := map[string]int{}
	var out []interval
	for i := range ops {
		op := &ops[i]
		if !op.IsClient() || op.OpID == "" {
			continue
		}
		if op.Type == histories.Invoke {
			byID[op.OpID] = len(out)
			out = append(out, interval{inv: op})
			continue
		}
		if j, ok := byID[op.OpID]; ok && out[j].comp == nil {
			out[j].comp = op
		}
	}
	return out
}

// figures fills in the operations in flight at each fault and the first acknowledgement
// after it.
func figures(tl []report.ProcessFault, ops []histories.Op) {
	ivs := intervals(ops)
	for i := range tl {
		start, end := int64(tl[i].StartS*1e9), int64(tl[i].EndS*1e9)
		var first int64 = -1
		for _, iv := range ivs {
			if iv.inv.Time < start && (iv.comp == nil || iv.comp.Time >= start) {
				tl[i].InFlight++
				switch {
				case iv.comp == nil || iv.comp.Type == histories.Info:
					tl[i].InFlightInfo++
				case iv.comp.Type == histories.OK:
					tl[i].InFlightOK++
				}
			}
			// The final reads come after the workers stopped: they say nothing of
			// the workers getting through again.
			if iv.comp != nil && iv.comp.Type == histories.OK && iv.comp.Time >= end && !strings.HasPrefix(iv.inv.OpID, finalOpPrefix) && (first < 0 || iv.comp.Time < first) {
				first = iv.comp.Time
			}
		}
		if first >= 0 {
			s := secs(first - start)
			tl[i].FirstAckS = &s
		}
	}
}

// losesData reports whether a fault can lose what the server acknowledged: a kill, or
// a restart of a server that keeps nothing on disk.
func losesData(action string) bool {
	return action == "kill" || action == "restart" || action == "failover" || action == "power-loss"
}

// lostWrites finds acknowledged effects missing after the faults, by workload.
func lostWrites(res *report.Results, tl []report.ProcessFault, ops []histories.Op) []report.LostWrite {
	switch res.Workload {
	case workloads.Register:
		return lostRegisterWrites(tl, ops)
	case workloads.Budget:
		f, ok := res.Final.(budget.Final)
		if ok && f.Missing {
			return lostAccount(f, tl, ops)
		}
		if !ok || f.Balance == nil {
			return nil
		}
		// Each acknowledged decrement took a unit (a replayed one took it earlier); the
		// balance cannot be higher than that allows, whatever else happened.
		n := (f.Applied - f.Replayed) - (f.Budget - *f.Balance)
		return lostCount(n, "decrement", "decrements", tl, ops)
	}
	if res.Final != nil {
		if r := res.Final.Figures().Reconciliation; r != nil && r.Lost > 0 {
			return lostCount(r.Lost, "increment", "increments", tl, ops)
		}
	}
	return nil
}

// lostCount attributes n missing acknowledged effects of operation f to the last
// data-losing fault, naming the last operation acknowledged before it.
func lostCount(n int64, f, plural string, tl []report.ProcessFault, ops []histories.Op) []report.LostWrite {
	if n <= 0 {
		return nil
	}
	var fault *report.ProcessFault
	for i := range tl {
		if losesData(tl[i].Action) {
			fault = &tl[i]
		}
	}
	if fault == nil {
		return nil
	}
	at := int64(fault.StartS * 1e9)
	var last *histories.Op
	var acks []int64 // times of the acknowledgements before the fault, in history order
	for i := range ops {
		op := &ops[i]
		if op.IsClient() && op.F == f && op.Type == histories.OK && op.Time < at {
			last = op
			acks = append(acks, op.Time)
		}
	}
	l := report.LostWrite{Count: n, Fault: fault.Fault}
	l.Explanation = fmt.Sprintf("%d acknowledged %s missing from the final state after %s (%s of pid %d at %.2fs)", n, plural, fault.Fault, fault.Action, fault.Pid, fault.StartS)
	if last != nil {
		l.OpID, l.Index, l.AckBeforeFaultS = last.OpID, last.Index, secs(at-last.Time)
		l.Explanation += fmt.Sprintf("; the last %s acknowledged before it, %s, was acknowledged %.3fs before the fault", f, last.OpID, l.AckBeforeFaultS)
		// The likeliest lost are the last acknowledged (a log loses its tail): how far
		// back they reach is the window of acknowledged work the fault took.
		if n > 1 && n <= int64(len(acks)) {
			sort.Slice(acks, func(i, j int) bool { return acks[i] < acks[j] })
			l.Explanation += fmt.Sprintf("; the last %d acknowledged span the %.3fs before it", n, secs(at-acks[int64(len(acks))-n]))
		}
	}
	return []report.LostWrite{l}
}

// written returns the value a write or compare-and-set puts in the register.
func written(inv *histories.Op) (json.RawMessage, bool) {
	switch inv.F {
	case "write":
		return inv.Value, len(inv.Value) > 0
	case "cas":
		var ft []json.RawMessage
		if json.Unmarshal(inv.Value, &ft) != nil || len(ft) != 2 {
			return nil, false
		}
		return ft[1], true
	}
	return nil, false
}

func sameValue(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return fmt.Sprint(x) == fmt.Sprint(y)
}

// lostRegisterWrites names, per data-losing fault and key, the last write acknowledged
// before the fault when the first read invoked after the server answered again returns
// a value neither it nor any write that may follow it wrote: the read must follow the
// write in any linearization, so the write is gone. (An unknown write may apply at any
// time, so its value always counts as one that may follow.)
func lostRegisterWrites(tl []report.ProcessFault, ops []histories.Op) []report.LostWrite {
	ivs := intervals(ops)
	byKey := map[string][]interval{}
	var keys []string
	for _, iv := range ivs {
		if _, ok := byKey[iv.inv.Key]; !ok {
			keys = append(keys, iv.inv.Key)
		}
		byKey[iv.inv.Key] = append(byKey[iv.inv.Key], iv)
	}
	sort.Strings(keys)
	var out []report.LostWrite
	for fi, f := range tl {
		if !losesData(f.Action) {
			continue
		}
		start, end := int64(f.StartS*1e9), int64(f.EndS*1e9)
		next := int64(math.MaxInt64)
		if fi+1 < len(tl) {
			next = int64(tl[fi+1].StartS * 1e9)
		}
		for _, k := range keys {
			var w *interval
			for i, iv := range byKey[k] {
				if iv.comp != nil && iv.comp.Type == histories.OK && iv.inv.F != "read" && iv.comp.Time < start {
					if _, ok := written(iv.inv); ok && (w == nil || iv.comp.Time > w.comp.Time) {
						w = &byKey[k][i]
					}
				}
			}
			if w == nil {
				continue
			}
			var r *interval
			for i, iv := range byKey[k] {
				if iv.inv.F == "read" && iv.comp != nil && iv.comp.Type == histories.OK && iv.inv.Time > end && iv.inv.Time < next && (r == nil || iv.inv.Time < r.inv.Time) {
					r = &byKey[k][i]
				}
			}
			if r == nil || len(r.comp.Value) == 0 {
				continue
			}
			wv, _ := written(w.inv)
			explained := sameValue(r.comp.Value, wv)
			for _, iv := range byKey[k] {
				if explained {
					break
				}
				if iv.inv.F == "read" || (iv.comp != nil && iv.comp.Type == histories.Fail) {
					continue
				}
				// Writes not known to precede w: unknown ones, and those not over before w began.
				if iv.comp == nil || iv.comp.Type == histories.Info || iv.comp.Time >= w.inv.Time {
					if v, ok := written(iv.inv); ok && sameValue(r.comp.Value, v) {
						explained = true
					}
				}
			}
			if explained {
				continue
			}
			l := report.LostWrite{OpID: w.inv.OpID, Index: w.comp.Index, Key: k, Value: wv, Fault: f.Fault, AckBeforeFaultS: secs(start - w.comp.Time)}
			l.Explanation = fmt.Sprintf("%s %s of %s by op %s (acknowledged %.3fs before %s, %s of pid %d at %.2fs) is lost: read %s, invoked after the server answered again, returned %s", w.inv.F, string(w.inv.Value), k, w.inv.OpID, l.AckBeforeFaultS, f.Fault, f.Action, f.Pid, f.StartS, r.inv.OpID, string(r.comp.Value))
			out = append(out, l)
		}
	}
	return out
}

func anomalyOf(l report.LostWrite) checker.Anomaly {
	a := checker.Anomaly{Kind: report.LostWriteKind, Explanation: l.Explanation}
	if l.OpID != "" {
		a.Ops = []int64{l.Index}
	}
	return a
}

// The topologies of --topology.
const (
	TopologySingle     = "single"
	TopologyReplicated = "replicated"
)

// checkTopology refuses, before anything launches, a topology this build cannot launch
// or a fault it cannot apply to one.
func checkTopology(c Config) error {
	switch c.Topology {
	case "", TopologySingle:
		if c.Replication != "" && c.Replication != pgserver.ReplicationAsync {
			return couldNotRun("--replication %s needs --topology replicated", c.Replication)
		}
		return nil
	case TopologyReplicated:
	default:
		return couldNotRun("--topology %q: want single or replicated", c.Topology)
	}
	switch {
	case c.Replication != "" && c.Replication != pgserver.ReplicationAsync && c.Replication != pgserver.ReplicationSync:
		return couldNotRun("--replication %q: want async or sync", c.Replication)
	case c.DSN != "":
		return couldNotRun("--topology replicated launches its servers: drop --dsn (compose/ has replicated topologies to point --dsn at)")
	case c.Store != Postgres && c.Store != Redis:
		return couldNotRun("--topology replicated: this build launches a replicated PostgreSQL or Redis, not %s", c.Store)
	case c.Store == Redis && c.Replication == pgserver.ReplicationSync:
		// WAIT after each write would report how many replicas have it, not make a
		// failover keep it: Redis documents that WAIT does not make it strongly consistent.
		return couldNotRun("--replication sync: Redis replicates asynchronously only (WAIT does not make a failover keep a write); use --replication async")
	case c.proxied():
		return couldNotRun("--topology replicated: the fault proxy fronts one server; use process faults (kill, pause, restart, failover) only, or --proxy off")
	}
	return nil
}

func launchReplicatedPostgres(ctx context.Context, cfg Config, dir string) (launched, error) {
	rp, err := pgserver.StartReplicated(ctx, pgserver.ReplicatedOptions{
		Postgres:    pgserver.Options{LogPath: filepath.Join(dir, "postgres.log"), Version: cfg.PGVersion},
		Replication: cfg.Replication,
	})
	if err != nil {
		return launched{}, err
	}
	desc := fmt.Sprintf("PostgreSQL %s primary at %s with a %s streaming standby at %s", rp.Primary.Version, rp.Primary.Addr, rp.Replication, rp.Standby.Addr)
	return launched{dsn: rp.DSN, desc: desc, stop: rp.Stop, ctl: replicatedCtl{rp}}, nil
}

func launchReplicatedRedis(ctx context.Context, cfg Config, dir string) (launched, error) {
	rr, err := redisserver.StartReplicated(ctx, redisserver.ReplicatedOptions{
		Redis: redisserver.Options{Persistence: cfg.Persistence, LogPath: filepath.Join(dir, "redis.log")},
	})
	if err != nil {
		return launched{}, err
	}
	p, r := rr.Nodes[0], rr.Nodes[1]
	desc := fmt.Sprintf("Redis %s primary at %s with a replica at %s (persistence %s, asynchronous) and 3 Sentinels (down after %v, failover timeout %v)",
		p.Version, p.Addr, r.Addr, p.Persistence, rr.DownAfter, rr.FailoverTimeout)
	return launched{dsn: rr.DSN, desc: desc, stop: rr.Stop, ctl: rr}, nil
}

// replicatedCtl applies kill, pause and restart to the server that is primary now (the
// standby once promoted), and failover to the pair.
type replicatedCtl struct{ rp *pgserver.Replicated }

func (c replicatedCtl) primary() *pgserver.Server {
	if c.rp.Promoted {
		return c.rp.Standby
	}
	return c.rp.Primary
}

func (c replicatedCtl) Pid() int                          { return c.primary().Pid() }
func (c replicatedCtl) Kill() error                       { return c.primary().Kill() }
func (c replicatedCtl) Pause() error                      { return c.primary().Pause() }
func (c replicatedCtl) Resume() error                     { return c.primary().Resume() }
func (c replicatedCtl) Start(ctx context.Context) error   { return c.primary().Start(ctx) }
func (c replicatedCtl) Restart(ctx context.Context) error { return c.primary().Restart(ctx) }
func (c replicatedCtl) Failover(ctx context.Context) error {
	return c.rp.Failover(ctx)
}

// Rejoin brings the old primary back as a standby of the new one (pg_rewind).
func (c replicatedCtl) Rejoin(ctx context.Context) error {
	return c.rp.Rejoin(ctx)
}
