package outages

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/indoubt/indoubt/histories"
)

// Partitions between nodes. When indoubt launches a topology with a network of its
// own, the nemesis records each partition it makes as an event of function "partition"
// when the grudge is applied and "heal" when it is lifted, with the ground truth: who
// drops whose packets, who can reach whom, and the addresses of the nodes and of the
// clients that stand beside them. A partition loses data the way a failover does:
// the side that goes on as primary acknowledges writes that the other side's primary
// never receives, and one of the two is thrown away at the heal. Lost writes are
// attributed to the last data-losing fault, process fault or partition, that began
// before them (the checker's lost writes); a failover of the harness's inside a partition is the later
// of the two and takes them.

// PartitionAction is ProcessFault.Action of a partition in the timeline lost writes
// are attributed from, and the function of its nemesis event.
const PartitionAction = "partition"

// HealAction is the function of the nemesis event that lifts a partition.
const HealAction = "heal"

// Partition is one partition between nodes as the history's nemesis events record it.
// Times are the history's clock.
type Partition struct {
	// Fault is the schedule entry; Shape its shape (halves, isolate-primary ...).
	Fault string `json:"fault"`
	Shape string `json:"shape"`
	// Start is when the grudge was in force on every node; End when its lifting
	// began (the last time it was certainly in force everywhere), or -1 when the
	// history has no heal.
	Start int64 `json:"start"`
	End   int64 `json:"end"`
	// Grudge names, per node, the nodes whose packets it drops; Reach, per node, the
	// nodes it receives from (itself included). Components are the groups that reach
	// each other both ways, when the grudge splits the nodes that way.
	Grudge     map[string][]string `json:"grudge"`
	Reach      map[string][]string `json:"reach"`
	Components [][]string          `json:"components,omitempty"`
	// Nodes are the nodes' addresses and Clients the addresses the clients beside each
	// node dial from: what joins an operation's connection to a side.
	Nodes   map[string]string `json:"nodes"`
	Clients map[string]string `json:"clients"`
	// Error is what went wrong applying or healing it.
	Error string `json:"error,omitempty"`
}

// partitionEvent is the value of a partition or heal event.
type partitionEvent struct {
	Partition
	Primary string `json:"primary,omitempty"`
}

// partitionEventOf reads a nemesis event of a partition between nodes.
func partitionEventOf(op histories.Op) (partitionEvent, bool) {
	if op.IsClient() || op.F != PartitionAction && op.F != HealAction || !bytes.Contains(op.Value, []byte(`"grudge"`)) {
		return partitionEvent{}, false
	}
	var e partitionEvent
	if json.Unmarshal(op.Value, &e) != nil || e.Fault == "" {
		return partitionEvent{}, false
	}
	return e, true
}

// addPartition takes a partition's event into the timeline; it reports whether the
// event began one.
func (t *Timeline) addPartition(op histories.Op, e partitionEvent) bool {
	if op.F == PartitionAction {
		desc := "partition " + e.Shape
		if e.Primary != "" {
			desc += fmt.Sprintf(" (primary %s)", e.Primary)
		}
		t.Faults = append(t.Faults, ProcessFault{Fault: e.Fault, Action: PartitionAction, Server: desc, Start: op.Time, End: -1, Error: e.Error})
		t.open = append(t.open, len(t.Faults)-1)
		return true
	}
	for k, i := range t.open {
		f := &t.Faults[i]
		if f.Fault == e.Fault && f.Action == PartitionAction {
			f.End = op.Time
			t.open = append(t.open[:k], t.open[k+1:]...)
			return false
		}
	}
	return false
}

// Partitions reads the partitions between nodes from a history's nemesis events, in
// the order they began, each with the ground truth of its grudge.
func Partitions(ops []histories.Op) []Partition {
	var out []Partition
	for _, op := range ops {
		e, ok := partitionEventOf(op)
		if !ok {
			continue
		}
		if op.F == PartitionAction {
			p := e.Partition
			p.Start, p.End = op.Time, -1
			out = append(out, p)
			continue
		}
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].Fault == e.Fault && out[i].End < 0 {
				out[i].End = op.Time
				if e.Error != "" {
					out[i].Error = e.Error
				}
				break
			}
		}
	}
	return out
}
