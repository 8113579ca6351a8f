package schedule

import (
	"sort"
	"time"
)

// Action is one edge of a fault's window: the fault at index I of the schedule opens
// (Open) or closes At after the start of the run.
type Action struct {
	At   time.Duration
	I    int
	Open bool
}

// Actions lists the window edges of the faults keep selects (every fault when keep is
// nil) in time order: a bounded fault opens and closes, an unbounded one only opens. At
// one instant a close comes before an open, so back-to-back windows of one fault follow
// each other.
func (s Schedule) Actions(keep func(Fault) bool) []Action {
	var acts []Action
	for i, f := range s {
		if keep != nil && !keep(f) {
			continue
		}
		acts = append(acts, Action{At: f.Start, I: i, Open: true})
		if f.Bounded {
			acts = append(acts, Action{At: f.End, I: i})
		}
	}
	sort.SliceStable(acts, func(a, b int) bool {
		if acts[a].At != acts[b].At {
			return acts[a].At < acts[b].At
		}
		return !acts[a].Open && acts[b].Open
	})
	return acts
}
