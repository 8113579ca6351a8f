package evidence_test

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/counter"
)

// The final section reconciles exactly and attributes an extra increment only to
// evidence.
func TestReconcileCounter(t *testing.T) {
	ptr := func(v int64) *int64 { return &v }
	tests := []struct {
		name                string
		f                   counter.Final
		cuts                int
		lost, extra         int64
		causeHas, causeLack string
	}{
		{name: "exact", f: counter.Final{Before: 10, After: ptr(15), Acknowledged: 5}},
		{name: "silently lost", f: counter.Final{After: ptr(76), Acknowledged: 1209, SameValueWrites: 1133},
			lost: 1133, causeHas: "silently lost: 1133 of 1209"},
		{name: "extra without evidence", f: counter.Final{After: ptr(1293), Acknowledged: 1292, Unknown: 1},
			extra: 1, causeHas: "cause not established", causeLack: "attributed"},
		{name: "extra with 40003", f: counter.Final{After: ptr(1293), Acknowledged: 1292, Unknown: 1, EvidenceServerUnknown: 1},
			extra: 1, causeHas: "1 of 1 extra attributed to ambiguous commits", causeLack: "not established"},
		{name: "extra with an applied cut", f: counter.Final{After: ptr(12), Acknowledged: 10, Unknown: 2}, cuts: 1,
			extra: 2, causeHas: "1 of 2 extra attributed", causeLack: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var truth evidence.Truth
			for range tc.cuts {
				truth.Applied = append(truth.Applied, "1-1")
			}
			final, dis := evidence.Reconcile(tc.f, truth)
			got := final.(counter.Final)
			if len(dis) != 0 {
				t.Errorf("disagreements %v: the counter states its cause in Cause", dis)
			}
			if got.Lost != tc.lost || got.Extra != tc.extra {
				t.Errorf("lost %d extra %d, want %d %d", got.Lost, got.Extra, tc.lost, tc.extra)
			}
			if tc.causeHas == "" && got.Cause != "" {
				t.Errorf("cause %q for an exact count", got.Cause)
			}
			if !strings.Contains(got.Cause, tc.causeHas) || (tc.causeLack != "" && strings.Contains(got.Cause, tc.causeLack)) {
				t.Errorf("cause %q", got.Cause)
			}
		})
	}
}

// A budget's balance must have fallen by what the acknowledgements and the cuts account
// for; outside that range, a sentence says by how much and what accounts for it.
func TestReconcileBudget(t *testing.T) {
	ptr := func(v int64) *int64 { return &v }
	f := budget.Final{Budget: 100, Balance: ptr(90), Applied: 8}
	if _, dis := evidence.Reconcile(f, evidence.Truth{Proven: 2}); len(dis) != 0 {
		t.Errorf("8 acknowledged and 2 proven cuts account for a fall of 10: %v", dis)
	}
	_, dis := evidence.Reconcile(f, evidence.Truth{})
	if len(dis) != 1 || !strings.Contains(dis[0], "the balance fell by 10") || !strings.Contains(dis[0], "between 8 and 8") {
		t.Errorf("a fall of 10 with 8 acknowledged and no cut: %v", dis)
	}
	if _, dis := evidence.Reconcile(budget.Final{Budget: 100}, evidence.Truth{}); dis != nil {
		t.Errorf("no balance read, nothing to reconcile: %v", dis)
	}
}
