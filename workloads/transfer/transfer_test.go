package transfer

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// servers is a Store that only knows its number of servers: enough for the generator.
type servers int

func (n servers) Servers() int                                                   { return int(n) }
func (servers) Reset(context.Context, int) error                                 { return nil }
func (servers) Transfer(context.Context, string, int, int) error                 { return nil }
func (servers) ReadRows(context.Context, string, int, int) (int64, int64, error) { return 0, 0, nil }
func (servers) ReadTotal(context.Context) (int64, error)                         { return 0, nil }
func (servers) Rows(context.Context) (map[int]int64, error)                      { return nil, nil }
func (servers) Markers(context.Context, int) (map[string][]int, error)           { return nil, nil }
func (servers) Prepared(context.Context) ([]string, error)                       { return nil, nil }

// TestPickPlacesRows: a local transaction's rows are on one server, a distributed one's
// on two, and never the same row twice.
func TestPickPlacesRows(t *testing.T) {
	for _, pl := range []Placement{Local, Distributed} {
		w, err := New(servers(3), workloads.Transfer, pl, 30, 0)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 1000 {
			a, b := w.pick(rng)
			same := a%3 == b%3
			if a == b || a >= 30 || b >= 30 || same != (pl == Local) {
				t.Fatalf("%s: picked rows %d and %d", pl, a, b)
			}
		}
	}
	if _, err := New(servers(1), workloads.Transfer, Distributed, 30, 0); err == nil {
		t.Error("a distributed placement over one server was accepted")
	}
	if _, err := New(servers(2), workloads.TwoRows, Local, 3, 0); err == nil {
		t.Error("3 rows over 2 servers were accepted")
	}
}

// TestSummaryCounts: the final section counts transfers by outcome, the unknown ones the
// markers show applied, the reads and the fractured ones, and what is left prepared.
func TestSummaryCounts(t *testing.T) {
	w, err := New(servers(2), workloads.Transfer, Distributed, 4, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	tr := func(p int, id, from, to string) histories.Op {
		return histories.Op{Process: p, Type: histories.Invoke, F: FTransfer, OpID: id, Value: histories.Value(checker.Transfer{From: from, To: to, Amount: 1})}
	}
	end := func(p int, f string, typ histories.Type, v any) histories.Op {
		return histories.Op{Process: p, Type: typ, F: f, Value: histories.Value(v)}
	}
	ops := []histories.Op{
		tr(0, "0-0", "0", "1"), end(0, FTransfer, histories.OK, nil),
		tr(0, "0-1", "2", "1"), end(0, FTransfer, histories.Info, nil),
		tr(2, "1-0", "3", "0"), end(2, FTransfer, histories.Info, nil),
		tr(3, "2-0", "0", "3"), end(3, FTransfer, histories.Fail, nil),
		{Process: 1, Type: histories.Invoke, F: FTotal}, end(1, FTotal, histories.OK, 399),
		{Process: 1, Type: histories.Invoke, F: FTotal}, end(1, FTotal, histories.OK, 400),
		{Process: 9, Type: histories.Invoke, F: FRead}, end(9, FRead, histories.OK, checker.Balances{"0": 99, "1": 102, "2": 99, "3": 100}),
		{Process: 9, Type: histories.Invoke, F: FApplied}, end(9, FApplied, histories.OK, map[string][]string{"0-0": {"0"}, "0-1": {"2"}}),
		{Process: 9, Type: histories.Invoke, F: FApplied}, end(9, FApplied, histories.OK, map[string][]string{"0-0": {"1"}, "0-1": {"1"}}),
		{Process: 9, Type: histories.Invoke, F: FPrepared}, end(9, FPrepared, histories.OK, []string{"x@1"}),
	}
	got := w.Summary(ops).(Final)
	total := int64(400)
	want := Final{Rows: 4, Expected: 400, Total: &total, Applied: 1, Rejected: 1, Unknown: 2, UnknownApplied: 1, Reads: 2, FracturedReads: 1, LeftPrepared: 1}
	if got.Total == nil || *got.Total != total {
		t.Fatalf("total %v, want 400", got.Total)
	}
	got.Total = &total
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if f := got.Figures(); *f.Applied != 2 || *f.Rejected != 1 || *f.Value != 400 {
		t.Errorf("figures %d %d %d", *f.Applied, *f.Rejected, *f.Value)
	}
}
