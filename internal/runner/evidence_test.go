package runner

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

func TestEffectOf(t *testing.T) {
	for tag, want := range map[string]effect{
		"UPDATE 1": effectRows, "UPDATE 0": effectNone, "INSERT 0 3": effectRows, "DELETE 0": effectNone,
		"RESULT Rows [applied]=true": effectRows, "RESULT Rows [applied]=false": effectNone, "RESULT Void": effectUnknown,
		"COMMIT": effectUnknown, "CALL": effectUnknown, "": effectUnknown, "UPDATE x": effectUnknown, "SELECT 1": effectUnknown,
	} {
		if got := effectOf(tag); got != want {
			t.Errorf("effectOf(%q) = %v, want %v", tag, got, want)
		}
	}
}

// op builds a history event.
func op(i int64, p int, typ histories.Type, id string, value string) histories.Op {
	o := histories.Op{Index: i, Process: p, Type: typ, F: "decrement", OpID: id}
	if value != "" {
		o.Value = []byte(value)
	}
	return o
}

func TestJoinEvidence(t *testing.T) {
	ops := []histories.Op{
		op(0, 0, histories.Invoke, "0-0", ""),
		op(1, 1, histories.Invoke, "1-0", ""),
		op(2, 2, histories.Invoke, "2-0", ""),
		op(3, 0, histories.OK, "0-0", `{"applied":true,"balance":-1}`),                // cut with UPDATE 1, retried, applied again
		op(4, 1, histories.Info, "1-0", ""),                                           // dropped
		op(5, 2, histories.OK, "2-0", `{"applied":true,"balance":7,"replayed":true}`), // cut with CALL, replayed
	}
	spans := []attemptSpan{
		{OpID: "0-0", Process: 0, Invoke: 0, Conn: "a:1", From: 10, To: 20, Class: workloads.ClassUnknown, Err: "conn closed"},
		{OpID: "1-0", Process: 1, Invoke: 1, Conn: "b:1", From: 10, To: 20, Class: workloads.ClassUnknown, Err: "conn closed"},
		{OpID: "2-0", Process: 2, Invoke: 2, Conn: "c:1", From: 10, To: 20, Class: workloads.ClassUnknown, Err: "EOF"},
	}
	events := []faultEvent{
		{Time: 15, Conn: "a:1", Kind: "commit-cut", Truth: "applied", Tag: "UPDATE 1"},
		{Time: 15, Conn: "b:1", Kind: "commit-drop", Truth: "not-applied"},
		{Time: 15, Conn: "c:1", Kind: "commit-cut", Truth: "applied", Tag: "CALL"},
		{Time: 99, Conn: "a:1", Kind: "commit-cut", Truth: "applied", Tag: "UPDATE 1"}, // outside every attempt
	}
	bal := int64(6)
	final := budget.Final{Budget: 10, Balance: &bal, Applied: 2, Replayed: 1}
	ev, _ := joinEvidence(events, spans, ops, final, true)
	if ev.Events != 4 || ev.Joined != 3 || len(ev.Ambiguous) != 3 {
		t.Fatalf("events %d joined %d ambiguous %d", ev.Events, ev.Joined, len(ev.Ambiguous))
	}
	if len(ev.AppliedTwice) != 1 || ev.AppliedTwice[0].OpID != "0-0" {
		t.Fatalf("applied twice: %+v (want only 0-0: the CALL cut proves a commit, not an effect)", ev.AppliedTwice)
	}
	// The balance fell by 4: 2 acknowledged (1 of them replayed) + 1 proven cut + at most
	// 1 from the CALL cut = between 2 and 4: no disagreement.
	if len(ev.Disagreements) != 0 {
		t.Fatalf("disagreements: %v", ev.Disagreements)
	}
	bal = 1 // fell by 9: more than anything accounts for
	final.Balance = &bal
	ev, _ = joinEvidence(events, spans, ops, final, true)
	if len(ev.Disagreements) != 1 || !strings.Contains(ev.Disagreements[0], "fell by 9") {
		t.Fatalf("disagreements: %v", ev.Disagreements)
	}
	// A definite classification after a commit fault is itself a disagreement.
	spans[1].Class = workloads.ClassDefinite
	ev, _ = joinEvidence(events, spans, ops, final, true)
	found := false
	for _, d := range ev.Disagreements {
		found = found || strings.Contains(d, "classified")
	}
	if !found {
		t.Errorf("a definite error after commit-drop was not flagged: %v", ev.Disagreements)
	}
}
