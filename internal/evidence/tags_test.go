package evidence

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// TestJoinExplicitTransactions joins cuts of explicit transactions, read from
// faults.jsonl lines as a run, exec and check read them, to a history of transfers
// with an exactly-once final state. t1 was cut after its transfer changed rows and
// retried naively: the final state holds it twice, and the sentence says it took
// effect twice with the statement tags as proof. t2 was cut, then its replay was cut
// after its INSERT ... ON CONFLICT DO NOTHING answered INSERT 0 0: a replay, never an
// application, and the replay's cut is not counted among the commits that applied.
func TestJoinExplicitTransactions(t *testing.T) {
	const t0 = int64(1_700_000_000_000_000_000)
	ops := []histories.Op{
		{Index: 0, Time: t0 + 10, Process: 0, Type: histories.Invoke, F: "apply", OpID: "t1", Conn: "127.0.0.1:1"},
		{Index: 1, Time: t0 + 30, Process: 0, Type: histories.OK, F: "apply", OpID: "t1", Conn: "127.0.0.1:2"},
		{Index: 2, Time: t0 + 40, Process: 0, Type: histories.Invoke, F: "apply", OpID: "t2", Conn: "127.0.0.1:2"},
		{Index: 3, Time: t0 + 70, Process: 0, Type: histories.OK, F: "apply", OpID: "t2", Conn: "127.0.0.1:4"},
		{Index: 4, Time: t0 + 80, Process: 9, Type: histories.OK, F: "read", Value: []byte(`{"t1":2,"t2":1}`)},
	}
	faults := `{"time":"2023-11-14T22:13:20.000000015Z","conn":"127.0.0.1:1","kind":"commit-cut","truth":"applied","statement":"commit","tag":"COMMIT","txn":{"seq":1,"wrote":true,"digest":"0123456789abcdef","text":"...","tags":["UPDATE 1","UPDATE 1","INSERT 0 1"],"changed":true}}
{"time":"2023-11-14T22:13:20.000000045Z","conn":"127.0.0.1:2","kind":"commit-cut","truth":"applied","statement":"commit","tag":"COMMIT","txn":{"seq":2,"wrote":true,"digest":"0123456789abcdef","text":"...","tags":["INSERT 0 1","UPDATE 1","UPDATE 1"],"changed":true}}
{"time":"2023-11-14T22:13:20.000000055Z","conn":"127.0.0.1:3","kind":"commit-cut","truth":"applied","statement":"commit","tag":"COMMIT","txn":{"seq":1,"wrote":false,"digest":"0123456789abcdef","text":"...","tags":["INSERT 0 0"],"changed":false}}
`
	events, clock, err := ReadEvents(strings.NewReader(faults), "faults.jsonl")
	if err != nil || clock != WallClock || len(events) != 3 {
		t.Fatalf("events %+v clock %v err %v", events, clock, err)
	}
	// t2's second attempt ran on a connection its history does not name: give the
	// spans as a recorder with attempts would.
	spans := []Span{
		{OpID: "t1", Invoke: 0, Conn: "127.0.0.1:1", From: t0 + 10, To: t0 + 20},
		{OpID: "t2", Invoke: 2, Conn: "127.0.0.1:2", From: t0 + 40, To: t0 + 50},
		{OpID: "t2", Invoke: 2, Conn: "127.0.0.1:3", From: t0 + 50, To: t0 + 60},
	}
	ev, _ := Join(events, spans, ops, nil, true)
	if len(ev.AppliedTwice) != 1 || ev.AppliedTwice[0].OpID != "t1" || ev.AppliedTwice[0].Times != 2 {
		t.Fatalf("applied twice %+v, want t1 twice", ev.AppliedTwice)
	}
	s := ev.AppliedTwice[0].Sentence
	for _, want := range []string{"took effect 2 times", "COMMIT after UPDATE 1, UPDATE 1, INSERT 0 1"} {
		if !strings.Contains(s, want) {
			t.Errorf("t1's sentence %q lacks %q", s, want)
		}
	}
	if len(ev.Replays) != 1 || ev.Replays[0].OpID != "t2" {
		t.Fatalf("replays %+v, want t2", ev.Replays)
	}
	if s := ev.Replays[0].Sentence; !strings.Contains(s, "cut an attempt after its commit applied") || strings.Contains(s, "INSERT 0 0") {
		t.Errorf("t2's sentence %q: one cut applied, the replay's is not among them", s)
	}
	for _, a := range ev.Ambiguous {
		if a.Conn == "127.0.0.1:3" && !strings.Contains(a.Sentence, "whose writes changed nothing (COMMIT after INSERT 0 0)") {
			t.Errorf("the replay's cut reads %q", a.Sentence)
		}
	}
	if c := Tally(events); c.Committed != 3 || c.ChangedRows != 2 || c.Unchanged != 1 || c.EffectUnseen != 0 {
		t.Errorf("tally %+v, want 3 committed: 2 changed rows, 1 changed nothing", c)
	}
}
