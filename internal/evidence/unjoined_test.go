package evidence

import (
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// apply is an exactly-once operation from at to end, on conn ("" for none).
func apply(idx *int64, p int, id string, at, end int64, conn string) []histories.Op {
	inv := histories.Op{Index: *idx, Time: at, Process: p, Type: histories.Invoke, F: "apply", OpID: id, Conn: conn}
	ok := histories.Op{Index: *idx + 1, Time: end, Process: p, Type: histories.OK, F: "apply", OpID: id, Conn: conn}
	*idx += 2
	return []histories.Op{inv, ok}
}

func cutAt(at int64, conn string) FaultEvent {
	return FaultEvent{Time: at, Conn: conn, Kind: "commit-cut", Truth: "applied", Tag: "INSERT 0 1"}
}

// TestSequentialClientWithoutConnJoins: one client, one operation at a time, and no
// connection recorded anywhere: every fault joins the operation running at its time.
func TestSequentialClientWithoutConnJoins(t *testing.T) {
	var idx int64
	var ops []histories.Op
	ops = append(ops, apply(&idx, 0, "p-1", 100, 200, "")...)
	ops = append(ops, apply(&idx, 0, "p-2", 300, 400, "")...)
	events := []FaultEvent{cutAt(150, "c:1"), cutAt(350, "c:2"), cutAt(360, "c:3")}
	spans := SpansFromHistory(ops, events)
	ev, _ := Join(events, spans, ops, nil, false)
	if ev.Joined != 3 {
		t.Fatalf("joined %d of 3", ev.Joined)
	}
	if got := Unjoined(events, spans, ops); got != nil {
		t.Errorf("reasons for events that all joined: %q", got)
	}
}

// TestUnjoinedSaysWhy: one sentence per reason an event did not join, with its count.
func TestUnjoinedSaysWhy(t *testing.T) {
	var idx int64
	var concurrent []histories.Op
	a := apply(&idx, 0, "a", 100, 500, "")
	b := apply(&idx, 1, "b", 200, 600, "")
	concurrent = append(concurrent, a[0], b[0], a[1], b[1])
	var named []histories.Op
	named = append(named, apply(&idx, 0, "n-1", 100, 200, "c:1")...)
	named = append(named, apply(&idx, 0, "n-2", 300, 400, "c:2")...)
	for _, c := range []struct {
		name   string
		ops    []histories.Op
		events []FaultEvent
		want   []string // one substring per sentence, in order
	}{
		{"several in flight, no conn anywhere", concurrent, []FaultEvent{cutAt(300, "x:1"), cutAt(400, "x:2")},
			[]string{"2 events fell while several operations were in flight, on a connection the history does not name", "(this history names no connection at all)"}},
		{"outside every operation", named, []FaultEvent{cutAt(150, "c:1"), cutAt(50, "x:1"), cutAt(250, "x:2")},
			[]string{"2 events fell outside every operation"}},
		{"a named connection idle", named, []FaultEvent{cutAt(350, "c:1")},
			[]string{"1 event fell on a connection the history names, at a time none of the operations recorded on it was running"}},
		{"clocks that do not meet", named, []FaultEvent{cutAt(1_800_000_000_000_000_000, "c:1")},
			[]string{"none of the 1 fault events falls within the history's time", "from 0.000s to 0.000s", "2027-01-15"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spans := SpansFromHistory(c.ops, c.events)
			got := Unjoined(c.events, spans, c.ops)
			if len(got) != 1 {
				t.Fatalf("got %d sentences, want 1: %q", len(got), got)
			}
			for _, w := range c.want {
				if !strings.Contains(got[0], w) {
					t.Errorf("%q\nlacks %q", got[0], w)
				}
			}
		})
	}
}
