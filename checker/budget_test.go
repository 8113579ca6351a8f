package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// budgetForm reads budget scripts: f is dec or read; the result of an ok is applied,
// rejected or a read balance.
var budgetForm = scriptForm{
	nemesis: "cut-after-commit",
	fs:      map[string]string{"dec": "decrement", "read": "read"},
	value: func(op *histories.Op, r string, num func(string) int64) {
		switch r {
		case "applied":
			op.Value = budgetSimApplied
		case "rejected":
			op.Value = budgetSimRejected
		default:
			op.Value = histories.Value(map[string]int64{"balance": num(r)})
		}
	},
}

// budgetScript builds a budget history from a script (see scriptOps and budgetForm).
func budgetScript(t testing.TB, script string) []histories.Op {
	t.Helper()
	return scriptOps(t, script, budgetForm)
}

// budgetPorcupine decides a history with the porcupine model.
func budgetPorcupine(t testing.TB, ops []histories.Op, model porcupine.Model) Verdict {
	t.Helper()
	pops, err := budgetOperations(ops)
	if err != nil {
		t.Fatalf("budgetOperations: %v", err)
	}
	return porcupineVerdict(model, pops)
}

func TestBudgetCases(t *testing.T) {
	tests := []struct {
		name   string
		budget int64
		script string
		want   Verdict
		kinds  string // anomaly kinds, space separated
	}{
		{name: "empty history", budget: 3, want: Valid},
		{name: "applied within budget then rejected", budget: 2, want: Valid, script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 ok dec applied
			0 invoke dec
			0 ok dec rejected
			1 invoke read
			1 ok read 0`},
		{name: "overdraft", budget: 1, want: Invalid, kinds: "overdraft", script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 ok dec applied`},
		{name: "budget zero rejects everything", budget: 0, want: Valid, script: `
			0 invoke dec
			0 ok dec rejected
			0 invoke read
			0 ok read 0`},
		{name: "budget zero applied", budget: 0, want: Invalid, kinds: "overdraft", script: `
			0 invoke dec
			0 ok dec applied`},
		{name: "rejection concurrent with the last applied", budget: 1, want: Valid, script: `
			0 invoke dec
			1 invoke dec
			1 ok dec rejected
			0 ok dec applied`},
		{name: "premature rejection", budget: 2, want: Invalid, kinds: "premature-rejection", script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 ok dec rejected`},
		{name: "unknown decrement excuses a rejection", budget: 2, want: Valid, script: `
			2 invoke dec
			2 info dec
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 ok dec rejected`},
		{name: "unknown invoked after the rejection cannot excuse it", budget: 1, want: Invalid, kinds: "premature-rejection", script: `
			1 invoke dec
			1 ok dec rejected
			2 invoke dec
			2 info dec`},
		{name: "applied invoked after a rejection", budget: 1, want: Invalid, kinds: "applied-after-exhausted", script: `
			2 invoke dec
			2 info dec
			1 invoke dec
			1 ok dec rejected
			0 invoke dec
			0 ok dec applied`},
		{name: "failed decrement took nothing", budget: 1, want: Invalid, kinds: "premature-rejection", script: `
			0 invoke dec
			0 fail dec
			1 invoke dec
			1 ok dec rejected`},
		{name: "open decrement at the end counts as unknown", budget: 1, want: Valid, script: `
			0 invoke dec
			1 invoke read
			1 ok read 0`},
		{name: "stale read", budget: 3, want: Invalid, kinds: "stale-read", script: `
			0 invoke dec
			0 ok dec applied
			1 invoke read
			1 ok read 3`},
		{name: "read concurrent with an applied may miss it", budget: 3, want: Valid, script: `
			0 invoke dec
			1 invoke read
			1 ok read 3
			0 ok dec applied`},
		{name: "reads go backwards", budget: 3, want: Invalid, kinds: "stale-read", script: `
			2 invoke dec
			2 info dec
			0 invoke read
			0 ok read 2
			1 invoke read
			1 ok read 3`},
		{name: "final read shows the unknown applied", budget: 3, want: Valid, script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 info dec
			2 invoke read
			2 ok read 1`},
		{name: "final read shows the unknown not applied", budget: 3, want: Valid, script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 info dec
			2 invoke read
			2 ok read 2`},
		{name: "final read lower than possible", budget: 3, want: Invalid, kinds: "impossible-read", script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 info dec
			2 invoke read
			2 ok read 0`},
		{name: "read above the budget", budget: 3, want: Invalid, kinds: "impossible-read", script: `
			0 invoke read
			0 ok read 4`},
		{name: "negative read", budget: 3, want: Invalid, kinds: "impossible-read", script: `
			0 invoke read
			0 ok read -1`},
		{name: "failed and unknown reads carry nothing", budget: 3, want: Valid, script: `
			0 invoke read
			0 fail read
			1 invoke read
			1 info read
			2 invoke read`},
		{name: "nemesis events are skipped", budget: 1, want: Valid, script: `
			nemesis
			0 invoke dec
			nemesis
			0 info dec
			1 invoke dec
			nemesis
			1 ok dec rejected`},
		{name: "read pins the count between rejections", budget: 2, want: Invalid, kinds: "stale-read", script: `
			0 invoke dec
			0 info dec
			1 invoke dec
			1 info dec
			2 invoke dec
			2 ok dec rejected
			3 invoke read
			3 ok read 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops := budgetScript(t, tt.script)
			r, err := CheckBudget(context.Background(), ops, tt.budget)
			if err != nil {
				t.Fatalf("CheckBudget: %v", err)
			}
			if r.Verdict != tt.want {
				t.Fatalf("verdict %s, want %s: %s", r.Verdict, tt.want, r.Summary)
			}
			if got := anomalyKinds(r); got != tt.kinds {
				t.Errorf("anomaly kinds %q, want %q: %s", got, tt.kinds, r.Summary)
			}
			for _, a := range r.Anomalies {
				if len(a.Ops) == 0 || a.Explanation == "" {
					t.Errorf("anomaly %s without ops or explanation: %+v", a.Kind, a)
				}
			}
			if r.Summary == "" || r.Checker != "budget" {
				t.Errorf("summary %q checker %q", r.Summary, r.Checker)
			}
			if got := budgetPorcupine(t, ops, budgetModel(tt.budget)); got != tt.want {
				t.Errorf("porcupine says %s, want %s", got, tt.want)
			}
		})
	}
}

func TestBudgetExplanations(t *testing.T) {
	tests := []struct {
		name   string
		budget int64
		script string
		want   string // the summary
		ops    []int64
	}{
		{name: "overdraft", budget: 1, script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 ok dec applied
			2 invoke dec
			2 ok dec applied`,
			want: "3 decrements acknowledged as applied, budget 1", ops: []int64{2, 3, 4, 5}},
		{name: "premature rejection", budget: 3, script: `
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 info dec
			2 invoke dec
			2 ok dec rejected`,
			want: "decrement of process 2 (index 4) was rejected (balance 0) when at most 2 of the budget of 3 could have been taken before it completed (1 acknowledged and 0..1 unknown decrements)",
			ops:  []int64{4, 5}},
		{name: "final read", budget: 3, script: `
			0 invoke dec
			0 ok dec applied
			0 invoke dec
			0 ok dec applied
			1 invoke dec
			1 info dec
			2 invoke read
			2 ok read 3`,
			want: "read of process 2 (index 6) returned balance 3 but between 0 and 1 expected from 2 acknowledged and 0..1 unknown decrements (budget 3): at least 2 had taken effect before it was invoked",
			ops:  []int64{6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := CheckBudget(context.Background(), budgetScript(t, tt.script), tt.budget)
			if err != nil {
				t.Fatal(err)
			}
			if r.Summary != tt.want {
				t.Errorf("summary\n got %q\nwant %q", r.Summary, tt.want)
			}
			if len(r.Anomalies) != 1 || fmt.Sprint(r.Anomalies[0].Ops) != fmt.Sprint(tt.ops) {
				t.Errorf("anomalies %+v, want one with ops %v", r.Anomalies, tt.ops)
			}
		})
	}
}

func TestBudgetDetails(t *testing.T) {
	ops := budgetScript(t, `
		0 invoke dec
		0 ok dec applied
		1 invoke dec
		1 info dec
		2 invoke dec
		2 fail dec
		3 invoke dec
		4 invoke read
		4 ok read 1
		5 invoke read
		5 fail read`)
	r, err := CheckBudget(context.Background(), ops, 3)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Valid {
		t.Fatalf("verdict %s: %s", r.Verdict, r.Summary)
	}
	want := map[string]int64{
		"budget": 3, "acknowledged_applied": 1, "rejected": 0, "failed": 1, "unknown": 2,
		"unknown_applied_min": 1, "reads": 1, "reads_unknown": 1, "final_balance": 1,
		"balance_min": 0, "balance_max": 1, "anomalies": 0,
	}
	for k, w := range want {
		var got int64
		if err := json.Unmarshal(r.Details[k], &got); err != nil {
			t.Errorf("details[%s] = %s: %v", k, r.Details[k], err)
			continue
		}
		if got != w {
			t.Errorf("details[%s] = %d, want %d", k, got, w)
		}
	}
}

func TestBudgetMalformed(t *testing.T) {
	dec := func(proc int, typ histories.Type, v string) histories.Op {
		op := histories.Op{Process: proc, Type: typ, F: "decrement"}
		if v != "" {
			op.Value = json.RawMessage(v)
		}
		return op
	}
	tests := []struct {
		name string
		ops  []histories.Op
		want string
	}{
		{"completion without invocation", []histories.Op{dec(0, histories.OK, `{"applied":true}`)}, "without an open invocation"},
		{"second invocation while open", []histories.Op{dec(0, histories.Invoke, ""), dec(0, histories.Invoke, "")}, "invokes while"},
		{"unknown function", []histories.Op{{Process: 0, Type: histories.Invoke, F: "write"}}, "unknown function"},
		{"applied missing", []histories.Op{dec(0, histories.Invoke, ""), dec(0, histories.OK, `{"balance":3}`)}, "has no applied"},
		{"value not json", []histories.Op{dec(0, histories.Invoke, ""), dec(0, histories.OK, `nope`)}, "ok decrement value"},
		{"read without balance", []histories.Op{{Process: 0, Type: histories.Invoke, F: "read"}, {Process: 0, Type: histories.OK, F: "read", Value: json.RawMessage(`{}`)}}, "has no balance"},
		{"completion of another function", []histories.Op{dec(0, histories.Invoke, ""), {Process: 0, Type: histories.OK, F: "read", Value: json.RawMessage(`{"balance":1}`)}}, "does not match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.ops {
				tt.ops[i].Index = int64(i)
			}
			_, err := CheckBudget(context.Background(), tt.ops, 3)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CheckBudget error %v, want one containing %q", err, tt.want)
			}
			if _, err := budgetOperations(tt.ops); err == nil {
				t.Errorf("budgetOperations accepted a malformed history")
			}
		})
	}
	if _, err := CheckBudget(context.Background(), nil, -1); err == nil {
		t.Errorf("CheckBudget accepted a negative budget")
	}
}

func TestBudgetFromHeader(t *testing.T) {
	tests := []struct {
		name    string
		h       *histories.Header
		want    int64
		wantErr bool
	}{
		{"budget", &histories.Header{Params: map[string]json.RawMessage{"budget": json.RawMessage(`1000`)}}, 1000, false},
		{"no header", nil, 0, true},
		{"no param", &histories.Header{}, 0, true},
		{"not an integer", &histories.Header{Params: map[string]json.RawMessage{"budget": json.RawMessage(`1.5`)}}, 0, true},
		{"negative", &histories.Header{Params: map[string]json.RawMessage{"budget": json.RawMessage(`-2`)}}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := budgetFromHeader(tt.h)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("budgetFromHeader = %d, %v; want %d, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestBudgetStreaming feeds a history through a file and the streaming checker, and
// checks that it keeps only the stretch of history still open.
func TestBudgetStreaming(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ops := budgetSimulate(rng, budgetSimConfig{procs: 8, ops: 3000, budget: 1000, readP: 0.05, infoP: 0.01, failP: 0.02, final: true})
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := histories.Create(path, histories.Header{Workload: "budget", Model: "budget", Params: map[string]json.RawMessage{"budget": histories.Value(1000)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if _, err := w.Write(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := histories.NewReader(f, path)
	if err != nil {
		t.Fatal(err)
	}
	budget, err := budgetFromHeader(rd.Header())
	if err != nil {
		t.Fatal(err)
	}
	c, err := newBudgetChecker(budget)
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for {
		op, err := rd.Next()
		if err != nil {
			break
		}
		if err := c.Add(op); err != nil {
			t.Fatal(err)
		}
		most = max(most, len(c.queue)-c.head)
	}
	got := c.Result()
	want, err := CheckBudget(context.Background(), ops, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got.Verdict != Valid || got.Summary != want.Summary {
		t.Errorf("streaming: %s %q; whole: %s %q", got.Verdict, got.Summary, want.Verdict, want.Summary)
	}
	// Unknown decrements complete with info, so only the operations in flight and
	// those behind them wait: far fewer than the history.
	if most > len(ops)/4 {
		t.Errorf("streaming checker held %d of %d events", most, len(ops))
	}
	if err := c.Add(ops[0]); err == nil {
		t.Errorf("Add after Result succeeded")
	}
}

// budgetLiteralModel is the budget object written as its specification reads: a set of
// balances, an unknown decrement either taking 1 (when it can) or doing nothing. It
// checks budgetModel's interval encoding.
func budgetLiteralModel(budget int64) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{budget} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(int64), input.(budgetInput), output.(budgetOutput)
			switch {
			case in.read && out.balance == s:
				return []any{s}
			case in.read:
				return nil
			case out.kind == budgetApplied && s > 0:
				return []any{s - 1}
			case out.kind == budgetRejected && s == 0:
				return []any{s}
			case out.kind == budgetUnknown && s > 0:
				return []any{s - 1, s}
			case out.kind == budgetUnknown:
				return []any{s}
			}
			return nil
		},
	}
	return nm.ToModel()
}

// TestBudgetDifferential checks the exact checker against porcupine, with the interval
// model and with the literal one, on thousands of small random histories: simulated
// linearizable runs, and the same broken by mutation.
func TestBudgetDifferential(t *testing.T) {
	// Most histories are tiny, where a wrong edge case shows; the last ones are longer,
	// with larger budgets, where interactions between reads and unknowns pile up.
	const n, long = 6000, 600
	rng := rand.New(rand.NewPCG(2024, 11))
	verdicts := map[Verdict]int{}
	for i := range n + long {
		budget := rng.Int64N(5)
		cfg := budgetSimConfig{
			procs:  2 + rng.IntN(4),
			ops:    2 + rng.IntN(11),
			budget: budget,
			readP:  []float64{0, 0.2, 0.4}[rng.IntN(3)],
			infoP:  []float64{0, 0.15, 0.3}[rng.IntN(3)],
			failP:  []float64{0, 0.1}[rng.IntN(2)],
			hangP:  0.3,
			final:  rng.IntN(2) == 0,
		}
		if i >= n {
			// Few unknowns: porcupine's search grows exponentially with unknown
			// decrements that reads force it to move.
			cfg.procs, cfg.ops, cfg.budget = 3+rng.IntN(4), 13+rng.IntN(18), rng.Int64N(9)
			cfg.infoP, cfg.hangP = []float64{0, 0.05, 0.1}[rng.IntN(3)], 0.1
			budget = cfg.budget
		}
		ops := budgetSimulate(rng, cfg)
		mutated := i%2 == 1
		if mutated {
			for range 1 + rng.IntN(2) {
				ops, budget = budgetMutate(rng, ops, budget)
			}
		}
		r, err := CheckBudget(context.Background(), ops, budget)
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		if !mutated && r.Verdict != Valid {
			t.Fatalf("history %d is a simulated linearizable run but the checker says %s: %s\n%s", i, r.Verdict, r.Summary, budgetDump(ops, budget))
		}
		if got := budgetPorcupine(t, ops, budgetModel(budget)); got != r.Verdict {
			t.Fatalf("history %d: exact checker says %s (%s), porcupine %s\n%s", i, r.Verdict, r.Summary, got, budgetDump(ops, budget))
		}
		if got := budgetPorcupine(t, ops, budgetLiteralModel(budget)); got != r.Verdict {
			t.Fatalf("history %d: exact checker says %s (%s), porcupine with the literal model %s\n%s", i, r.Verdict, r.Summary, got, budgetDump(ops, budget))
		}
		verdicts[r.Verdict]++
	}
	t.Logf("%d histories: %d valid, %d invalid", n+long, verdicts[Valid], verdicts[Invalid])
	if verdicts[Invalid] < n/5 || verdicts[Valid] < n/5 {
		t.Errorf("too one-sided to tell the checkers apart: %v", verdicts)
	}
}

func budgetDump(ops []histories.Op, budget int64) string {
	return dumpOps(fmt.Sprintf("budget %d", budget), ops)
}

// TestBudgetGolden checks every history under testdata/budget against the verdict and
// anomaly kinds in the .verdict file beside it, and porcupine against the checker.
func TestBudgetGolden(t *testing.T) {
	goldenWalk(t, "budget", func(t *testing.T, h *histories.Header, ops []histories.Op) (Result, string) {
		budget, err := budgetFromHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		r, err := CheckBudget(context.Background(), ops, budget)
		if err != nil {
			t.Fatal(err)
		}
		if pv := budgetPorcupine(t, ops, budgetModel(budget)); pv != r.Verdict {
			t.Errorf("porcupine says %s, exact checker %s", pv, r.Verdict)
		}
		return r, anomalyKinds(r)
	})
}

// FuzzBudgetValue holds the fast path of budgetParseOutcome to encoding/json: whatever
// it accepts, encoding/json must accept and read the same.
func FuzzBudgetValue(f *testing.F) {
	for _, s := range []string{
		`{"applied":true,"balance":-1}`, `{"applied":false,"balance":0}`, `{"balance":7}`,
		` { "applied" : true , "conflicts":2,"replayed":false} `, `{"Applied":true}`,
		`{"balance":1.5}`, `{}`, `null`, `{"balance":01}`, `{"applied":true,"applied":false}`,
		`{"balance":-0}`, `{"balance":123456789012345678}`, `{"x":null,"balance":3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := budgetScanFlat(b)
		if !ok {
			return
		}
		var raw struct {
			Applied *bool  `json:"applied"`
			Balance *int64 `json:"balance"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses it: %v", b, err)
		}
		want := budgetOutcome{}
		if raw.Applied != nil {
			want.applied, want.hasApplied = *raw.Applied, true
		}
		if raw.Balance != nil {
			want.balance, want.hasBalance = *raw.Balance, true
		}
		if got != want {
			t.Fatalf("%q: fast path reads %+v, encoding/json %+v", b, got, want)
		}
	})
}
