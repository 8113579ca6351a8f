package evidence

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/rundir"
)

// TestRequestClaims: a cut 201 whose key the final state holds twice was handled twice;
// one the client saw replayed and the final state holds once was a replay; a key the
// final state holds once without a replayed reply, a drop, and a request without a
// key get no sentence.
func TestRequestClaims(t *testing.T) {
	apply := func(i int64, typ histories.Type, id, value string) histories.Op {
		o := op(i, int(i), typ, id, value)
		o.F = "apply"
		return o
	}
	ops := []histories.Op{
		apply(0, histories.Invoke, "p-1", ""), apply(1, histories.Invoke, "p-2", ""), apply(2, histories.Invoke, "p-3", ""),
		apply(3, histories.Invoke, "p-4", ""), apply(4, histories.Invoke, "p-5", ""),
		apply(5, histories.OK, "p-1", `{"payment":1,"replayed":false}`),
		apply(6, histories.OK, "p-2", `{"payment":2,"replayed":true}`),
		apply(7, histories.OK, "p-3", `{"payment":3,"replayed":false}`),
		apply(8, histories.OK, "p-4", `{"payment":4,"replayed":true}`),
		apply(9, histories.OK, "p-5", `{"payment":5,"replayed":false}`),
		{Index: 10, Process: 9, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)},
		{Index: 11, Process: 9, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: []byte(`{"p-1":2,"p-2":1,"p-3":1,"p-4":3,"p-5":3}`)},
	}
	post := func(key string, status int) *toxics.Request {
		return &toxics.Request{Method: "POST", Path: "/payments", IdempotencyKey: key, Status: status}
	}
	cut := func(r *toxics.Request) FaultEvent {
		return FaultEvent{Kind: "commit-cut", Truth: "applied", Request: r}
	}
	events := []FaultEvent{
		cut(post("p-1", 201)),
		cut(post("p-2", 201)),
		cut(post("p-3", 201)), // held once, not replayed: no proof of either
		{Kind: "commit-drop", Truth: "not-applied", Request: post("p-4", 0)},
		cut(post("p-5", 201)), cut(post("p-5", 201)),
		cut(post("", 201)),
	}
	got := requestClaims(events, ops, finalCounts(ops))
	want := []string{
		"request p-1 was handled twice: its first response was cut after the service answered 201 (POST /payments)",
		"request p-2: its first response was cut after the service answered 201; the retry was answered from the key's stored response (a replay)",
		"request p-5 was handled 3 times: 2 of its responses were cut, the first after the service answered 201 (POST /payments)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("requestClaims:\n got %q\nwant %q", got, want)
	}
	// Without a final state the client's replayed reply alone proves the replay; nothing
	// proves a key handled twice.
	got = requestClaims(events, ops[:10], finalCounts(ops[:10]))
	want = []string{
		"request p-2: its first response was cut after the service answered 201; the retry was answered from the key's stored response (a replay)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("without a final state:\n got %q\nwant %q", got, want)
	}
	// Join puts them in the evidence.
	ev, _ := Join(events, nil, ops, nil, true)
	if len(ev.Requests) != 3 {
		t.Errorf("Join: requests %q, want the 3 sentences", ev.Requests)
	}
}

// TestEventsOfCarryTheRequest: a faults.jsonl line's request reaches the evidence.
func TestEventsOfCarryTheRequest(t *testing.T) {
	line := `{"time":"2026-01-02T15:04:05Z","run_time":7,"conn":"127.0.0.1:5","conn_index":0,"protocol":"http","kind":"commit-cut","truth":"applied","tag":"HTTP/1.1 201 Created","request":{"method":"POST","path":"/payments","idempotency_key":"p-1","status":201}}`
	var l rundir.FaultLine
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Fatal(err)
	}
	evs, _ := EventsOf([]rundir.FaultLine{l})
	want := toxics.Request{Method: "POST", Path: "/payments", IdempotencyKey: "p-1", Status: 201}
	if len(evs) != 1 || evs[0].Request == nil || *evs[0].Request != want {
		t.Fatalf("events %+v, want one with request %+v", evs, want)
	}
}
