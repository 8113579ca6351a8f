package evidence

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
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
	// p1's cut proves one commit that changed a row; its acknowledged retry's reply
	// says nothing, and the history has no final state: a second application is
	// possible, never claimed. p2's retry says it was replayed.
	if len(ev.AppliedTwice) != 0 || len(ev.CommittedTwice) != 1 || ev.CommittedTwice[0].OpID != "p1" ||
		!strings.Contains(ev.CommittedTwice[0].Sentence, "a second application is possible, not proven") {
		t.Fatalf("applied twice %+v, committed %+v", ev.AppliedTwice, ev.CommittedTwice)
	}
	if len(ev.Replays) != 1 || ev.Replays[0].OpID != "p2" {
		t.Fatalf("replays %+v", ev.Replays)
	}
	// With the final state in the history, its count is the proof: p1 twice, p2 once.
	withFinal := append(append([]histories.Op(nil), ops...),
		histories.Op{Index: 6, Time: t0 + 90, Process: 9, Type: histories.Invoke, F: "read", OpID: "final"},
		histories.Op{Index: 7, Time: t0 + 91, Process: 9, Type: histories.OK, F: "read", OpID: "final", Value: []byte(`{"p1":2,"p2":1}`)})
	ev2, _ := Join(events, SpansFromHistory(withFinal, events), withFinal, nil, true)
	if len(ev2.AppliedTwice) != 1 || ev2.AppliedTwice[0].OpID != "p1" || ev2.AppliedTwice[0].Times != 2 || ev2.AppliedTwice[0].Proof != "final-state" ||
		!strings.Contains(ev2.AppliedTwice[0].Sentence, "is present 2 times in the final state") {
		t.Fatalf("applied twice with the final state: %+v", ev2.AppliedTwice)
	}
	if len(ev2.Replays) != 1 || ev2.Replays[0].OpID != "p2" {
		t.Fatalf("replays with the final state %+v", ev2.Replays)
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
	// Three cuts whose replies show a row inserted prove three applications; whether
	// the acknowledged fourth attempt inserted again the history does not say.
	if ev.Joined != 3 || len(ev.AppliedTwice) != 1 || !strings.Contains(ev.AppliedTwice[0].Sentence, "took effect at least 3 times") {
		t.Fatalf("joined %d, applied twice %+v", ev.Joined, ev.AppliedTwice)
	}
}

// Each claim the evidence makes, with the proof it rests on, and none without one.
func TestClaimsNeedTheirProof(t *testing.T) {
	no, yes := false, true
	cut := func(at int64, tag string, wrote *bool) FaultEvent {
		return FaultEvent{Time: at, Conn: "c:1", Kind: "commit-cut", Truth: "applied", Tag: tag, Wrote: wrote}
	}
	type want struct{ list, sentence string }
	for _, tc := range []struct {
		name   string
		events []FaultEvent
		comp   histories.Op // the completion of the one operation, at time 100
		final  string       // an exactly-once final read's value, "" for none
		want   want
	}{
		{"a cut that changed a row, acknowledged with a change", []FaultEvent{cut(10, "UPDATE 1", nil)},
			histories.Op{Type: histories.OK, Value: []byte(`{"applied":true,"balance":3}`)}, "",
			want{"applied", "took effect 2 times: the proxy cut an attempt after its commit changed rows (UPDATE 1), and the attempt that was acknowledged reports changing it again"}},
		{"every attempt cut, none acknowledged", []FaultEvent{cut(10, "UPDATE 1", nil), cut(30, "UPDATE 1", nil)},
			histories.Op{Type: histories.Info, Error: "conn closed"}, "",
			want{"applied", "took effect at least 2 times: the proxy cut 2 attempts after their commits changed rows (UPDATE 1); no attempt was acknowledged: it ended info"}},
		{"a read-only transaction's COMMIT cut", []FaultEvent{cut(10, "COMMIT", &no)},
			histories.Op{Type: histories.OK, Value: []byte(`{"applied":true}`)}, "", want{}},
		{"a COMMIT that wrote, retried and acknowledged", []FaultEvent{cut(10, "COMMIT", &yes)},
			histories.Op{Type: histories.OK}, "",
			want{"committed", "the proxy cut an attempt after its commit applied (COMMIT); it was retried and acknowledged (1 earlier attempt(s) recorded), and what the retry changed neither its reply nor the final state shows: a second application is possible, not proven"}},
		{"a cut COMMIT, acknowledged with no other attempt in the history", []FaultEvent{cut(10, "COMMIT", &yes)},
			histories.Op{Type: histories.OK, Failed: []histories.FailedAttempt{}}, "",
			want{"committed", "it was acknowledged afterwards, though the history records no other attempt, and what the operation after the cut changed neither its reply nor the final state shows"}},
		{"a retry that met the duplicate key", []FaultEvent{cut(10, "INSERT 0 1", nil)},
			histories.Op{Type: histories.OK, Failed: []histories.FailedAttempt{
				{Conn: "c:1", Start: 5, End: 20, Error: "unexpected EOF", Class: "unknown"},
				{Conn: "c:2", Start: 40, End: 50, Error: `ERROR: duplicate key value violates unique constraint "orders_pkey" (SQLSTATE 23505)`, Class: "definite"}}}, "",
			want{"replayed", "the acknowledged retry changed nothing, a retry met the unique key the first commit wrote (duplicate key): a replay, not a second application"}},
		{"a retry that says it was replayed", []FaultEvent{cut(10, "CALL", nil)},
			histories.Op{Type: histories.OK, Value: []byte(`{"applied":true,"replayed":true}`)}, "",
			want{"replayed", `its reply says so ({"applied":true,"replayed":true})`}},
		{"a cut that changed nothing", []FaultEvent{cut(10, "UPDATE 0", nil)},
			histories.Op{Type: histories.OK}, "", want{}},
		{"the final state holds it once", []FaultEvent{cut(10, "INSERT 0 1", nil)},
			histories.Op{Type: histories.OK}, `{"p-1":1}`,
			want{"replayed", "the final state holds it once: the retry changed nothing, a replay"}},
		{"the final state of responses holds it twice", []FaultEvent{cut(10, "INSERT 0 1", nil)},
			histories.Op{Type: histories.OK}, `{"p-1":["order-1","order-2"]}`,
			want{"applied", "is present 2 times in the final state: it took effect 2 times"}},
		{"the final state of responses holds it once", []FaultEvent{cut(10, "INSERT 0 1", nil)},
			histories.Op{Type: histories.OK}, `{"p-1":["order-1"]}`,
			want{"replayed", "the final state holds it once"}},
		{"the final state holds it three times", []FaultEvent{cut(10, "COMMIT", nil)},
			histories.Op{Type: histories.OK}, `{"p-1":3}`,
			want{"applied", "is present 3 times in the final state: it took effect 3 times"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := "decrement"
			if tc.final != "" {
				f = "apply"
			}
			comp := tc.comp
			comp.Index, comp.Time, comp.Process, comp.F, comp.OpID, comp.Conn = 1, 100, 0, f, "p-1", "c:9"
			if comp.Failed == nil { // an empty, non-nil list keeps the operation without attempts
				comp.Failed = []histories.FailedAttempt{{Conn: "c:1", Start: 5, End: 35, Error: "unexpected EOF", Class: "unknown"}}
			}
			ops := []histories.Op{{Index: 0, Time: 0, Process: 0, Type: histories.Invoke, F: f, OpID: "p-1", Conn: "c:1"}, comp}
			if tc.final != "" {
				ops = append(ops, histories.Op{Index: 2, Time: 200, Process: 1, Type: histories.Invoke, F: "read", OpID: "final"},
					histories.Op{Index: 3, Time: 201, Process: 1, Type: histories.OK, F: "read", OpID: "final", Value: []byte(tc.final)})
			}
			ev, _ := Join(tc.events, SpansFromHistory(ops, tc.events), ops, nil, true)
			lists := map[string][]results.AmbiguousOp{"applied": ev.AppliedTwice, "committed": ev.CommittedTwice, "replayed": ev.Replays}
			for name, l := range lists {
				if name != tc.want.list && len(l) > 0 {
					t.Errorf("claims %s: %+v", name, l)
				}
			}
			if tc.want.list == "" {
				return
			}
			l := lists[tc.want.list]
			if len(l) != 1 || !strings.Contains(l[0].Sentence, tc.want.sentence) {
				t.Fatalf("%s: %+v, want a sentence with %q", tc.want.list, l, tc.want.sentence)
			}
			if comp.Type != histories.OK && strings.Contains(l[0].Sentence, "was acknowledged,") {
				t.Errorf("an operation never acknowledged is said to be: %q", l[0].Sentence)
			}
		})
	}
}

// A MongoDB reply's counts say what its write changed, as a PostgreSQL tag's do.
func TestMongoReplyEffect(t *testing.T) {
	for tag, want := range map[string]effect{
		`{n: 1, ok: 1}`:                  effectRows,
		`{n: 0, ok: 1}`:                  effectNone,
		`{n: 1, nModified: 1, ok: 1}`:    effectRows,
		`{n: 1, nModified: 0, ok: 1}`:    effectNone,
		`{n: 1, writeErrors: [], ok: 1}`: effectRows,
		`{lastErrorObject: {n: 1, updatedExisting: true}, value: {_id: "budget"}, ok: 1.0}`: effectRows,
		`{lastErrorObject: {n: 0, updatedExisting: false}, value: null, ok: 1.0}`:           effectNone,
		`{ok: 1}`:             effectUnknown,
		`{cursor: {id: 0, n`:  effectUnknown,
		`{lastErrorObject: {`: effectUnknown,
	} {
		if got := effectOf(tag); got != want {
			t.Errorf("%s: %v, want %v", tag, got, want)
		}
	}
}
