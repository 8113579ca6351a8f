package report

import (
	"cmp"
	"fmt"
	"math"

	"github.com/indoubt/indoubt/internal/results"
)

// lostRow is one lost write as the report and the console show it.
type lostRow struct {
	results.LostWrite
	// Worker is the worker that issued OpID; AckAtS when it was acknowledged, in
	// seconds from the start of the run (nil when not known).
	Worker int
	AckAtS *float64
	// What says what was lost: "write 3 to k1", "1000 decrements".
	What string
}

// lostRows joins the lost writes to the faults they followed.
func lostRows(r *results.Results) []lostRow {
	start := map[string]float64{}
	for _, f := range r.ProcessFaults {
		start[f.Fault] = f.StartS
	}
	rows := make([]lostRow, 0, len(r.LostWrites))
	for _, l := range r.LostWrites {
		row := lostRow{LostWrite: l, Worker: -1}
		if l.OpID != "" {
			row.Worker = workerOf(l.OpID, -1)
			if s, ok := start[l.Fault]; ok {
				at := math.Round((s-l.AckBeforeFaultS)*1000) / 1000
				row.AckAtS = &at
			}
		}
		switch {
		case l.Count > 0:
			row.What = fmt.Sprintf("%d acknowledged writes", l.Count)
		case l.Key != "":
			row.What = fmt.Sprintf("wrote %s to %s", string(l.Value), l.Key)
		default:
			row.What = string(l.Value)
		}
		rows = append(rows, row)
	}
	return rows
}

// String is the lost write in one line: "op 6-3320 (worker 6): 2 to k0, acknowledged at
// 0.99s, 0.005s before kill@1s-2s".
func (l lostRow) String() string {
	if l.OpID == "" {
		return fmt.Sprintf("%s, after %s", l.What, cmp.Or(l.Fault, "no fault"))
	}
	s := fmt.Sprintf("op %s (worker %d): %s", l.OpID, l.Worker, l.What)
	if l.Count > 0 {
		s = fmt.Sprintf("%s, the last op %s (worker %d)", l.What, l.OpID, l.Worker)
	}
	if l.AckAtS != nil {
		s += fmt.Sprintf(", acknowledged at %.2fs", *l.AckAtS)
	}
	if l.Fault != "" {
		s += fmt.Sprintf(", %.3fs before %s", l.AckBeforeFaultS, l.Fault)
	}
	return s
}
