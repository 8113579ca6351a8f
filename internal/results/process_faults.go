package results

import (
	"encoding/json"
	"fmt"
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
	// StartS is when the fault was applied; EndS when the server answered again
	// (kill, restart) or was continued (pause).
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
const LostWriteKind = "lost-write"

// LostWrite is an acknowledged effect found missing after a process fault: the
// operation, the fault that preceded it, and how long before the fault it was
// acknowledged.
type LostWrite struct {
	// OpID and Index name the acknowledged operation (its completion event); Key and
	// Value what it wrote.
	OpID  string          `json:"op_id"`
	Index int64           `json:"index"`
	Key   string          `json:"key,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
	// Count is how many acknowledged effects are missing when the final state cannot
	// say which (a balance): OpID is then the last acknowledged before the fault.
	Count int64 `json:"count"`
	// Fault is the schedule entry; AckBeforeFaultS how long before the fault the
	// operation was acknowledged.
	Fault           string  `json:"fault"`
	AckBeforeFaultS float64 `json:"ack_before_fault_s"`
	// Explanation says it in a sentence.
	Explanation string `json:"explanation"`
}

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
