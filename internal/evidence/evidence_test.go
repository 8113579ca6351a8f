package evidence

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
	spans := []Span{
		{OpID: "0-0", Process: 0, Invoke: 0, Conn: "a:1", From: 10, To: 20, Class: workloads.ClassUnknown, Err: "conn closed"},
		{OpID: "1-0", Process: 1, Invoke: 1, Conn: "b:1", From: 10, To: 20, Class: workloads.ClassUnknown, Err: "conn closed"},
		{OpID: "2-0", Process: 2, Invoke: 2, Conn: "c:1", From: 10, To: 20, Class: workloads.ClassUnknown, Err: "EOF"},
	}
	events := []FaultEvent{
		{Time: 15, Conn: "a:1", Kind: "commit-cut", Truth: "applied", Tag: "UPDATE 1"},
		{Time: 15, Conn: "b:1", Kind: "commit-drop", Truth: "not-applied"},
		{Time: 15, Conn: "c:1", Kind: "commit-cut", Truth: "applied", Tag: "CALL"},
		{Time: 99, Conn: "a:1", Kind: "commit-cut", Truth: "applied", Tag: "UPDATE 1"}, // outside every attempt
	}
	bal := int64(6)
	final := budget.Final{Budget: 10, Balance: &bal, Applied: 2, Replayed: 1}
	ev, _ := Join(events, spans, ops, final, true)
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
	ev, _ = Join(events, spans, ops, final, true)
	if len(ev.Disagreements) != 1 || !strings.Contains(ev.Disagreements[0], "fell by 9") {
		t.Fatalf("disagreements: %v", ev.Disagreements)
	}
	// A definite classification after a commit fault is itself a disagreement.
	spans[1].Class = workloads.ClassDefinite
	ev, _ = Join(events, spans, ops, final, true)
	found := false
	for _, d := range ev.Disagreements {
		found = found || strings.Contains(d, "classified")
	}
	if !found {
		t.Errorf("a definite error after commit-drop was not flagged: %v", ev.Disagreements)
	}
}

// TestJoinBlackBox joins a history written by another program, without attempt
// spans, by connection and time: a payment retried on a fresh connection after the
// proxy cut its first connection after an UPDATE 1 applied twice; one whose retry
// found its idempotency key (replayed) did not; an event on a connection no operation
// was using at that time joins nothing.
func TestJoinBlackBox(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000_000)
	ops := []histories.Op{
		{Index: 0, Time: t0 + 10, Process: 0, Type: histories.Invoke, F: "apply", OpID: "p1", Conn: "127.0.0.1:40001"},
		{Index: 1, Time: t0 + 30, Process: 0, Type: histories.OK, F: "apply", OpID: "p1", Conn: "127.0.0.1:40002", Attempt: 2},
		{Index: 2, Time: t0 + 40, Process: 0, Type: histories.Invoke, F: "apply", OpID: "p2", Conn: "127.0.0.1:40002"},
		{Index: 3, Time: t0 + 60, Process: 0, Type: histories.OK, F: "apply", OpID: "p2", Conn: "127.0.0.1:40003", Value: []byte(`{"replayed":true}`)},
		{Index: 4, Time: t0 + 70, Process: 1, Type: histories.Invoke, F: "apply", OpID: "p3", Conn: "127.0.0.1:40004"},
		{Index: 5, Time: t0 + 80, Process: 1, Type: histories.Fail, F: "apply", OpID: "p3", Conn: "127.0.0.1:40004", Error: "server closed the connection unexpectedly"},
	}
	faults := `{"time":"2023-11-14T22:13:20.000000015Z","conn":"127.0.0.1:40001","kind":"commit-cut","truth":"applied","statement":"UPDATE accounts","tag":"UPDATE 1"}
{"window":"start","fault":"commit-cut"}
{"time":"2023-11-14T22:13:20.000000045Z","conn":"127.0.0.1:40002","kind":"commit-cut","truth":"applied","tag":"INSERT 0 1"}
{"time":"2023-11-14T22:13:20.000000075Z","conn":"127.0.0.1:40004","kind":"commit-drop","truth":"not-applied"}
{"time":"2023-11-14T22:13:20.000000095Z","conn":"127.0.0.1:40004","kind":"commit-cut","truth":"applied","tag":"UPDATE 1"}
`
	events, clock, err := ReadEvents(strings.NewReader(faults), "faults.jsonl")
	if err != nil || clock != WallClock || len(events) != 4 || events[0].Time != t0+15 {
		t.Fatalf("events %+v clock %v err %v", events, clock, err)
	}
	if err := CheckClock(ops, clock); err != nil {
		t.Fatal(err)
	}
	spans := SpansFromHistory(ops, events)
	if len(spans) != 5 { // p1 and p2 on two connections each, p3 on one
		t.Fatalf("spans %+v", spans)
	}
	ev, _ := Join(events, spans, ops, nil, true)
	if ev.Joined != 3 {
		t.Fatalf("joined %d, want 3: %+v", ev.Joined, ev.Ambiguous)
	}
	if len(ev.AppliedTwice) != 1 || ev.AppliedTwice[0].OpID != "p1" {
		t.Fatalf("applied twice %+v", ev.AppliedTwice)
	}
	if s := ev.Ambiguous[0].Sentence; !strings.Contains(s, "does not say what error") {
		t.Errorf("sentence %q", s)
	}
	// p3 was recorded as failed after a commit fault: the client claimed to know.
	if len(ev.Disagreements) != 1 || !strings.Contains(ev.Disagreements[0], "p3") {
		t.Errorf("disagreements %v", ev.Disagreements)
	}
	// Relative times cannot meet wall-clock events.
	ops[0].Time = 10
	if err := CheckClock(ops, clock); err == nil || !strings.Contains(err.Error(), "Unix nanoseconds") {
		t.Errorf("relative times: %v", err)
	}
	if _, _, err := ReadEvents(strings.NewReader("{\"kind\":\"commit-cut\"}\n"), "f"); err == nil {
		t.Error("an event without conn and time was accepted")
	}
	if _, _, err := ReadEvents(strings.NewReader("garbage\n"), "f"); err == nil || !strings.Contains(err.Error(), "f line 1") {
		t.Errorf("garbage: %v", err)
	}
	_, clock, _ = ReadEvents(strings.NewReader(`{"time":"2023-11-14T22:13:20Z","run_time":5,"conn":"a","kind":"commit-cut","truth":"applied"}`+"\n"), "f")
	if clock != RunClock {
		t.Errorf("run_time events: clock %v", clock)
	}
}

// TestJoinUnnamedConnection: attempts between the first and the last of an operation
// use connections the history does not name; their events join the operation running
// at the time when only one was, and nothing when two were.
func TestJoinUnnamedConnection(t *testing.T) {
	ops := []histories.Op{
		{Index: 0, Time: 100, Process: 0, Type: histories.Invoke, F: "apply", OpID: "p1", Conn: "c:1"},
		{Index: 1, Time: 400, Process: 0, Type: histories.OK, F: "apply", OpID: "p1", Conn: "c:4", Attempt: 4},
		{Index: 2, Time: 500, Process: 0, Type: histories.Invoke, F: "apply", OpID: "p2", Conn: "c:4"},
		{Index: 3, Time: 550, Process: 1, Type: histories.Invoke, F: "apply", OpID: "q1", Conn: "d:1"},
		{Index: 4, Time: 700, Process: 0, Type: histories.OK, F: "apply", OpID: "p2", Conn: "c:6", Attempt: 2},
		{Index: 5, Time: 800, Process: 1, Type: histories.OK, F: "apply", OpID: "q1", Conn: "d:1"},
	}
	cut := func(at int64, conn string) FaultEvent {
		return FaultEvent{Time: at, Conn: conn, Kind: "commit-cut", Truth: "applied", Tag: "INSERT 0 1"}
	}
	events := []FaultEvent{cut(150, "c:1"), cut(200, "c:2"), cut(300, "c:3"), cut(600, "c:5")}
	ev, _ := Join(events, SpansFromHistory(ops, events), ops, nil, true)
	if ev.Joined != 3 || len(ev.AppliedTwice) != 1 || !strings.Contains(ev.AppliedTwice[0].Sentence, "took effect 4 times") {
		t.Fatalf("joined %d, applied twice %+v", ev.Joined, ev.AppliedTwice)
	}
}
