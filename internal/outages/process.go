// Package outages reads the faults a run applied from its history's nemesis events:
// the process faults (kill, pause, restart, failover, power loss) as windows from the
// event that applied each to the one that ended it, and the partitions between nodes
// with the ground truth of their grudges. The checker attributes lost writes to them;
// the results build the process-fault and partition timelines from them.
//
// The events' values are the ones internal/rundir types (ProcessStep, PartitionStep):
// a process fault's names its fault, server and pid; a partition's its grudge.
package outages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// ProcessFault is one process fault as the history's nemesis events record it: what
// was done to which server process, from when it was applied until the server answered
// again (or was continued). Times are the history's clock.
type ProcessFault struct {
	// Fault is the schedule entry as written; Action what was done: kill, pause,
	// restart, failover or power-loss.
	Fault  string
	Action string
	// Server describes the server; Pid is the process the fault was applied to.
	Server string
	Pid    int
	// Start is the time of the event that applied the fault; End that of the event
	// that ended it (start, resume, started, promoted), or -1 when the history has none.
	Start, End int64
	// Error is what went wrong applying or ending the fault, as the events say.
	Error string
}

// LosesData reports whether the fault can lose what the server acknowledged: a kill,
// a restart, a failover, a power loss (a pause loses nothing), or a partition between
// nodes (partitions.go), through the failover it lets a system make on its own.
func (f ProcessFault) LosesData() bool {
	switch f.Action {
	case "kill", "restart", "failover", "power-loss", PartitionAction:
		return true
	}
	return false
}

// processFaultEnds maps the event that applies a process fault to the one that ends it.
var processFaultEnds = map[string]string{
	"kill": "start", "pause": "resume", "power-loss": "start", "failover": "promoted", "restart": "started",
}

// processEvent is the value of a process fault's nemesis event.
type processEvent struct {
	Fault  string `json:"fault"`
	Server string `json:"server"`
	Pid    *int   `json:"pid"`
	Error  string `json:"error"`
}

// processEventOf reads a nemesis event of a process fault: its value names the fault,
// the server and the pid (the proxy's events and the schedule's windows name no pid).
func processEventOf(op histories.Op) (processEvent, bool) {
	if op.IsClient() || !bytes.Contains(op.Value, []byte(`"pid"`)) {
		return processEvent{}, false
	}
	var e processEvent
	if json.Unmarshal(op.Value, &e) != nil || e.Pid == nil || e.Fault == "" {
		return processEvent{}, false
	}
	return e, true
}

// ProcessFaults reads the process faults from a history's nemesis events, in the
// order they were applied. Events the nemesis records beside them (a rejoin, the
// proxy's faults, fault windows) are not process faults and are skipped.
func ProcessFaults(ops []histories.Op) []ProcessFault {
	var out []ProcessFault
	for _, f := range LosingFaults(ops) {
		if f.Action != PartitionAction {
			out = append(out, f)
		}
	}
	return out
}

// LosingFaults is ProcessFaults with the partitions between nodes among them, in the
// order they began: every fault a lost write may be attributed to.
func LosingFaults(ops []histories.Op) []ProcessFault {
	var t Timeline
	for _, op := range ops {
		t.Add(op)
	}
	return t.Faults
}

// Timeline builds the data-losing faults (LosingFaults) one event at a time, for a
// check that streams its history. The zero value is empty and ready.
type Timeline struct {
	// Faults are the faults seen so far, in the order they began; one whose end has
	// not been seen has End -1.
	Faults []ProcessFault
	open   []int // faults whose end has not been seen, oldest first
}

// Add takes the next event of the history; started reports whether it began a fault.
func (t *Timeline) Add(op histories.Op) (started bool) {
	if p, ok := partitionEventOf(op); ok {
		return t.addPartition(op, p)
	}
	e, ok := processEventOf(op)
	if !ok {
		return false
	}
	if _, starts := processFaultEnds[op.F]; starts {
		t.Faults = append(t.Faults, ProcessFault{Fault: e.Fault, Action: op.F, Server: e.Server, Pid: *e.Pid, Start: op.Time, End: -1, Error: e.Error})
		t.open = append(t.open, len(t.Faults)-1)
		return true
	}
	for k, i := range t.open {
		f := &t.Faults[i]
		if f.Fault == e.Fault && processFaultEnds[f.Action] == op.F {
			f.End = op.Time
			if e.Error != "" {
				f.Error = strings.TrimPrefix(f.Error+"; "+e.Error, "; ")
			}
			t.open = slices.Delete(t.open, k, k+1)
			return false
		}
	}
	return false
}

// LastLosing is the last fault that can lose data, or nil.
func LastLosing(fs []ProcessFault) *ProcessFault {
	var last *ProcessFault
	for i := range fs {
		if fs[i].LosesData() {
			last = &fs[i]
		}
	}
	return last
}

// Describe names a fault as the explanations do: "kill@1s-2s (kill of pid 7 at 1.00s)".
func (f ProcessFault) Describe() string {
	if f.Action == PartitionAction {
		return fmt.Sprintf("%s (%s at %.2fs)", f.Fault, f.Server, float64(f.Start)/1e9)
	}
	return fmt.Sprintf("%s (%s of pid %d at %.2fs)", f.Fault, f.Action, f.Pid, float64(f.Start)/1e9)
}
