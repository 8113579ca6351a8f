package judge

import (
	"encoding/json"
	"math"
	"slices"
	"sort"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

// LeaderTimeline is results.json's leaders, from the history alone: the role reports
// (results.RoleEvent nemesis events, each a node's role when it changed) of a topology
// whose nodes report one, cut into spans where the nodes reporting primary or the
// nodes not answering changed. The timeline runs from the first report to the end of
// the history (its last operation), the roles last reported held until then. Nil when
// the history has no role report before its last instant.
//
// Reports at the same time are taken together (the harness records each poll's
// changes at the poll's time), so a poll that sees the leader move from one node to
// another makes no span with two or none. A report whose value is not a role report
// is skipped, as PartitionTimeline skips it.
//
// Where the nodes' databases were also asked whether they take writes
// (results.WriteRoleEvent), the timeline of those reports is the result's Writes.
func LeaderTimeline(ops []histories.Op) *results.Leaders {
	l := leaderTimeline(ops, results.RoleEvent)
	if l != nil {
		l.Writes = leaderTimeline(ops, results.WriteRoleEvent)
	}
	return l
}

// leaderTimeline is the timeline of the role reports of function f.
func leaderTimeline(ops []histories.Op, f string) *results.Leaders {
	type report struct {
		at         int64
		node, role string
	}
	var reps []report
	var last int64
	signal := ""
	for _, op := range ops {
		last = max(last, op.Time)
		if op.IsClient() || op.F != f {
			continue
		}
		var v struct{ Node, Role, Signal string }
		if json.Unmarshal(op.Value, &v) != nil || v.Node == "" {
			continue
		}
		reps = append(reps, report{op.Time, v.Node, v.Role})
		if signal == "" {
			signal = v.Signal
		}
	}
	if len(reps) == 0 {
		return nil
	}
	sort.SliceStable(reps, func(a, b int) bool { return reps[a].at < reps[b].at })
	from := reps[0].at
	end := max(last, reps[len(reps)-1].at)
	out := &results.Leaders{FromS: secs(from), ToS: secs(end), Timeline: []results.LeaderSpan{}, Signal: signal}
	roles := map[string]string{}
	type span struct {
		from, to      int64
		leaders, down []string
	}
	var spans []span
	for i := 0; i < len(reps); {
		at := reps[i].at
		for ; i < len(reps) && reps[i].at == at; i++ {
			roles[reps[i].node] = reps[i].role
		}
		s := span{from: at, leaders: results.NodesIn(roles, results.RolePrimary), down: results.NodesIn(roles, results.RoleDown)}
		if n := len(spans); n > 0 {
			prev := &spans[n-1]
			if slices.Equal(prev.leaders, s.leaders) && slices.Equal(prev.down, s.down) {
				continue
			}
			prev.to = at
		}
		spans = append(spans, s)
	}
	spans[len(spans)-1].to = end
	var none, split int64
	prev := ""
	for _, s := range spans {
		d := s.to - s.from
		if d == 0 {
			// The last reports came at the end of the history: nothing held for a time.
			continue
		}
		switch len(s.leaders) {
		case 0:
			none += d
		case 1:
			if prev != "" && prev != s.leaders[0] {
				out.Changes++
			}
			prev = s.leaders[0]
		default:
			split += d
		}
		ls := s.leaders
		if ls == nil {
			ls = []string{}
		}
		out.Timeline = append(out.Timeline, results.LeaderSpan{StartS: secs(s.from), EndS: secs(s.to), Leaders: ls, Down: s.down})
	}
	if len(out.Timeline) == 0 {
		// Every report came at the history's last instant: no role held for a time.
		return nil
	}
	out.NoLeaderS, out.SplitBrainS = secs(none), secs(split)
	return out
}

// secs is a duration in nanoseconds in seconds, to the millisecond, as results.json's
// other timelines give them.
func secs(ns int64) float64 { return math.Round(float64(ns)/1e6) / 1e3 }
