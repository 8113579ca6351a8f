package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// registerRandomLong makes a random register history of n operations by procs
// processes over values 0..vals-1, with reads, writes and cas, some failed, some of
// unknown outcome, some never completed: long enough that operations of unknown
// outcome stay in flight across many points where nothing else is.
func registerRandomLong(r *rand.Rand, n, procs, vals int) []histories.Op {
	var hist []histories.Op
	type open struct {
		proc int
		f    string
		a, b int64
	}
	var cur int64
	present := false
	var busy []open
	idle := make([]int, procs)
	for i := range idle {
		idle[i] = i
	}
	next := procs
	emit := func(op histories.Op) {
		op.Index = int64(len(hist))
		hist = append(hist, op)
	}
	for started := 0; started < n || len(busy) > 0; {
		if len(busy) > 0 && (started >= n || len(idle) == 0 || r.IntN(2) == 0) {
			k := r.IntN(len(busy))
			o := busy[k]
			busy = append(busy[:k], busy[k+1:]...)
			if started >= n && r.IntN(3) == 0 {
				continue // never completed
			}
			c := histories.Op{Process: o.proc, F: o.f, Type: histories.OK}
			switch x := r.IntN(10); {
			case x < 1:
				c.Type = histories.Fail
			case x < 3:
				c.Type = histories.Info
			}
			// Mostly what a register would do, taking effect at the completion, so
			// that valid histories are as common as invalid ones.
			honest := r.IntN(10) > 0
			switch {
			case c.F == "write" && (c.Type == histories.OK || c.Type == histories.Info && r.IntN(2) == 0):
				cur, present = o.a, true
			case c.F == "cas" && honest && c.Type != histories.Info:
				c.Type = histories.Fail
				if present && cur == o.a {
					c.Type, cur = histories.OK, o.b
				}
			case c.F == "cas" && c.Type == histories.Info && present && cur == o.a && r.IntN(2) == 0:
				cur = o.b
			}
			if c.F == "read" && c.Type == histories.OK {
				switch {
				case honest && present:
					c.Value = histories.Value(cur)
				case honest:
					c.Value = []byte("null")
				case r.IntN(4) == 0:
				default:
					c.Value = histories.Value(r.IntN(vals))
				}
			}
			if c.F == "cas" && c.Type == histories.Fail && r.IntN(4) == 0 {
				c.Error = "deadlock"
			}
			emit(c)
			if c.Type == histories.Info {
				idle = append(idle, next)
				next++
			} else {
				idle = append(idle, o.proc)
			}
			continue
		}
		k := r.IntN(len(idle))
		p := idle[k]
		idle = append(idle[:k], idle[k+1:]...)
		op := histories.Op{Process: p, Type: histories.Invoke}
		o := open{proc: p, a: int64(r.IntN(vals)), b: int64(r.IntN(vals))}
		switch r.IntN(3) {
		case 0:
			op.F = "read"
		case 1:
			op.F, op.Value = "write", histories.Value(o.a)
		default:
			op.F, op.Value = "cas", histories.Value([]int64{o.a, o.b})
		}
		o.f = op.F
		busy = append(busy, o)
		emit(op)
		started++
	}
	return hist
}

// TestRegisterJITAgainstPorcupine holds the register search to porcupine on thousands
// of random histories, short and long, of few and of several processes, every
// initial state and both meanings of a failed cas.
func TestRegisterJITAgainstPorcupine(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 3))
	counts := map[bool]int{}
	for i := range 6000 {
		n, procs := 2+r.IntN(12), 1+r.IntN(4)
		if i%3 == 0 {
			n, procs = 20+r.IntN(100), 1+r.IntN(3)
		}
		hist := registerRandomLong(r, n, procs, 2+r.IntN(3))
		init := registerState{}
		if r.IntN(2) == 0 {
			init = registerState{v: int64(r.IntN(3)), present: true}
		}
		fail := FailCompareFailed
		if r.IntN(3) == 0 {
			fail = FailNotApplied
		}
		h, err := registerHistory(hist, CASRegisterModel, fail)
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		b := newSearchBounds(context.Background(), 0, 0)
		var never atomic.Bool
		model := registerPorcupineModel(init, &never)
		for _, key := range h.keys {
			want := porcupine.CheckOperations(model, h.porcupineOps(key))
			got := registerJIT(h.byKey[key], init, b)
			counts[want]++
			if !got.decided || got.ok != want {
				var lines []string
				for _, op := range hist {
					lines = append(lines, fmt.Sprintf("%d p%d %s %s %s %s", op.Index, op.Process, op.Type, op.F, op.Value, op.Error))
				}
				t.Fatalf("history %d (initial %s, %s): register search %+v, porcupine %v\n%s", i, init, fail, got, want, strings.Join(lines, "\n"))
			}
		}
		b.close()
	}
	if counts[true] < 1000 || counts[false] < 1000 {
		t.Fatalf("verdicts %v: the generator is lopsided", counts)
	}
	t.Logf("porcupine's verdicts: %v", counts)
}
