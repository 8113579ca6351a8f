package results

import (
	"fmt"
	"strings"
)

// Leaders is results.json's leaders: which node reported itself leader (primary) over
// the run, read from the nodes' role reports (RoleEvent nemesis events) by the judge.
// The harness polls each node for its own role; what a node that did not answer
// thought of itself is not known, so a span in which no node that answered reported
// primary is one without a leader as far as the clients could tell, whatever a paused
// or cut-off node believed.
type Leaders struct {
	// FromS is the first role report, ToS the end of the history (the roles last
	// reported are taken to hold until then, as split_brain's windows are): the span
	// the timeline covers, in seconds from the start of the run.
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// Timeline cuts [FromS, ToS) where the nodes reporting primary, or the nodes not
	// answering, changed: consecutive, without gaps.
	Timeline []LeaderSpan `json:"timeline"`
	// NoLeaderS is how long no node reported itself primary, SplitBrainS how long two
	// or more did (the sum of split_brain's windows when they close before the end).
	NoLeaderS   float64 `json:"no_leader_s"`
	SplitBrainS float64 `json:"split_brain_s"`
	// Changes counts the times one node alone reporting primary was followed, directly
	// or after spans with none or several, by another node alone.
	Changes int `json:"leader_changes"`
	// Signal is what the harness asked the nodes (their role reports' signal): etcd's
	// Status, Patroni's REST API ...; empty when the reports do not say.
	Signal string `json:"signal,omitempty"`
	// Writes is the same timeline read from whether each node's database takes writes
	// (WriteRoleEvent), where the topology records it beside the role it reports
	// (Patroni); nil elsewhere.
	Writes *Leaders `json:"writes,omitempty"`
}

// LeaderSpan is a time during which the same nodes reported themselves primary and the
// same nodes did not answer.
type LeaderSpan struct {
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// Leaders are the nodes that reported primary, sorted: none (no leader), one, or
	// several (a split brain).
	Leaders []string `json:"leaders"`
	// Down are the nodes the harness's poll did not reach (killed, paused, cut off from
	// the harness), sorted.
	Down []string `json:"down,omitempty"`
}

// Leader says who led in the span: a node, "none", or the nodes that each reported
// primary.
func (s LeaderSpan) Leader() string {
	if len(s.Leaders) == 0 {
		return "none"
	}
	return strings.Join(s.Leaders, " and ")
}

// String is the timeline's figures in one line, as the console prints them, with the
// spans when there are few.
func (l Leaders) String() string {
	out := fmt.Sprintf("leaders from %.2fs to %.2fs: %d %s, %.2fs without a leader, %.2fs with two or more",
		l.FromS, l.ToS, l.Changes, plural(l.Changes, "change", "changes"), l.NoLeaderS, l.SplitBrainS)
	if len(l.Timeline) <= 8 {
		var spans []string
		for _, s := range l.Timeline {
			sp := fmt.Sprintf("%s %.2f-%.2fs", s.Leader(), s.StartS, s.EndS)
			if len(s.Down) > 0 {
				sp += " (" + strings.Join(s.Down, ", ") + " down)"
			}
			spans = append(spans, sp)
		}
		out += " (" + strings.Join(spans, ", ") + ")"
	}
	if l.Writes != nil {
		out += "; by writes taken: " + l.Writes.String()
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
