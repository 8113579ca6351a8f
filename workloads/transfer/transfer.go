// Package transfer is the model and final check of the distributed-transaction
// workloads: transfer (move 1 from one row to another) and two-rows (read two rows in
// one transaction, the Schism paper's workload), each with its rows on one server
// (local placement) or on two servers committed with two-phase commit (distributed).
//
// Every row starts at Initial. Each side of a transfer updates its row and, in the same
// local transaction, inserts a marker (the transfer's gid, the row) into the server's
// applied table, so that after the run the markers say which participants applied
// each transfer. The check then needs no search:
//
//   - the sum of all rows must equal rows × Initial (a transfer moves, never makes);
//   - a transfer's markers are on both of its sides or on neither: one side only is a
//     half-applied transfer, the failure two-phase commit exists to prevent;
//   - an acknowledged (ok) transfer is applied, a failed one is not; an unknown (info)
//     one may be either;
//   - no transaction may be left prepared on any server at the end.
//
// A read of the total that visits the servers one after another, without a global
// snapshot, can see a transfer committed on one server and not yet on the other. That
// is a fractured read. It is named and counted, but it does not make the run invalid:
// two-phase commit over independent PostgreSQL servers promises atomic commitment, not
// a snapshot across servers, and this check judges atomic commitment. (Jepsen would
// call the same read a violation of snapshot isolation, had the system claimed it.)
package transfer

import (
	"fmt"
	"sort"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
)

// Initial is every row's counter before the run.
const Initial = 100

// Placement says where the two rows of one transaction live.
type Placement string

// The placements.
const (
	// Local puts both rows on one server: a plain local transaction.
	Local Placement = "local"
	// Distributed puts the rows on two servers: two-phase commit through the
	// coordinator.
	Distributed Placement = "distributed"
)

// ParsePlacement returns the placement named s.
func ParsePlacement(s string) (Placement, error) {
	return choice.Parse("placement", Placement(s), Local, Distributed)
}

// Outcome is what the client was told of one transfer, as in a history: ok (took
// effect), fail (certainly did not), info (unknown).
type Outcome string

// The outcomes.
const (
	OK   Outcome = "ok"
	Fail Outcome = "fail"
	Info Outcome = "info"
)

// Attempt is one transfer as the client saw it.
type Attempt struct {
	GID     string  `json:"gid"`
	From    int     `json:"from"`
	To      int     `json:"to"`
	Outcome Outcome `json:"outcome"`
}

// Observed is what the run saw: the client's attempts and reads, and the servers'
// state read back after the run and its recovery.
type Observed struct {
	Rows     int
	Attempts []Attempt
	// Markers holds, per gid, the rows whose side of the transfer applied (from every
	// server's applied table).
	Markers map[string][]int
	// Total is the sum of every row on every server.
	Total int64
	// Reads are the totals the in-run reads saw.
	Reads []int64
	// Prepared lists "gid@server" for each transaction still prepared at the end.
	Prepared []string
}

// Anomaly names one kind of finding.
type Anomaly string

// The anomalies.
const (
	// HalfApplied: a transfer applied on one participant and not on the other.
	HalfApplied Anomaly = "half-applied-transfer"
	// LostTransfer: an acknowledged transfer applied on neither side.
	LostTransfer Anomaly = "lost-transfer"
	// FailedButApplied: a transfer the client was told failed, applied anyway.
	FailedButApplied Anomaly = "failed-transfer-applied"
	// TotalChanged: the sum of the rows is not rows × Initial.
	TotalChanged Anomaly = "total-not-conserved"
	// LeftPrepared: a transaction still prepared on a server after the run.
	LeftPrepared Anomaly = "left-prepared"
	// FracturedRead: a read across servers saw part of a transfer (not invalid; see
	// the package documentation).
	FracturedRead Anomaly = "fractured-read"
)

// Final is the final state of a transfer or two-rows run: the `final` section of its
// results.json.
type Final struct {
	Valid    bool  `json:"valid"`
	Rows     int   `json:"rows"`
	Expected int64 `json:"expected_total"`
	Total    int64 `json:"total"`
	// Applied, Rejected and Unknown count the transfers by client outcome.
	Applied  int64 `json:"applied"`
	Rejected int64 `json:"rejected"`
	Unknown  int64 `json:"unknown"`
	// UnknownApplied counts the unknown transfers the markers show applied.
	UnknownApplied int64 `json:"unknown_applied"`
	// Anomalies counts findings by kind; Examples holds up to five per kind.
	Anomalies map[Anomaly]int      `json:"anomalies,omitempty"`
	Examples  map[Anomaly][]string `json:"examples,omitempty"`
}

var _ workloads.Final = Final{}

// Check judges what was observed. Every anomaly but FracturedRead makes it invalid.
func Check(o Observed) Final {
	f := Final{Rows: o.Rows, Expected: int64(o.Rows) * Initial, Total: o.Total,
		Anomalies: map[Anomaly]int{}, Examples: map[Anomaly][]string{}}
	add := func(a Anomaly, example string) {
		f.Anomalies[a]++
		if len(f.Examples[a]) < 5 {
			f.Examples[a] = append(f.Examples[a], example)
		}
	}
	if f.Total != f.Expected {
		add(TotalChanged, fmt.Sprintf("total %d, want %d", f.Total, f.Expected))
	}
	seen := map[string]bool{}
	for _, a := range o.Attempts {
		seen[a.GID] = true
		sides := sidesApplied(o.Markers[a.GID], a)
		switch {
		case sides == 1:
			add(HalfApplied, fmt.Sprintf("%s: %d -> %d applied on row %v only (client: %s)", a.GID, a.From, a.To, o.Markers[a.GID], a.Outcome))
			continue
		case a.Outcome == OK && sides == 0:
			add(LostTransfer, fmt.Sprintf("%s: acknowledged, applied on neither row", a.GID))
		case a.Outcome == Fail && sides == 2:
			add(FailedButApplied, fmt.Sprintf("%s: reported failed, applied on both rows", a.GID))
		}
		switch a.Outcome {
		case OK:
			f.Applied++
		case Fail:
			f.Rejected++
		case Info:
			f.Unknown++
			if sides == 2 {
				f.UnknownApplied++
			}
		}
	}
	gids := make([]string, 0, len(o.Markers))
	for gid := range o.Markers {
		if !seen[gid] {
			gids = append(gids, gid)
		}
	}
	sort.Strings(gids)
	for _, gid := range gids {
		add(FailedButApplied, fmt.Sprintf("%s: applied but never invoked", gid))
	}
	for _, p := range o.Prepared {
		add(LeftPrepared, p)
	}
	for _, r := range o.Reads {
		if r != f.Expected {
			add(FracturedRead, fmt.Sprintf("read total %d, want %d", r, f.Expected))
		}
	}
	f.Valid = true
	for a := range f.Anomalies {
		if a != FracturedRead {
			f.Valid = false
		}
	}
	return f
}

// sidesApplied counts the sides of a whose markers are present (0, 1 or 2).
func sidesApplied(rows []int, a Attempt) int {
	n := 0
	for _, r := range rows {
		if r == a.From || r == a.To {
			n++
		}
	}
	return n
}

// Reconcile returns f unchanged: the proxy's cuts at PREPARE TRANSACTION and COMMIT
// PREPARED are resolved by recovery before the markers are read, so the markers
// already are the ground truth of every transfer.
func (f Final) Reconcile(workloads.Truth) (workloads.Final, []string) { return f, nil }

// Figures shows the transfers applied and rejected and the final total.
func (f Final) Figures() workloads.Figures {
	applied, rejected, total := f.Applied+f.UnknownApplied, f.Rejected, f.Total
	return workloads.Figures{Applied: &applied, Rejected: &rejected, Value: &total}
}
