package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

type amtIn struct {
	read   bool
	amount int64
}

type amtOut struct {
	kind    budgetKind
	balance int64
}

// amountsLiteralModel is the budget with amounts as its specification reads, for
// porcupine: a decrement of n applied needs n left, a rejected one less than n, a read
// sees the balance, an unknown one took n (when it could) or did nothing.
func amountsLiteralModel(budget int64) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{budget} },
		Step: func(state, input, output any) []any {
			s, i, o := state.(int64), input.(amtIn), output.(amtOut)
			switch {
			case i.read && o.balance == s:
				return []any{s}
			case i.read:
				return nil
			case o.kind == budgetApplied && s >= i.amount:
				return []any{s - i.amount}
			case o.kind == budgetRejected && s < i.amount:
				return []any{s}
			case o.kind == budgetUnknown && s >= i.amount:
				return []any{s - i.amount, s}
			case o.kind == budgetUnknown:
				return []any{s}
			}
			return nil
		},
	}
	return nm.ToModel()
}

// amountsPorcupine decides a budget history with amounts with porcupine and the
// literal model. Failed decrements and reads that saw nothing are left out; unknown
// decrements return after everything.
func amountsPorcupine(t testing.TB, ops []histories.Op, budget int64) Verdict {
	t.Helper()
	all, _, err := budgetAmountOps(ops)
	if err != nil {
		t.Fatal(err)
	}
	ids := clientIDs{}
	var pops []porcupine.Operation
	for _, o := range all {
		switch o.kind {
		case budgetFailed, budgetNoRead:
			continue
		}
		ret := int64(o.ret)
		if o.kind == budgetUnknown {
			ret = math.MaxInt64 - 1
		}
		pops = append(pops, porcupine.Operation{ClientId: ids.of(o.process), Input: amtIn{o.read, o.amount},
			Call: int64(o.inv), Output: amtOut{o.kind, o.balance}, Return: ret})
	}
	// Unknown operations each get a client of their own: porcupine wants one open
	// operation per client at a time.
	for i := range pops {
		if pops[i].Return == math.MaxInt64-1 {
			pops[i].ClientId = 1000 + i
		}
	}
	return porcupineVerdict(amountsLiteralModel(budget), pops)
}

// amountsSimulate runs workers against a real sequential account whose decrements take
// 1..maxAmount units, each operation taking effect at one random moment between its
// invocation and completion (an info one perhaps later, or never): a linearizable
// history by construction.
func amountsSimulate(rng *rand.Rand, procs, n int, budget, maxAmount int64, infoP, readP float64) []histories.Op {
	type worker struct {
		proc, state     int // state 0 idle, 1 invoked, 2 took effect
		read, applied   bool
		amount, balance int64
		seq             int
	}
	var out []histories.Op
	balance := budget
	emit := func(op histories.Op) {
		op.Index, op.Time = int64(len(out)), int64(len(out))*1000
		out = append(out, op)
	}
	ws := make([]worker, procs)
	for i := range ws {
		ws[i].proc = i
	}
	next := procs
	var zombies []int64
	issued := 0
	for issued < n || func() bool {
		for _, w := range ws {
			if w.state != 0 {
				return true
			}
		}
		return false
	}() {
		w := &ws[rng.IntN(len(ws))]
		switch w.state {
		case 0:
			if issued >= n {
				continue
			}
			issued++
			w.seq++
			w.read = rng.Float64() < readP
			w.amount = 1 + rng.Int64N(maxAmount)
			op := histories.Op{Process: w.proc, Type: histories.Invoke, F: "decrement", OpID: fmt.Sprintf("%d-%d", w.proc, w.seq)}
			if w.read {
				op.F = "read"
			} else {
				op.Value = histories.Value(map[string]int64{"amount": w.amount})
			}
			emit(op)
			w.state = 1
		case 1:
			if w.read {
				w.balance = balance
			} else if balance >= w.amount {
				balance -= w.amount
				w.applied = true
			} else {
				w.applied = false
			}
			w.state = 2
			if !w.read && rng.Float64() < infoP && rng.IntN(2) == 0 {
				// It ends info without having taken effect: undo, and maybe take it later.
				if w.applied {
					balance += w.amount
					zombies = append(zombies, w.amount)
				}
				emit(histories.Op{Process: w.proc, Type: histories.Info, F: "decrement", OpID: fmt.Sprintf("%d-%d", w.proc, w.seq)})
				w.proc, next = next, next+1
				w.state = 0
			}
		case 2:
			op := histories.Op{Process: w.proc, Type: histories.OK, F: "decrement", OpID: fmt.Sprintf("%d-%d", w.proc, w.seq)}
			switch {
			case w.read:
				op.F, op.Value = "read", histories.Value(map[string]int64{"balance": w.balance})
			case rng.Float64() < infoP:
				op.Type = histories.Info
			case w.applied:
				op.Value = budgetSimApplied
			default:
				op.Value = budgetSimRejected
			}
			emit(op)
			if op.Type == histories.Info {
				w.proc, next = next, next+1
			}
			w.state = 0
		}
		if len(zombies) > 0 && rng.IntN(4) == 0 {
			z := zombies[len(zombies)-1]
			zombies = zombies[:len(zombies)-1]
			if rng.IntN(2) == 0 && balance >= z {
				balance -= z
			}
		}
	}
	emit(histories.Op{Process: next, Type: histories.Invoke, F: "read", OpID: "final"})
	emit(histories.Op{Process: next, Type: histories.OK, F: "read", OpID: "final", Value: histories.Value(map[string]int64{"balance": balance})})
	return out
}

// amountsMutate breaks a history at one ok completion: a read's balance moved, or a
// decrement's outcome flipped.
func amountsMutate(rng *rand.Rand, ops []histories.Op) []histories.Op {
	ops = append([]histories.Op(nil), ops...)
	var oks []int
	for i, op := range ops {
		if op.Type == histories.OK {
			oks = append(oks, i)
		}
	}
	i := oks[rng.IntN(len(oks))]
	switch {
	case ops[i].F == "read":
		o, _ := budgetParseOutcome(ops[i].Value)
		ops[i].Value = histories.Value(map[string]int64{"balance": max(0, o.balance+[]int64{-2, -1, 1, 2}[rng.IntN(4)])})
	case string(ops[i].Value) == string(budgetSimApplied):
		ops[i].Value = budgetSimRejected
	default:
		ops[i].Value = budgetSimApplied
	}
	return ops
}

// TestBudgetAmountsDifferential holds the search to porcupine with the literal model on
// thousands of small random histories with amounts, linearizable by construction and
// broken by mutation.
func TestBudgetAmountsDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 4))
	verdicts := map[Verdict]int{}
	for i := range 3000 {
		budget := rng.Int64N(12)
		ops := amountsSimulate(rng, 2+rng.IntN(3), 2+rng.IntN(9), budget, 1+rng.Int64N(4),
			[]float64{0, 0.15, 0.3}[rng.IntN(3)], []float64{0, 0.2, 0.4}[rng.IntN(3)])
		mutated := i%2 == 1
		if mutated {
			ops = amountsMutate(rng, ops)
		}
		r, err := CheckBudgetAmounts(context.Background(), ops, budget)
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		if !mutated && r.Verdict != Valid {
			t.Fatalf("history %d is a simulated linearizable run but the search says %s: %s\n%s", i, r.Verdict, r.Summary, budgetDump(ops, budget))
		}
		if got := amountsPorcupine(t, ops, budget); got != r.Verdict {
			t.Fatalf("history %d: search says %s (%s), porcupine %s\n%s", i, r.Verdict, r.Summary, got, budgetDump(ops, budget))
		}
		verdicts[r.Verdict]++
	}
	t.Logf("verdicts: %v", verdicts)
	if verdicts[Invalid] < 300 || verdicts[Valid] < 1500 {
		t.Errorf("too one-sided to tell the checkers apart: %v", verdicts)
	}
}

// TestBudgetAmountsAgreesOnUnits holds the search to the unit budget's exact sweep on
// histories whose every decrement takes 1: the same verdict on each.
func TestBudgetAmountsAgreesOnUnits(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	for i := range 2000 {
		budget := rng.Int64N(6)
		ops := budgetSimulate(rng, budgetSimConfig{procs: 2 + rng.IntN(4), ops: 2 + rng.IntN(12), budget: budget,
			readP: 0.3, infoP: []float64{0, 0.2}[rng.IntN(2)], failP: 0.1, hangP: 0.3, final: rng.IntN(2) == 0})
		if i%2 == 1 {
			ops, budget = budgetMutate(rng, ops, budget)
		}
		want, err := CheckBudget(context.Background(), ops, budget)
		if err != nil {
			t.Fatal(err)
		}
		got, err := CheckBudgetAmounts(context.Background(), ops, budget)
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != want.Verdict {
			t.Fatalf("history %d: search says %s (%s), sweep %s (%s)\n%s", i, got.Verdict, got.Summary, want.Verdict, want.Summary, budgetDump(ops, budget))
		}
	}
}

func TestBudgetAmountsCases(t *testing.T) {
	cases := []struct {
		name, script string
		budget       int64
		want         Verdict
		kinds        string
	}{
		{"a read needs a subset of the unknowns", `
0 invoke dec 3
0 info dec
1 invoke dec 5
1 info dec
2 invoke dec 2
2 info dec
9 invoke read
9 ok read 3`, 10, Valid, ""},
		{"no subset of the unknowns gives the read", `
0 invoke dec 3
0 info dec
1 invoke dec 5
1 info dec
9 invoke read
9 ok read 4`, 10, Invalid, "impossible-read"},
		{"rejected with enough left", `
0 invoke dec 4
0 ok dec applied
1 invoke dec 5
1 ok dec rejected
2 invoke dec 6
2 ok dec applied`, 10, Invalid, "premature-rejection"},
		{"rejected when too little was left", `
0 invoke dec 4
0 ok dec applied
1 invoke dec 7
1 ok dec rejected
2 invoke dec 6
2 ok dec applied
9 invoke read
9 ok read 0`, 10, Valid, ""},
		{"more units applied than the budget", `
0 invoke dec 6
1 invoke dec 6
0 ok dec applied
1 ok dec applied`, 10, Invalid, "overdraft"},
		{"taken twice: the read shows it", `
0 invoke dec 3
0 ok dec applied
9 invoke read
9 ok read 4`, 10, Invalid, "impossible-read"},
		{"a read that misses a decrement taken before it began", `
0 invoke dec 3
0 ok dec applied
9 invoke read
9 ok read 10`, 10, Invalid, "stale-read"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ops := amountsScript(t, c.script)
			r, err := CheckBudgetAmounts(context.Background(), ops, c.budget)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != c.want || anomalyKinds(r) != c.kinds {
				t.Errorf("got %s %q (%s), want %s %q", r.Verdict, anomalyKinds(r), r.Summary, c.want, c.kinds)
			}
			if got := amountsPorcupine(t, ops, c.budget); got != r.Verdict {
				t.Errorf("porcupine says %s", got)
			}
		})
	}
}

// amountsScript reads budgetForm scripts whose decrement invocations give their amount
// ("0 invoke dec 3").
func amountsScript(t testing.TB, script string) []histories.Op {
	t.Helper()
	var lines []string
	var amounts []int64
	for _, l := range strings.Split(strings.TrimSpace(script), "\n") {
		fs := strings.Fields(l)
		if len(fs) == 4 && fs[1] == "invoke" && fs[2] == "dec" {
			var n int64
			fmt.Sscan(fs[3], &n)
			amounts = append(amounts, n)
			l = strings.Join(fs[:3], " ")
		}
		lines = append(lines, l)
	}
	ops := scriptOps(t, strings.Join(lines, "\n"), budgetForm)
	k := 0
	for i := range ops {
		if ops[i].Type == histories.Invoke && ops[i].F == "decrement" {
			ops[i].Value = histories.Value(map[string]int64{"amount": amounts[k]})
			ops[i].OpID = fmt.Sprintf("%d-%d", ops[i].Process, i)
			k++
		}
	}
	return ops
}

// TestBudgetAmountsDeclared: a decrement of more than one unit in a history whose
// header does not declare amounts is refused, naming the parameter; declared, it is
// checked.
func TestBudgetAmountsDeclared(t *testing.T) {
	ops := amountsScript(t, "0 invoke dec 3\n0 ok dec applied\n9 invoke read\n9 ok read 7")
	h := &histories.Header{Model: "budget", Params: map[string]json.RawMessage{"budget": json.RawMessage("10")}}
	_, err := Check(context.Background(), h, ops, Options{})
	if err == nil || !strings.Contains(err.Error(), "params.amounts") {
		t.Fatalf("undeclared amounts: err %v, want one naming params.amounts", err)
	}
	h.Params["amounts"] = json.RawMessage("true")
	r, err := Check(context.Background(), h, ops, Options{})
	if err != nil || r.Verdict != Valid {
		t.Fatalf("declared amounts: %v %v %s", r.Verdict, err, r.Summary)
	}
	if !strings.Contains(string(r.Details["acknowledged_units"]), "3") {
		t.Errorf("details: %s", r.Details)
	}
	if _, err := CheckBudgetAmounts(context.Background(), amountsScript(t, "0 invoke dec 0"), 3); err == nil {
		t.Error("a decrement of 0 units was accepted")
	}
	// The stream takes the same path.
	i := 0
	r2, err := CheckStream(context.Background(), h, func() (histories.Op, error) {
		if i == len(ops) {
			return histories.Op{}, io.EOF
		}
		i++
		return ops[i-1], nil
	}, Options{})
	if err != nil || r2.Verdict != Valid {
		t.Fatalf("streamed: %v %v", r2.Verdict, err)
	}
}

// TestBudgetAmountsGolden checks every history under testdata/budget-amounts against
// the verdict beside it, through Check and the header's params.amounts, and porcupine
// against the search.
func TestBudgetAmountsGolden(t *testing.T) {
	goldenWalk(t, "budget-amounts", func(t *testing.T, h *histories.Header, ops []histories.Op) (Result, string) {
		r, err := Check(context.Background(), h, ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		budget, err := budgetFromHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if pv := amountsPorcupine(t, ops, budget); pv != r.Verdict {
			t.Errorf("porcupine says %s, the search %s", pv, r.Verdict)
		}
		return r, anomalyKinds(r)
	})
}

// TestBudgetsAmounts: several named budgets, each its own total, with amounts: each
// account is searched on its own and the anomalies name their account.
func TestBudgetsAmounts(t *testing.T) {
	h := &histories.Header{Model: BudgetsModel, Params: map[string]json.RawMessage{
		"budgets": json.RawMessage(`{"sku-1":10,"sku-2":4}`), "amounts": json.RawMessage("true")}}
	ops := amountsScript(t, "0 invoke dec 6\n0 ok dec applied\n1 invoke dec 3\n1 ok dec applied\n2 invoke dec 2\n2 ok dec applied")
	keys := []string{"sku-1", "sku-1", "sku-2", "sku-2", "sku-2", "sku-2"}
	for i := range ops {
		ops[i].Key = keys[i]
	}
	r, err := Check(context.Background(), h, ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Invalid || anomalyKinds(r) != "overdraft" || !strings.HasPrefix(r.Anomalies[0].Explanation, "account sku-2: ") {
		t.Fatalf("got %s %q: %s", r.Verdict, anomalyKinds(r), r.Summary)
	}
	ops[4].Value = json.RawMessage(`{"amount":1}`)
	if r, err := Check(context.Background(), h, ops, Options{}); err != nil || r.Verdict != Valid {
		t.Fatalf("within each total: %v %v %s", r.Verdict, err, r.Summary)
	}
}
