package transfer

import (
	"encoding/json"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// Final is the final state of a transfer or two-rows run: the `final` section of its
// results.json, counted from the history. It holds figures, not a verdict: the checker
// decides (checker.CheckTransfer) from the same history.
type Final struct {
	Rows     int   `json:"rows"`
	Expected int64 `json:"expected_total"`
	// Total is the sum of every row in the final read, after recovery; nil when the
	// history has no final read.
	Total *int64 `json:"total"`
	// Applied, Rejected and Unknown count the transfers by what the client was told;
	// UnknownApplied counts the unknown ones whose markers are on both rows.
	Applied        int64 `json:"applied"`
	Rejected       int64 `json:"rejected"`
	Unknown        int64 `json:"unknown"`
	UnknownApplied int64 `json:"unknown_applied"`
	// Reads counts the reads that completed ok: of the total (transfer) or of two rows
	// (two-rows); FracturedReads those of the total that saw part of a transfer.
	Reads          int64 `json:"reads"`
	FracturedReads int64 `json:"fractured_reads"`
	// LeftPrepared counts the transactions still prepared after recovery.
	LeftPrepared int `json:"left_prepared"`
}

var _ workloads.Final = Final{}

// Summary counts the transfers, the reads and the final state in the history.
func (w *Workload) Summary(ops []histories.Op) workloads.Final {
	f := Final{Rows: w.Rows, Expected: int64(w.Rows) * Initial}
	outcome := map[string]histories.Type{} // op id of each transfer -> its completion
	var order []string
	rows := map[string][2]string{}
	marks := map[string]int{} // op id -> markers on its own two rows
	var markers []map[string][]string
	open := map[int]string{} // process -> op id of its open transfer
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		switch {
		case op.F == FTransfer && op.Type == histories.Invoke:
			var t checker.Transfer
			if json.Unmarshal(op.Value, &t) == nil {
				rows[op.OpID] = [2]string{t.From, t.To}
			}
			outcome[op.OpID] = histories.Info // open until completed
			order = append(order, op.OpID)
			open[op.Process] = op.OpID
		case op.F == FTransfer:
			if id, ok := open[op.Process]; ok {
				outcome[id] = op.Type
				delete(open, op.Process)
			}
		case op.F == FTotal && op.Type == histories.OK:
			f.Reads++
			var t int64
			if json.Unmarshal(op.Value, &t) == nil && t != f.Expected {
				f.FracturedReads++
			}
		case op.F == FRows && op.Type == histories.OK:
			f.Reads++
		case op.F == FRead && op.Type == histories.OK:
			var bal checker.Balances
			if json.Unmarshal(op.Value, &bal) == nil {
				var t int64
				for _, v := range bal {
					t += v
				}
				f.Total = &t
			}
		case op.F == FApplied && op.Type == histories.OK:
			var m map[string][]string
			if json.Unmarshal(op.Value, &m) == nil {
				markers = append(markers, m)
			}
		case op.F == FPrepared && op.Type == histories.OK:
			var p []string
			if json.Unmarshal(op.Value, &p) == nil {
				f.LeftPrepared = len(p)
			}
		}
	}
	for _, m := range markers {
		for id, rs := range m {
			for _, r := range rs {
				if r == rows[id][0] || r == rows[id][1] {
					marks[id]++
				}
			}
		}
	}
	for _, id := range order {
		switch outcome[id] {
		case histories.OK:
			f.Applied++
		case histories.Fail:
			f.Rejected++
		default:
			f.Unknown++
			if marks[id] == 2 {
				f.UnknownApplied++
			}
		}
	}
	return f
}

// Figures shows the transfers applied and rejected and the final total.
func (f Final) Figures() workloads.Figures {
	applied, rejected := f.Applied+f.UnknownApplied, f.Rejected
	return workloads.Figures{Applied: &applied, Rejected: &rejected, Value: f.Total}
}
