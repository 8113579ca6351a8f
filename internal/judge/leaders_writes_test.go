package judge_test

import (
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// Reports of whether each node takes writes, recorded beside the role reports (a
// Patroni run's): a timeline of their own under leaders.writes, each named by the
// signal its reports carry; the role reports' timeline and the split brain are the
// role reports' alone. Here n1 keeps reporting primary throughout while its database
// stops taking writes at 1 s (down, then in recovery at 1.5 s), and n2 takes writes
// from 2 s: by the role reports, two leaders from 2 s; by writes taken, 1 s without one.
func TestLeaderTimelineByWrites(t *testing.T) {
	s := int64(time.Second)
	const rest, sql = "REST", "SQL"
	var ops []histories.Op
	add := func(at int64, f, node, role, signal string) {
		ops = append(ops, histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: f,
			Value: histories.Value(rundir.RoleReport{Node: node, Role: role, Signal: signal})})
	}
	for _, n := range []string{"n1", "n2"} {
		r := results.RoleReplica
		if n == "n1" {
			r = results.RolePrimary
		}
		add(0, results.RoleEvent, n, r, rest)
		add(0, results.WriteRoleEvent, n, r, sql)
	}
	add(s, results.WriteRoleEvent, "n1", results.RoleDown, sql)
	add(15*s/10, results.WriteRoleEvent, "n1", results.RoleReplica, sql)
	add(2*s, results.RoleEvent, "n2", results.RolePrimary, rest)
	add(2*s, results.WriteRoleEvent, "n2", results.RolePrimary, sql)
	ops = append(ops, histories.Op{Time: 3 * s, Process: 0, Type: histories.Invoke, F: "read", OpID: "0-0"},
		histories.Op{Time: 3 * s, Process: 0, Type: histories.OK, F: "read", OpID: "0-0"})
	l := judge.LeaderTimeline(ops)
	if l == nil || l.Writes == nil {
		t.Fatalf("timelines %v", l)
	}
	if l.Signal != rest || l.Writes.Signal != sql {
		t.Errorf("signals %q and %q, want %q and %q", l.Signal, l.Writes.Signal, rest, sql)
	}
	if l.SplitBrainS != 1 || l.NoLeaderS != 0 || len(l.Timeline) != 2 {
		t.Errorf("by the role reports: %s; want n1 to 2 s, then n1 and n2 for 1 s", l)
	}
	w := l.Writes
	if w.NoLeaderS != 1 || w.SplitBrainS != 0 || w.Changes != 1 || len(w.Timeline) != 4 {
		t.Errorf("by writes taken: %s; want n1 to 1 s, none (n1 down) to 1.5 s, none to 2 s, n2 to 3 s", w)
	}
	if _, split := results.PartitionTimeline(ops, nil); len(split) != 1 || split[0].StartS != 2 {
		t.Errorf("split brain %+v: want the role reports' one from 2 s", split)
	}
}
