package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/indoubt/indoubt/internal/powerfs"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/cassandra"
	"github.com/indoubt/indoubt/internal/servers/powerloss"
)

// Power loss (faults' power-loss@T): the launched server's data directory sits on
// powerfs, and at T the server is killed, everything it never fsynced is undone, and it
// starts again at once on what survived. The final state is then reconciled as after a
// kill (process_faults.go): acknowledged effects that did not survive are lost writes,
// named with the time from their acknowledgement to the power loss.
//
// A server that does not start again on what survived cannot be read: no verdict is
// reached (exit 3), and the error says so as a finding, with the server log's tail,
// distinct from a run that could not start at all.

// onPowerFS reports whether a launched server's data directory goes on powerfs: asked
// for, or needed by a power-loss fault.
func (c Config) onPowerFS() bool {
	if c.PowerFS {
		return true
	}
	for _, f := range c.Faults {
		if f.Name == "power-loss" {
			return true
		}
	}
	return false
}

// pgDurability returns the PostgreSQL settings of --synchronous-commit and --fsync.
func (c Config) pgDurability() map[string]string {
	s := map[string]string{}
	if c.SynchronousCommit != "" {
		s["synchronous_commit"] = c.SynchronousCommit
	}
	if c.Fsync != "" {
		s["fsync"] = c.Fsync
	}
	return s
}

// checkDurability refuses, before anything launches, durability settings and power
// losses that cannot be applied.
func checkDurability(c Config) error {
	for _, o := range []struct{ field, v string }{{"SynchronousCommit", c.SynchronousCommit}, {"Fsync", c.Fsync}} {
		if o.v == "" {
			continue
		}
		if o.v != "on" && o.v != "off" {
			return refuse(o.field, "%q: want on or off", o.v)
		}
		if c.DSN != "" {
			return refuse(o.field, "sets a server indoubt launches; over {DSN}, set it on the server")
		}
	}
	if c.CommitLogSync != "" {
		if !slices.Contains(commitLogSyncs, c.CommitLogSync) {
			return refuse("CommitLogSync", "%q: want periodic, batch or group", c.CommitLogSync)
		}
		if c.DSN != "" {
			return refuse("CommitLogSync", "sets a Cassandra indoubt launches; over {DSN}, set commitlog_sync in the server's cassandra.yaml")
		}
	}
	switch c.PowerFSEntries {
	case "", EntriesPOSIX:
	case EntriesOrdered:
		if c.Store != CQL {
			return refuse("PowerFSEntries", "ordered is built for a launched Cassandra only, not %s", c.Store)
		}
	default:
		return refuse("PowerFSEntries", "%q: want posix or ordered", c.PowerFSEntries)
	}
	if c.Topology == TopologyReplicated && (c.SynchronousCommit != "" || c.Fsync != "" || c.onPowerFS()) {
		return refuse("Topology", "{SynchronousCommit}, {Fsync}, {PowerFS} and power-loss faults apply to a single launched server, not to a replicated topology")
	}
	if !c.onPowerFS() {
		return nil
	}
	// A power-loss fault puts the data directory on powerfs without --powerfs.
	field := "PowerFS"
	if !c.PowerFS {
		field = "Faults"
	}
	switch {
	case c.DSN != "":
		return refuse(field, "{PowerFS} and power-loss faults need a server indoubt launches, with its data directory on powerfs; over {DSN} there is none")
	case c.Store == Mongo:
		return refuse(field, "{PowerFS} and power-loss faults: the local MongoDB-wire server (FerretDB) runs inside indoubt's own process and keeps its data in memory")
	case c.Store != Postgres && c.Store != Redis && c.Store != CQL:
		return refuse(field, "{PowerFS} and power-loss faults apply to launched PostgreSQL, Redis and Cassandra only, not to %s", c.Store)
	}
	if err := powerfs.Available(); err != nil {
		return refuse(field, "{PowerFS} and power-loss faults need a FUSE filesystem: %w", err)
	}
	return nil
}

// The rules of --powerfs-entries for directory entries on powerfs.
const (
	EntriesPOSIX   = "posix"
	EntriesOrdered = "ordered"
)

// entryDurability returns powerfs's rule of --powerfs-entries.
func (c Config) entryDurability() powerfs.EntryDurability {
	if c.PowerFSEntries == EntriesOrdered {
		return powerfs.Ordered
	}
	return powerfs.PerDirectory
}

// dataFS is the filesystem a launched server's data directory goes on: powerfs with
// --powerfs-entries' rule when onPowerFS, else none.
func (c Config) dataFS() servers.Mounter {
	if !c.onPowerFS() {
		return nil
	}
	return powerloss.FS{Entries: c.entryDurability()}
}

// commitLogSyncs are the CommitLogSync values other than "".
var commitLogSyncs = []string{cassandra.CommitLogPeriodic, cassandra.CommitLogBatch, cassandra.CommitLogGroup}

// powerLoss applies power-loss fault f (the i-th of the schedule), recording its start
// and end as nemesis events. A server that does not start again is remembered as the
// run's failure (nemesis.explain).
func (p *procNemesis) powerLoss(ctx context.Context, i int, f schedule.Fault) {
	pc, ok := p.ctl.(powerloss.Server)
	at := p.run.now()
	if !ok {
		p.event(at, f, "power-loss", p.ctl.Pid(), errors.New("the server is not on powerfs"))
		return
	}
	before, _ := powerloss.Stats(pc)
	pid := p.ctl.Pid()
	// The power loss is recorded once the server is down and before it starts again, as
	// a kill is: recorded after the restart, it would follow in the history the
	// acknowledgements of the restarted server, which a loaded machine can make many.
	err := powerloss.Down(pc, powerfs.PowerLossOptions{Tear: f.Tear, Seed: uint64(p.cfg.Seed) + uint64(i)})
	p.event(at, f, "power-loss", pid, nil)
	p.cfg.progressf("fault %s: discarded what was not fsynced: up to %d bytes in %d files, %d directory entries", f.Spec, before.PendingBytes, before.PendingFiles, before.PendingEntries)
	if err == nil {
		err = pc.Start(ctx)
	}
	if err != nil {
		p.startFailure = fmt.Errorf("the server did not start again after %s (a finding: it could not recover from what it had fsynced): %v", f.Spec, err)
	}
	p.event(p.run.now(), f, "start", p.ctl.Pid(), err)
}

// explain names a failure of the server to start again after a power loss as the
// reason a run's final reads failed.
func (n *nemesis) explain(err error) error {
	if n == nil || n.procs == nil || n.procs.startFailure == nil {
		return err
	}
	return fmt.Errorf("%w; so the final state could not be read (%w)", n.procs.startFailure, err)
}

// durabilityDesc describes the launched server's durability settings for the report.
func (c Config) durabilityDesc() string {
	s := ""
	if c.Store == Postgres {
		if c.SynchronousCommit != "" {
			s += ", synchronous_commit " + c.SynchronousCommit
		}
		if c.Fsync != "" {
			s += ", fsync " + c.Fsync
		}
	}
	if c.Store == CQL {
		mode := c.CommitLogSync
		if mode == "" {
			mode = cassandra.CommitLogPeriodic
		}
		s += ", commitlog_sync " + mode
	}
	if c.onPowerFS() {
		s += ", data on powerfs"
		if c.PowerFSEntries == EntriesOrdered {
			s += " (entries ordered)"
		}
	}
	return s
}
