package judge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// leaderOps is a budget history of three nodes' role reports and one worker's
// decrements every 100 ms until 5 s: n1 leads, is down from 1 s (killed), n2 leads from
// 2 s, n1 comes back still reporting primary at 3 s until 3.5 s, and at 4 s one poll sees
// n2 step down and n3 take over; a report that is not a role's is among them.
func leaderOps() []histories.Op {
	s := int64(time.Second)
	var ops []histories.Op
	role := func(at int64, node, r string) {
		ops = append(ops, histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: results.RoleEvent,
			Value: histories.Value(rundir.RoleReport{Node: node, Role: r})})
	}
	roles := []struct {
		at         int64
		node, role string
	}{
		{0, "n1", results.RolePrimary}, {0, "n2", results.RoleReplica}, {0, "n3", results.RoleReplica},
		{s, "n1", results.RoleDown}, {2 * s, "n2", results.RolePrimary}, {3 * s, "n1", results.RolePrimary},
		{35 * s / 10, "n1", results.RoleReplica}, {4 * s, "n2", results.RoleReplica}, {4 * s, "n3", results.RolePrimary},
	}
	next := 0
	for i := 0; i <= 50; i++ {
		at := int64(i) * s / 10
		for ; next < len(roles) && roles[next].at <= at; next++ {
			role(roles[next].at, roles[next].node, roles[next].role)
		}
		if i == 15 {
			ops = append(ops, histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: results.RoleEvent, Value: histories.Value([]int{1})})
		}
		id := fmt.Sprintf("0-%d", i)
		ops = append(ops,
			histories.Op{Time: at, Process: 0, Type: histories.Invoke, F: "decrement", OpID: id},
			histories.Op{Time: at + 1000, Process: 0, Type: histories.OK, F: "decrement", OpID: id, Value: histories.Value(map[string]any{"applied": true})})
	}
	return ops
}

// The leader timeline of role reports: consecutive spans, down nodes named, the
// seconds without a leader and with two, leader changes counted across a span without
// one and not across a split brain that ends where it began; reports of one poll
// taken together (no span without a leader at 4 s).
func TestLeaderTimeline(t *testing.T) {
	l := judge.LeaderTimeline(leaderOps())
	if l == nil {
		t.Fatal("no timeline")
	}
	want := []results.LeaderSpan{
		{StartS: 0, EndS: 1, Leaders: []string{"n1"}},
		{StartS: 1, EndS: 2, Leaders: []string{}, Down: []string{"n1"}},
		{StartS: 2, EndS: 3, Leaders: []string{"n2"}, Down: []string{"n1"}},
		{StartS: 3, EndS: 3.5, Leaders: []string{"n1", "n2"}},
		{StartS: 3.5, EndS: 4, Leaders: []string{"n2"}},
		{StartS: 4, EndS: 5, Leaders: []string{"n3"}},
	}
	if !reflect.DeepEqual(l.Timeline, want) {
		t.Errorf("timeline\n%+v\nwant\n%+v", l.Timeline, want)
	}
	if l.FromS != 0 || l.ToS != 5 || l.NoLeaderS != 1 || l.SplitBrainS != 0.5 || l.Changes != 2 {
		t.Errorf("figures %s: want from 0 s to 5 s, 1 s without a leader, 0.5 s with two, 2 changes", l)
	}
	// The split brain is the one PartitionTimeline reads from the same reports.
	_, splits := results.PartitionTimeline(leaderOps(), nil)
	if len(splits) != 1 || splits[0].DurationS != l.SplitBrainS {
		t.Errorf("split brain windows %+v, the timeline's %.2f s", splits, l.SplitBrainS)
	}
	var noRoles []histories.Op
	for _, op := range leaderOps() {
		if op.IsClient() {
			noRoles = append(noRoles, op)
		}
	}
	if got := judge.LeaderTimeline(noRoles); got != nil {
		t.Errorf("a timeline without role reports: %+v", got)
	}
	last := noRoles[len(noRoles)-1].Time
	atEnd := append(noRoles, histories.Op{Time: last, Process: histories.Nemesis, Type: histories.Info, F: results.RoleEvent,
		Value: histories.Value(rundir.RoleReport{Node: "n1", Role: results.RolePrimary})})
	if got := judge.LeaderTimeline(atEnd); got != nil {
		t.Errorf("a timeline of one report at the history's end: %+v", got)
	}
}

// The judge puts the timeline in the results of a directory, and a re-check gives it
// again; results.json's leaders are the judge's, not the run's (judge.Onto).
func TestDirLeaders(t *testing.T) {
	dir := t.TempDir()
	hdr := histories.Header{Workload: "budget", Model: "budget", Store: "postgres", Seed: 1, Params: map[string]json.RawMessage{"budget": histories.Value(1000)}}
	if err := rundir.WriteHistory(dir, hdr, leaderOps()); err != nil {
		t.Fatal(err)
	}
	j, err := judge.Dir(context.Background(), dir, judge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := j.Results.Leaders
	if l == nil || l.NoLeaderS != 1 || len(l.Timeline) != 6 {
		t.Fatalf("leaders %+v", l)
	}
	run := &results.Results{Leaders: &results.Leaders{NoLeaderS: 99}}
	if got := judge.Onto(run, j.Results).Leaders; got != l {
		t.Errorf("Onto kept the run's leaders %+v", got)
	}
}
