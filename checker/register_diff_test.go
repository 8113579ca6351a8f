package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// registerBruteOp is an operation as the brute-force checker sees it.
type registerBruteOp struct {
	f          string
	a, b       int64
	outcome    histories.Type // OK, Fail (cas without error) or Info
	read       *int64         // ok read: the value; nil with absent set means absent
	absent     bool
	blind      bool
	call, ret  int // ret is -1 for an operation that may land any time after call
	ignoreable bool
}

// registerBrute decides linearizability the obvious way: try every subset of the
// operations of unknown outcome as "happened", every order of what happened that
// respects real time, and run the register on it.
func registerBrute(ops []registerBruteOp, init *int64) bool {
	var must, maybe []int
	for i, op := range ops {
		if op.outcome == histories.Info {
			maybe = append(maybe, i)
		} else {
			must = append(must, i)
		}
	}
	for mask := 0; mask < 1<<len(maybe); mask++ {
		set := append([]int{}, must...)
		for j, i := range maybe {
			if mask&(1<<j) != 0 {
				set = append(set, i)
			}
		}
		if registerBrutePermute(ops, set, nil, make([]bool, len(set)), init) {
			return true
		}
	}
	return false
}

func registerBrutePermute(ops []registerBruteOp, set, order []int, used []bool, init *int64) bool {
	if len(order) == len(set) {
		return registerBruteRun(ops, order, init)
	}
	for k, i := range set {
		if used[k] {
			continue
		}
		// Real time: i cannot come before an unplaced operation that returned before
		// i was invoked.
		ok := true
		for k2, j := range set {
			if !used[k2] && j != i && ops[j].ret >= 0 && ops[j].ret < ops[i].call {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		used[k] = true
		if registerBrutePermute(ops, set, append(order, i), used, init) {
			return true
		}
		used[k] = false
	}
	return false
}

func registerBruteRun(ops []registerBruteOp, order []int, init *int64) bool {
	present := init != nil
	var v int64
	if present {
		v = *init
	}
	for _, i := range order {
		op := ops[i]
		switch op.f {
		case "read":
			if op.blind {
				continue
			}
			if op.absent != !present || present && *op.read != v {
				return false
			}
		case "write":
			present, v = true, op.a
		case "cas":
			match := present && v == op.a
			switch op.outcome {
			case histories.OK:
				if !match {
					return false
				}
				v = op.b
			case histories.Fail:
				if match {
					return false
				}
			default:
				if match {
					v = op.b
				}
			}
		}
	}
	return true
}

// registerRandom makes a small random history and its brute-force view.
func registerRandom(r *rand.Rand, n int) ([]histories.Op, []registerBruteOp) {
	var hist []histories.Op
	var brute []registerBruteOp
	type open struct {
		proc int
		op   histories.Op
		b    int // index in brute, -1 when dropped
	}
	var busy []open
	nextProc := 0
	idle := []int{}
	for range 3 {
		idle = append(idle, nextProc)
		nextProc++
	}
	emit := func(op histories.Op) {
		op.Index = int64(len(hist))
		hist = append(hist, op)
	}
	started := 0
	for started < n || len(busy) > 0 {
		if len(busy) > 0 && (started >= n || len(idle) == 0 || r.IntN(2) == 0) {
			k := r.IntN(len(busy))
			o := busy[k]
			busy = append(busy[:k], busy[k+1:]...)
			if started >= n && r.IntN(4) == 0 {
				continue // never completed
			}
			c := histories.Op{Process: o.proc, F: o.op.F}
			b := &brute[o.b]
			switch x := r.IntN(10); {
			case x < 6:
				c.Type = histories.OK
			case x < 8:
				c.Type = histories.Fail
			default:
				c.Type = histories.Info
			}
			b.outcome = c.Type
			if c.Type != histories.Info {
				b.ret = len(hist)
			}
			switch {
			case c.F == "read" && c.Type == histories.OK:
				switch x := r.IntN(6); {
				case x == 0:
					b.blind = true
				case x == 1:
					c.Value, b.absent = []byte("null"), true
				default:
					v := int64(r.IntN(3))
					c.Value, b.read = histories.Value(v), &v
				}
			case c.F == "read", c.F == "write" && c.Type == histories.Fail:
				b.ignoreable = true
			case c.F == "cas" && c.Type == histories.Fail && r.IntN(3) == 0:
				c.Error = "deadlock"
				b.ignoreable = true
			}
			emit(c)
			if c.Type == histories.Info {
				idle = append(idle, nextProc)
				nextProc++
			} else {
				idle = append(idle, o.proc)
			}
			continue
		}
		k := r.IntN(len(idle))
		p := idle[k]
		idle = append(idle[:k], idle[k+1:]...)
		op := histories.Op{Process: p, Type: histories.Invoke}
		b := registerBruteOp{call: len(hist), ret: -1, outcome: histories.Info}
		switch r.IntN(3) {
		case 0:
			op.F, b.f = "read", "read"
		case 1:
			b.f, b.a = "write", int64(r.IntN(3))
			op.F, op.Value = "write", histories.Value(b.a)
		default:
			b.f, b.a, b.b = "cas", int64(r.IntN(3)), int64(r.IntN(3))
			op.F, op.Value = "cas", histories.Value([]int64{b.a, b.b})
		}
		busy = append(busy, open{p, op, len(brute)})
		brute = append(brute, b)
		emit(op)
		started++
	}
	// What carries no information does not constrain the brute force either.
	kept := brute[:0]
	for _, b := range brute {
		if !b.ignoreable && !(b.f == "read" && b.outcome == histories.Info) {
			kept = append(kept, b)
		}
	}
	return hist, kept
}

// TestRegisterAgainstBruteForce compares CheckRegister with the brute-force checker on
// thousands of small random histories with info, failed and blind operations.
func TestRegisterAgainstBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	counts := map[Verdict]int{}
	for i := range 3000 {
		hist, brute := registerRandom(r, 3+r.IntN(4))
		var init *int64
		if r.IntN(3) == 0 {
			v := int64(r.IntN(3))
			init = &v
		}
		want := Invalid
		if registerBrute(brute, init) {
			want = Valid
		}
		res, err := CheckRegister(context.Background(), hist, RegisterOptions{Initial: init})
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		counts[res.Verdict]++
		if res.Verdict != want {
			for _, op := range hist {
				t.Logf("%d %d %s %s %s %s", op.Index, op.Process, op.Type, op.F, op.Value, op.Error)
			}
			t.Fatalf("history %d (initial %v): %v, brute force says %v: %s", i, registerShowInit(init), res.Verdict, want, res.Summary)
		}
	}
	// Both verdicts must be well represented for the comparison to mean anything.
	if counts[Valid] < 500 || counts[Invalid] < 500 {
		t.Fatalf("verdicts %v: the generator is lopsided", counts)
	}
	t.Logf("verdicts %v", counts)
}

func registerShowInit(p *int64) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}
