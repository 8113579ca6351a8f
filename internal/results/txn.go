package results

import (
	"encoding/json"

	"github.com/indoubt/indoubt/checker"
)

// TxnCheck is what a transactional checker (list-append, rw-register) reported beside
// its anomalies, read from its Result's Details: how much it checked, which models the
// history rules out, and each cycle found as data, for the reports to draw.
type TxnCheck struct {
	// Transactions and Events are what the checker read; Edges the dependencies it
	// inferred.
	Transactions int   `json:"transactions"`
	Events       int64 `json:"events"`
	Edges        int   `json:"edges"`
	// Models are the consistency models the history was checked for.
	Models []string `json:"consistency_models,omitempty"`
	// Not are the weakest models the history violates; AlsoNot every other it rules
	// out. Empty when it violates none.
	Not     []string `json:"not,omitempty"`
	AlsoNot []string `json:"also_not,omitempty"`
	// AnomalyTypes are the kinds of anomaly found, Counts how many of each.
	AnomalyTypes []string       `json:"anomaly_types,omitempty"`
	Counts       map[string]int `json:"counts,omitempty"`
	// Cycles are the dependency cycles behind the anomalies, as the checker found them.
	Cycles []Cycle `json:"cycles,omitempty"`
}

// Cycle is one dependency cycle: its anomaly, its transactions (by the history index of
// their completion, in cycle order) and its edges.
type Cycle struct {
	Type  string      `json:"type"`
	Ops   []int64     `json:"ops"`
	Steps []CycleStep `json:"steps"`
}

// CycleStep is one edge of a cycle: From precedes To by Type, one of ww, wr, rw
// (dependencies on Key: Value is the version read or overwritten, Value2 the version
// written after it, both as JSON; FromMop and ToMop the micro-ops' positions, -1 for
// none), process (Process ran From, then To) or realtime (From completed before To was
// invoked).
type CycleStep struct {
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Type    string `json:"type"`
	Key     string `json:"key,omitempty"`
	Value   string `json:"value,omitempty"`
	Value2  string `json:"value2,omitempty"`
	FromMop int    `json:"from_mop"`
	ToMop   int    `json:"to_mop"`
	Process *int32 `json:"process,omitempty"`
}

// TxnCheckOf reads the transactional details of res, checked for models; nil for a
// result of another checker.
func TxnCheckOf(res checker.Result, models []string) *TxnCheck {
	if res.Checker != checker.ListAppendModel && res.Checker != checker.RWRegisterModel {
		return nil
	}
	t := &TxnCheck{Models: models}
	get := func(name string, into any) {
		if raw, ok := res.Details[name]; ok {
			_ = json.Unmarshal(raw, into) // the checker wrote it: a field it lacks stays empty
		}
	}
	get("transactions", &t.Transactions)
	get("events", &t.Events)
	get("edges", &t.Edges)
	get("not", &t.Not)
	get("also_not", &t.AlsoNot)
	get("anomaly_types", &t.AnomalyTypes)
	get("counts", &t.Counts)
	get("cycles", &t.Cycles)
	return t
}
