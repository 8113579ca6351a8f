package histories_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

func ev(index int64, process int, t histories.Type, f string) histories.Op {
	return histories.Op{Index: index, Time: index * 10, Process: process, Type: t, F: f}
}

// Pair follows Jepsen's rule: a process's next completion completes its open operation;
// a nemesis event between them changes nothing; an operation left open has no
// completion and counts as info.
func TestPair(t *testing.T) {
	ops := []histories.Op{
		ev(0, 0, histories.Invoke, "write"),
		ev(1, 1, histories.Invoke, "read"),
		ev(2, histories.Nemesis, histories.Info, "kill"),
		ev(3, 1, histories.OK, "read"),
		ev(4, 0, histories.Info, "write"),
		ev(5, 2, histories.Invoke, "write"),
	}
	got, err := histories.Pair(ops)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, o := range got {
		end := "open"
		if o.Complete != nil {
			end = fmt.Sprint(o.Complete.Index)
		}
		fmt.Fprintf(&b, "%d:%s->%s(%s) ", o.Invoke.Index, o.Invoke.F, end, o.Type())
	}
	if want := "0:write->4(info) 1:read->3(ok) 5:write->open(info) "; b.String() != want {
		t.Errorf("pairs %q, want %q", b.String(), want)
	}
	if got[2].End() != 1<<63-1 || got[1].End() != 30 {
		t.Errorf("ends %d %d", got[2].End(), got[1].End())
	}
}

// What no history can hold is refused, naming the event.
func TestPairRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []histories.Op
		want string
	}{
		{"busy process", []histories.Op{ev(0, 0, histories.Invoke, "write"), ev(1, 0, histories.Invoke, "read")},
			"history index 1: process 0 invokes while its operation invoked at index 0 is open"},
		{"completion without invocation", []histories.Op{ev(0, 3, histories.OK, "read")},
			"history index 0: ok completion of process 3 without an open invocation"},
		{"another function", []histories.Op{ev(0, 0, histories.Invoke, "write"), ev(1, 0, histories.OK, "read")},
			`history index 1: completion "read" of process 0 does not match its invocation "write" at index 0`},
		{"another key", []histories.Op{{Index: 0, Type: histories.Invoke, F: "read", Key: "a"}, {Index: 1, Type: histories.OK, F: "read", Key: "b"}},
			`history index 1: completion of key "b" by process 0 does not match its invocation's key "a" at index 0`},
		{"not a completion", []histories.Op{ev(0, 0, histories.Invoke, "write"), {Index: 1, Type: 0, F: "write"}},
			"history index 1: event type type(0) is not a completion"},
	} {
		_, err := histories.Pair(tc.ops)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
	// An empty f or key in a completion means its invocation's.
	if _, err := histories.Pair([]histories.Op{{Index: 0, Type: histories.Invoke, F: "read", Key: "a"}, {Index: 1, Type: histories.OK}}); err != nil {
		t.Errorf("a completion without f or key: %v", err)
	}
}

// A Pairer hands back what the invocation kept, and Open lists the rest in invocation
// order.
func TestPairerOpen(t *testing.T) {
	var p histories.Pairer[string]
	for i, proc := range []int{4, 2, 9} {
		if err := p.Invoke(histories.Op{Index: int64(i), Process: proc, Type: histories.Invoke, F: "w"}, fmt.Sprint("op", i)); err != nil {
			t.Fatal(err)
		}
	}
	v, done, err := p.Add(histories.Op{Index: 3, Process: 2, Type: histories.OK, F: "w"}, "")
	if err != nil || !done || v != "op1" {
		t.Fatalf("completion of process 2: %q %v %v", v, done, err)
	}
	if _, done, err := p.Add(histories.Op{Index: 4, Process: histories.Nemesis, Type: histories.Info, F: "kill"}, "x"); done || err != nil {
		t.Errorf("a nemesis event: %v %v", done, err)
	}
	if got := fmt.Sprint(p.Open()); got != "[op0 op2]" {
		t.Errorf("open %s", got)
	}
	if got := p.Open(); len(got) != 0 {
		t.Errorf("open twice: %v", got)
	}
}
