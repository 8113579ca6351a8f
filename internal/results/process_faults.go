package results

import (
	"fmt"
	"math"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/outages"
)

// ProcessFault is one process fault as it happened to a launched server: results.json's
// process_faults, the fault timeline. Times are seconds from the start of the run.
type ProcessFault struct {
	// Fault is the schedule entry as written; Action what was done (kill, pause,
	// restart).
	Fault  string `json:"fault"`
	Action string `json:"action"`
	// Server describes the server it was done to; Pid is the process killed, paused or
	// restarted.
	Server string `json:"server"`
	Pid    int    `json:"pid"`
	// StartS is when the fault held (a kill: every process of the server gone; a
	// pause: every one stopped; a restart or failover: when it began); EndS when the
	// server answered again (kill, restart) or was continued (pause).
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// DowntimeS is EndS - StartS: how long the server answered nothing.
	DowntimeS float64 `json:"downtime_s"`
	// InFlight counts client operations invoked before the fault and not completed
	// when it was applied; InFlightInfo how many of them ended unknown (info),
	// InFlightOK acknowledged.
	InFlight     int64 `json:"in_flight"`
	InFlightInfo int64 `json:"in_flight_info"`
	InFlightOK   int64 `json:"in_flight_ok"`
	// FirstAckS is the time from the fault to the first operation acknowledged after
	// the server answered again; nil when none was.
	FirstAckS *float64 `json:"first_ack_after_s,omitempty"`
	// LostWrites counts acknowledged writes found missing after this fault.
	LostWrites int64 `json:"lost_writes"`
	// Error is what went wrong applying the fault, if anything.
	Error string `json:"error,omitempty"`
}

// LostWriteKind is the kind of the anomaly a LostWrite is reported as.
const LostWriteKind = checker.LostWriteKind

// LostWrite is an acknowledged effect found missing after a process fault, as the
// checker found it (checker.Result.LostWrites).
type LostWrite = checker.LostWrite

// ProcessTimeline is results.json's process_faults: the process faults a history's
// nemesis events record (outages.ProcessFaults), each with its figures from the
// history (the operations in flight when it was applied and how they ended, the first
// acknowledgement after the server answered again) and the checker's lost writes that
// followed it. The runner and `indoubt check` both fill it this way, from the history
// alone.
func ProcessTimeline(ops []histories.Op, lost []checker.LostWrite) []ProcessFault {
	faults := outages.ProcessFaults(ops)
	if len(faults) == 0 {
		return nil
	}
	all, _ := histories.Pair(ops) // the checker has refused a history that does not pair
	tl := make([]ProcessFault, len(faults))
	for i, f := range faults {
		end := f.End
		if end < 0 {
			end = f.Start
		}
		p := ProcessFault{Fault: f.Fault, Action: f.Action, Server: f.Server, Pid: f.Pid,
			StartS: secs(f.Start), EndS: secs(end), DowntimeS: secs(end - f.Start), Error: f.Error}
		first := int64(-1)
		for _, o := range all {
			inv, comp := o.Invoke, o.Complete
			if inv.Time < f.Start && (comp == nil || comp.Time >= f.Start) {
				p.InFlight++
				switch o.Type() {
				case histories.Info:
					p.InFlightInfo++
				case histories.OK:
					p.InFlightOK++
				}
			}
			// The final reads come after the workers stopped: they say nothing of the
			// workers getting through again.
			if comp != nil && comp.Type == histories.OK && comp.Time >= end && !histories.IsFinalReadID(inv.OpID) && (first < 0 || comp.Time < first) {
				first = comp.Time
			}
		}
		if first >= 0 {
			s := secs(first - f.Start)
			p.FirstAckS = &s
		}
		for _, l := range lost {
			if l.Fault == f.Fault {
				p.LostWrites += max(l.Count, 1)
			}
		}
		tl[i] = p
	}
	return tl
}

func secs(ns int64) float64 { return math.Round(float64(ns)/1e6) / 1e3 }

// Verb says what a process fault did to the server while it lasted.
func (f ProcessFault) Verb() string {
	if f.Action == "pause" {
		return "paused"
	}
	return "down"
}

// String is the fault in one line, as the console prints it: what, when, the downtime,
// the operations in flight and how they ended, the first acknowledgement after it and
// the acknowledged writes lost.
func (f ProcessFault) String() string {
	s := fmt.Sprintf("%s: %s of pid %d at %.2fs, %s %.2fs, %d in flight → %d info, %d ok", f.Fault, f.Action, f.Pid, f.StartS, f.Verb(), f.DowntimeS, f.InFlight, f.InFlightInfo, f.InFlightOK)
	if f.FirstAckS != nil {
		s += fmt.Sprintf(", first ack %.2fs after", *f.FirstAckS)
	} else {
		s += ", no ack after"
	}
	s += fmt.Sprintf(", %d acknowledged writes lost", f.LostWrites)
	if f.Error != "" {
		s += ": " + f.Error
	}
	return s
}

// LostTotal counts the acknowledged writes lost: a lost write that stands for several
// (Count) counts as many.
func (r *Results) LostTotal() int64 {
	var n int64
	for _, l := range r.LostWrites {
		n += max(l.Count, 1)
	}
	return n
}
