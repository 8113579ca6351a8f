package checker

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/outages"
)

// partition adds a partition's two nemesis events, as the runner records them.
func (h *lostHist) partition(spec string, from, to int64) *lostHist {
	g := map[string]any{"fault": spec, "shape": "isolate-primary", "primary": "n1",
		"grudge": map[string][]string{"n1": {"n2"}, "n2": {"n1"}}, "reach": map[string][]string{"n1": {"n1"}, "n2": {"n2"}},
		"components": [][]string{{"n1"}, {"n2"}}, "nodes": map[string]string{"n1": "198.18.0.11", "n2": "198.18.0.12"},
		"clients": map[string]string{"n1": "198.18.0.101", "n2": "198.18.0.102"}}
	heal := map[string]any{"fault": spec, "grudge": map[string][]string{}}
	h.ops = append(h.ops, histories.Op{Index: int64(len(h.ops)), Time: from, Process: histories.Nemesis, Type: histories.Info, F: outages.PartitionAction, Value: histories.Value(g)})
	h.ops = append(h.ops, histories.Op{Index: int64(len(h.ops)), Time: to, Process: histories.Nemesis, Type: histories.Info, F: outages.HealAction, Value: histories.Value(heal)})
	return h
}

// Decrements acknowledged during a partition and missing from the final balance are
// lost writes of the partition when no process fault came after it, and of the
// failover when the harness made one inside it.
func TestLostWritesAfterAPartition(t *testing.T) {
	hdr := &histories.Header{Model: "budget", Params: map[string]json.RawMessage{"budget": []byte("10")}}
	build := func(failover bool) *lostHist {
		h := new(lostHist)
		h.add(0, 0, histories.Invoke, "decrement", "0-0", "").add(1, 0, histories.OK, "decrement", "0-0", `{"applied":true,"balance":9}`)
		if failover {
			h.ops = append(h.ops, histories.Op{Index: int64(len(h.ops)), Time: sec / 2, Process: histories.Nemesis, Type: histories.Info, F: outages.PartitionAction,
				Value: histories.Value(map[string]any{"fault": "partition:isolate-primary@0.5s-3s", "shape": "isolate-primary", "grudge": map[string][]string{"n1": {"n2"}}})})
		} else {
			h.partition("partition:isolate-primary@0.5s-3s", sec/2, 3*sec)
		}
		for i := 1; i <= 3; i++ {
			id := "0-" + string(rune('0'+i))
			h.add(sec+int64(i), 0, histories.Invoke, "decrement", id, "").add(sec+int64(i)+1, 0, histories.OK, "decrement", id, `{"applied":true,"balance":8}`)
		}
		if failover {
			h.fault("failover@2s", "failover", "promoted", 2*sec, 2*sec+1)
		}
		return h.add(4*sec, 9, histories.Invoke, "read", "final-0", "").add(4*sec+1, 9, histories.OK, "read", "final-0", `{"balance":9}`)
	}
	for _, tc := range []struct {
		name      string
		failover  bool
		fault     string
		explain   string
		processes int
	}{
		{"the partition alone", false, "partition:isolate-primary@0.5s-3s", "after partition:isolate-primary@0.5s-3s (partition isolate-primary (primary n1) at 0.50s); 3 decrements were acknowledged while it lasted (0.50s to 3.00s)", 0},
		{"a failover inside it", true, "failover@2s", "after failover@2s (failover of pid 42 at 2.00s)", 1},
	} {
		h := build(tc.failover)
		res, err := Check(context.Background(), hdr, h.ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != Invalid || len(res.LostWrites) != 1 {
			t.Fatalf("%s: %v %s %+v", tc.name, res.Verdict, res.Summary, res.LostWrites)
		}
		// The budget's own check finds the balance too high first: its summary leads,
		// and the lost write names the fault.
		if l := res.LostWrites[0]; l.Count != 3 || l.Fault != tc.fault || !strings.Contains(l.Explanation, tc.explain) {
			t.Errorf("%s: %+v, want %q in the explanation", tc.name, l, tc.explain)
		}
		// A partition is no process fault: the process timeline does not list it.
		if got := len(outages.ProcessFaults(h.ops)); got != tc.processes {
			t.Errorf("%s: %d process faults, want %d", tc.name, got, tc.processes)
		}
	}
}

func TestPartitions(t *testing.T) {
	h := new(lostHist).partition("partition:isolate-primary@1s-2s", sec, 2*sec).partition("partition:isolate-primary@3s-4s", 3*sec, 4*sec)
	ps := outages.Partitions(h.ops)
	if len(ps) != 2 || ps[0].Start != sec || ps[0].End != 2*sec || ps[1].Start != 3*sec || ps[1].End != 4*sec {
		t.Fatalf("partitions %+v", ps)
	}
	if want := map[string][]string{"n1": {"n1"}, "n2": {"n2"}}; !reflect.DeepEqual(ps[0].Reach, want) {
		t.Errorf("reach %v, want %v", ps[0].Reach, want)
	}
	if ps[0].Clients["n2"] != "198.18.0.102" || ps[0].Shape != "isolate-primary" {
		t.Errorf("partition %+v", ps[0])
	}
}

// A register write acknowledged during a partition by the side that lost, and a read
// after the heal that returns the value before it: the write is lost.
func TestLostRegisterWriteInAPartition(t *testing.T) {
	h := new(lostHist).add(0, 0, histories.Invoke, "write", "0-0", "1").add(1, 0, histories.OK, "write", "0-0", "").
		partition("partition:isolate-primary@1s-3s", sec, 3*sec).
		add(2*sec, 1, histories.Invoke, "write", "1-0", "2").add(2*sec+1, 1, histories.OK, "write", "1-0", "").
		add(4*sec, 2, histories.Invoke, "read", "2-0", "").add(4*sec+1, 2, histories.OK, "read", "2-0", "1")
	got := lostRegisterWrites(h.ops)
	if len(got) != 1 || got[0].OpID != "1-0" || got[0].Fault != "partition:isolate-primary@1s-3s" {
		t.Fatalf("lost %+v, want 1-0 after the partition", got)
	}
}
