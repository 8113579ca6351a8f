package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/schedule"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
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
		return refuse("Faults", "%s: process faults (%s) need a server indoubt launches; over {DSN} it cannot reach the server's process (commit and network faults still work)", f.Spec, schedule.ProcessFaults)
	case c.Store == Mongo:
		return refuse("Faults", "%s: the local MongoDB-wire server (FerretDB) runs inside indoubt's own process, which cannot kill, pause or restart itself", f.Spec)
	case c.Store != Postgres && c.Store != Redis && c.Store != CQL && c.Store != MySQL && c.Store != Etcd:
		return refuse("Faults", "%s: process faults are applied to launched PostgreSQL, Redis, Cassandra, MariaDB and etcd only, not to %s", f.Spec, c.Store)
	}
	for _, f := range procs {
		if f.Name == "failover" && c.Topology != TopologyReplicated {
			return refuse("Faults", "%s: failover needs a standby to promote: set {Topology} replicated", f.Spec)
		}
	}
	return nil
}

// procNemesis applies the process faults of the schedule to the launched server at
// their times and records each, with its ground truth (what was done to which process,
// when), as nemesis events in the history.
type procNemesis struct {
	sched  schedule.Schedule
	ctl    processCtl
	server string
	cfg    Config

	// done is closed when every fault is over and the server runs again.
	done   chan struct{}
	cancel context.CancelFunc
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
func (p *procNemesis) event(at int64, f schedule.Fault, action string, pid int, err error) {
	v := rundir.ProcessStep{Fault: f.Spec, Server: p.server, Pid: pid}
	if n, ok := p.ctl.(interface{ Node(pid int) string }); ok {
		// A topology whose faults aim at whichever member leads: the one hit.
		v.Node = n.Node(pid)
	}
	if err != nil {
		v.Error = err.Error()
	}
	p.record(histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: action, Value: histories.Value(v)})
	msg := fmt.Sprintf("fault %s: %s pid %d at %.2fs", f.Spec, action, pid, time.Duration(at).Seconds())
	if err != nil {
		msg += ": " + err.Error()
	}
	p.cfg.progressf("%s", msg)
}

// apply does one fault. Whatever happens, the server runs when it returns: a kill is
// followed by a start and a pause by a continue even when the run ends first. Each
// step is a nemesis event in the history, with the error it met: the timeline of
// results.json is read from those events (results.ProcessTimeline), as `indoubt check`
// reads it.
func (p *procNemesis) apply(ctx context.Context, i int, f schedule.Fault) {
	pid := p.ctl.Pid()
	defer p.state.during(f)()
	p.run.end.faultBegins()
	defer func() { p.run.end.faultEnds(time.Now()) }()
	// Starting again must not depend on the run's context: a server left down would
	// fail the final reads.
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer rcancel()
	switch f.Name {
	// A kill and a pause are recorded once they hold, as every fault window is: every
	// process of the server gone (kill) or stopped (pause), which takes a PostgreSQL's
	// postmaster and each of its backends. The end of a kill or a restart is when the
	// server answered again (after Start); the end of a pause when its continue was
	// sent.
	case "kill":
		err := p.ctl.Kill()
		p.event(p.run.now(), f, "kill", pid, err)
		p.sleepUntil(ctx, f.End)
		err = p.ctl.Start(rctx)
		p.event(p.run.now(), f, "start", p.ctl.Pid(), err)
	case "pause":
		err := p.ctl.Pause()
		p.event(p.run.now(), f, "pause", pid, err)
		p.sleepUntil(ctx, f.End)
		at := p.run.now()
		p.event(at, f, "resume", pid, p.ctl.Resume())
	case "power-loss":
		p.powerLoss(rctx, i, f)
	case "failover":
		// The end of a failover is when the standby takes writes.
		p.event(p.run.now(), f, "failover", pid, nil)
		var err error
		if fo, ok := p.ctl.(interface{ Failover(context.Context) error }); ok {
			err = fo.Failover(rctx)
		} else {
			err = fmt.Errorf("this server has no standby to promote")
		}
		p.event(p.run.now(), f, "promoted", p.ctl.Pid(), err)
		if f.Rejoin && err == nil {
			p.rejoin(ctx, rctx, f, pid)
		}
	case "restart":
		p.event(p.run.now(), f, "restart", pid, nil)
		err := p.ctl.Restart(rctx)
		p.event(p.run.now(), f, "started", p.ctl.Pid(), err)
	}
}

// rejoin starts the old primary of a failover again, DefaultKillDowntime after the
// fault or at once when the run ends first (the wait follows ctx, the start rctx), and
// records it as a nemesis event; a progress line says when it was done (a PostgreSQL
// old primary then streams from the new one, a Redis one answers PING). The fault's
// end stays the promotion: the new primary took writes from then on.
func (p *procNemesis) rejoin(ctx, rctx context.Context, f schedule.Fault, pid int) {
	p.sleepUntil(ctx, f.Start+schedule.DefaultKillDowntime)
	at := p.run.now()
	var err error
	if rj, ok := p.ctl.(interface{ Rejoin(context.Context) error }); ok {
		err = rj.Rejoin(rctx)
	} else {
		err = fmt.Errorf("this topology cannot start its old primary again")
	}
	p.event(at, f, "rejoin", pid, err)
	if err == nil {
		p.cfg.progressf("fault %s: rejoin done %.2fs after the fault", f.Spec, (time.Duration(p.run.now()) - f.Start).Seconds())
	}
}

// account adds the fault timeline, read from the history's nemesis events, with its
// figures and the lost writes the checker found, and prints it a line a fault. It
// decides nothing: the verdict and the lost writes are the checker's.
func (p *procNemesis) account(res *results.Results) {
	for _, f := range res.ProcessFaults {
		line := fmt.Sprintf("fault %s: down %.2fs, %d in flight (%d info, %d ok), %d acknowledged writes lost", f.Fault, f.DowntimeS, f.InFlight, f.InFlightInfo, f.InFlightOK, f.LostWrites)
		if f.FirstAckS != nil {
			line += fmt.Sprintf(", first acknowledgement %.2fs after the fault", *f.FirstAckS)
		}
		p.cfg.progressf("%s", line)
	}
}

// The topologies of --topology.
const (
	TopologySingle     = "single"
	TopologyReplicated = "replicated"
)

// checkTopology refuses, before anything launches, a topology this build cannot launch
// or a fault it cannot apply to one.
func checkTopology(c Config) error {
	if c.Store == Etcd && c.proxied() {
		return refuse("Proxy", "etcd: the fault proxy fronts one server and has no gRPC toxics; use process faults and partitions ({Network} isolated), with {Proxy} auto or off")
	}
	switch c.Topology {
	case "", TopologySingle:
		if c.Replication != "" && c.Replication != pgserver.ReplicationAsync {
			return refuse("Replication", "%s needs {Topology} replicated", c.Replication)
		}
		return nil
	case TopologyReplicated:
	case TopologyPatroni:
		if c.Store != Postgres {
			return refuse("Topology", "patroni manages PostgreSQL, not %s", c.Store)
		}
	default:
		return refuse("Topology", "%q: want single, replicated or patroni", c.Topology)
	}
	switch {
	case c.Replication != "" && c.Replication != pgserver.ReplicationAsync && c.Replication != pgserver.ReplicationSync:
		return refuse("Replication", "%q: want async or sync", c.Replication)
	case c.DSN != "":
		return refuse("Topology", "replicated launches its servers: drop {DSN} (compose/ has replicated topologies to point {DSN} at)")
	case c.Store == CQL && c.isolated():
		// A three-node ring, each node in a namespace of its own (partitions.go).
	case c.Store == MySQL && c.isolated():
		// A three-node Galera cluster, each node in a namespace of its own (galera.go).
		return checkGalera(c)
	case c.Store == Etcd && !c.proxied():
		// Three members, on loopback or each on a node of its own (backends_etcd.go).
	case c.Store != Postgres && c.Store != Redis:
		return refuse("Topology", "replicated: this build launches a replicated PostgreSQL or Redis (or, with {Network} isolated, a three-node Cassandra ring or MariaDB Galera cluster), not %s", c.Store)
	case c.Store == Redis && c.Replication == pgserver.ReplicationSync:
		// WAIT after each write would report how many replicas have it, not make a
		// failover keep it: Redis documents that WAIT does not make it strongly consistent.
		return refuse("Replication", "sync: Redis replicates asynchronously only (WAIT does not make a failover keep a write); use async")
	case c.proxied():
		return refuse("Topology", "replicated: the fault proxy fronts one server; use process faults (kill, pause, restart, failover) only, or {Proxy} off")
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
	return launched{dsn: rp.DSN, desc: desc, stop: rp.Stop, ctl: replicatedCtl{rp}, standby: rp.Standby.DSN}, nil
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
