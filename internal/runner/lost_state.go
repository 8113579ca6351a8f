package runner

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads/budget"
)

// lostExamples is how many of the lost operations an explanation names.
const lostExamples = 5

// lostAccount names what is lost when the budget's final read found no account at all:
// the balance the run set up and every decrement acknowledged as applied (f.Applied),
// each of which took a unit from it. It names the last data-losing fault, the first few
// acknowledged decrements and the last one before the fault. With no such fault the
// account vanished by itself, which is as much a loss.
func lostAccount(f budget.Final, tl []results.ProcessFault, ops []histories.Op) []results.LostWrite {
	var fault *results.ProcessFault
	for i := range tl {
		if losesData(tl[i].Action) {
			fault = &tl[i]
		}
	}
	at := int64(-1)
	cause := "with no process fault before it"
	if fault != nil {
		at = int64(fault.StartS * 1e9)
		cause = fmt.Sprintf("after %s (%s of pid %d at %.2fs)", fault.Fault, fault.Action, fault.Pid, fault.StartS)
	}
	var acked []*histories.Op
	for i := range ops {
		op := &ops[i]
		var o budget.Outcome
		if op.IsClient() && op.F == "decrement" && op.Type == histories.OK && (at < 0 || op.Time < at) && json.Unmarshal(op.Value, &o) == nil && o.Applied {
			acked = append(acked, op)
		}
	}
	l := results.LostWrite{Count: f.Applied}
	if fault != nil {
		l.Fault = fault.Fault
	}
	l.Explanation = fmt.Sprintf("the account is gone %s: the final read found no balance at all, so the budget of %d the run set up and all %d decrements acknowledged as applied are lost", cause, f.Budget, f.Applied)
	if len(acked) > 0 {
		last := acked[len(acked)-1]
		l.OpID, l.Index = last.OpID, last.Index
		if at >= 0 {
			l.AckBeforeFaultS = secs(at - last.Time)
		}
		ids := make([]string, 0, lostExamples)
		for _, op := range acked[:min(lostExamples, len(acked))] {
			ids = append(ids, op.OpID)
		}
		l.Explanation += fmt.Sprintf(", from %s", strings.Join(ids, ", "))
		if n := len(acked) - len(ids); n > 1 {
			l.Explanation += fmt.Sprintf(" and %d more, to %s", n-1, last.OpID)
		} else if n == 1 {
			l.Explanation += fmt.Sprintf(" and %s", last.OpID)
		}
		if at >= 0 {
			l.Explanation += fmt.Sprintf(" (acknowledged %.3fs before the fault)", l.AckBeforeFaultS)
		}
	}
	return []results.LostWrite{l}
}
