package results

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/counter"
)

// results.json read back gives the workload's typed final state, which writes the same
// JSON again; a file without a final section reads as none.
func TestResultsReadBack(t *testing.T) {
	bal, after := int64(3), int64(12)
	for _, r := range []*Results{
		{Verdict: checker.Valid, Workload: workloads.Budget, Final: budget.Final{Budget: 10, Balance: &bal, Applied: 7, Rejected: 2}},
		{Verdict: checker.Invalid, Workload: workloads.Counter, Final: counter.Final{Before: 0, After: &after, Acknowledged: 10, Extra: 2, Cause: "2 extra"}},
		{Verdict: checker.Valid, Workload: workloads.Register},
	} {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Results
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", r.Workload, err)
		}
		if r.Final == nil && back.Final != nil {
			t.Errorf("%s: final %#v, want none", r.Workload, back.Final)
		}
		again, _ := json.Marshal(&back)
		if !bytes.Equal(b, again) {
			t.Errorf("%s: read back and written again:\n%s\nwant\n%s", r.Workload, again, b)
		}
	}
	var bad Results
	if err := json.Unmarshal([]byte(`{"workload":"budget","final":{"applied":"many"}}`), &bad); err == nil {
		t.Errorf("a budget final with a string count was read without error")
	}
}
