package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// counterForm reads counter scripts: f is inc or read; the result of an ok increment is
// the value it wrote ("42") or what it read and wrote ("41>42"), of an ok read the value.
var counterForm = scriptForm{
	nemesis: "commit-cut",
	fs:      map[string]string{"inc": "increment", "read": "read"},
	opIDs:   true,
	value: func(op *histories.Op, res string, num func(string) int64) {
		switch r, w, both := strings.Cut(res, ">"); {
		case op.F == "read":
			op.Value = histories.Value(map[string]int64{"value": num(res)})
		case both:
			op.Value = histories.Value(map[string]int64{"read": num(r), "wrote": num(w)})
		default:
			op.Value = histories.Value(map[string]int64{"wrote": num(res)})
		}
	},
}

// counterScript builds a counter history from a script (see scriptOps and counterForm).
func counterScript(t testing.TB, script string) []histories.Op {
	t.Helper()
	return scriptOps(t, script, counterForm)
}

// counterPorcupine decides a history with a porcupine model.
func counterPorcupine(t testing.TB, ops []histories.Op, model porcupine.Model) Verdict {
	t.Helper()
	pops, err := counterOperations(ops)
	if err != nil {
		t.Fatalf("counterOperations: %v", err)
	}
	return porcupineVerdict(model, pops)
}

func TestCounterCases(t *testing.T) {
	tests := []struct {
		name   string
		before int64
		script string
		want   Verdict
		kinds  string
	}{
		{name: "empty history", want: Valid},
		{name: "sequential increments and a read", before: 40, want: Valid, script: `
			0 invoke inc
			0 ok inc 40>41
			1 invoke inc
			1 ok inc 41>42
			2 invoke read
			2 ok read 42`},
		{name: "concurrent increments may take effect in either order", want: Valid, script: `
			0 invoke inc
			1 invoke inc
			1 ok inc 1
			0 ok inc 2
			0 invoke inc
			0 ok inc 3`},
		{name: "lost update under read committed", before: 40, want: Invalid, kinds: "lost-update", script: `
			0 invoke inc
			1 invoke inc
			0 ok inc 40>41
			1 ok inc 40>41
			2 invoke read
			2 ok read 41`},
		{name: "stale write", want: Invalid, kinds: "stale-write", script: `
			0 invoke inc
			0 ok inc 2
			1 invoke inc
			1 ok inc 1`},
		{name: "read misses a completed increment", want: Invalid, kinds: "stale-read", script: `
			0 invoke inc
			0 ok inc 1
			1 invoke read
			1 ok read 0`},
		{name: "read concurrent with an increment may miss it", want: Valid, script: `
			0 invoke inc
			1 invoke read
			1 ok read 0
			0 ok inc 1`},
		{name: "read sees an increment not yet invoked", want: Invalid, kinds: "future-read", script: `
			2 invoke inc
			2 info inc
			1 invoke read
			1 ok read 2
			0 invoke inc
			0 ok inc 1`},
		{name: "reads go backwards", want: Invalid, kinds: "stale-read", script: `
			2 invoke inc
			2 info inc
			0 invoke read
			0 ok read 1
			1 invoke read
			1 ok read 0`},
		{name: "unknown increment fills a hole", want: Valid, script: `
			2 invoke inc
			2 info inc
			0 invoke inc
			0 ok inc 2`},
		{name: "unknown increment may not have applied", want: Valid, script: `
			2 invoke inc
			2 info inc
			0 invoke inc
			0 ok inc 1
			1 invoke read
			1 ok read 1`},
		{name: "open increment at the end counts as unknown", want: Valid, script: `
			0 invoke inc
			1 invoke read
			1 ok read 1`},
		{name: "extra increment with no unknown to explain it", want: Invalid, kinds: "unexplained-increments", script: `
			0 invoke inc
			0 ok inc 1
			1 invoke inc
			1 fail inc
			2 invoke read
			2 ok read 2`},
		{name: "unknown increment invoked too late to fill the hole", want: Invalid, kinds: "unexplained-increments", script: `
			0 invoke inc
			0 ok inc 2
			1 invoke inc
			1 info inc`},
		{name: "increment wrote what it did not read plus one", want: Invalid, kinds: "inconsistent-increment", script: `
			1 invoke inc
			1 info inc
			0 invoke inc
			0 ok inc 0>2`},
		{name: "values far above the number of operations", want: Invalid, kinds: "lost-update unexplained-increments", script: `
			0 invoke inc
			1 invoke inc
			0 ok inc 1000000000000
			1 ok inc 1000000000000`},
		{name: "read far above, then an increment it counted", want: Invalid, kinds: "unexplained-increments future-read", script: `
			0 invoke read
			0 ok read 1000000000000
			1 invoke inc
			1 ok inc 1`},
		{name: "increment wrote the start value", before: 5, want: Invalid, kinds: "impossible-write", script: `
			0 invoke inc
			0 ok inc 5`},
		{name: "read below the start", before: 5, want: Invalid, kinds: "impossible-read", script: `
			0 invoke read
			0 ok read 4`},
		{name: "failed reads and nemesis events are ignored", want: Valid, script: `
			nemesis
			0 invoke read
			0 fail read
			1 invoke inc
			1 ok inc 1
			nemesis`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ops := counterScript(t, tc.script)
			r, err := CheckCounter(context.Background(), ops, tc.before)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != tc.want || anomalyKinds(r) != tc.kinds {
				t.Fatalf("got %s [%s], want %s [%s]: %s", r.Verdict, anomalyKinds(r), tc.want, tc.kinds, r.Summary)
			}
			if pv := counterPorcupine(t, ops, counterModel(tc.before)); pv != r.Verdict {
				t.Errorf("porcupine says %s", pv)
			}
			for _, a := range r.Anomalies {
				if len(a.Ops) == 0 || a.Explanation == "" {
					t.Errorf("anomaly %+v names no events or has no explanation", a)
				}
			}
		})
	}
}

// The article's read committed finding, as the checker must explain it: the increments
// involved, with what each read and wrote.
func TestCounterExplainsLostUpdates(t *testing.T) {
	ops := counterScript(t, `
		0 invoke inc
		1 invoke inc
		2 invoke inc
		0 ok inc 41>42
		1 ok inc 41>42
		2 ok inc 41>42
		3 invoke read
		3 ok read 42`)
	r, err := CheckCounter(context.Background(), ops, 41)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Invalid || len(r.Anomalies) != 1 {
		t.Fatalf("got %s with %d anomalies: %s", r.Verdict, len(r.Anomalies), r.Summary)
	}
	a := r.Anomalies[0]
	for _, want := range []string{"3 acknowledged increments each wrote 42", "increment 0-0 (read 41, wrote 42)", "increment 2-2 (read 41, wrote 42)", "2 acknowledged updates were lost"} {
		if !strings.Contains(a.Explanation, want) {
			t.Errorf("explanation %q lacks %q", a.Explanation, want)
		}
	}
	if got := fmt.Sprint(a.Ops); got != "[0 3 1 4 2 5]" {
		t.Errorf("ops %s, want the three increments' events", got)
	}
	if got := string(r.Details["lost_updates"]); got != "2" {
		t.Errorf("lost_updates = %s, want 2", got)
	}
	if !strings.HasPrefix(r.Summary, "2 updates lost") {
		t.Errorf("summary %q", r.Summary)
	}
}

func TestCounterMalformed(t *testing.T) {
	tests := []struct {
		name string
		ops  []histories.Op
		want string
	}{
		{"ok increment without wrote", []histories.Op{
			{Index: 0, Process: 0, Type: histories.Invoke, F: "increment"},
			{Index: 1, Process: 0, Type: histories.OK, F: "increment", Value: []byte(`{"read":3}`)},
		}, "has no wrote"},
		{"unknown function", []histories.Op{{Index: 0, Process: 0, Type: histories.Invoke, F: "decrement"}}, `unknown function "decrement"`},
		{"completion without invocation", []histories.Op{{Index: 4, Process: 0, Type: histories.OK, F: "read"}}, "history index 4"},
		{"read without value", []histories.Op{
			{Index: 0, Process: 0, Type: histories.Invoke, F: "read"},
			{Index: 1, Process: 0, Type: histories.OK, F: "read", Value: []byte(`{}`)},
		}, "has no value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := CheckCounter(context.Background(), tc.ops, 0)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCounterFromHeader(t *testing.T) {
	h := &histories.Header{Model: "counter", Params: map[string]json.RawMessage{"before": json.RawMessage("17")}}
	if b, err := counterFromHeader(h); err != nil || b != 17 {
		t.Fatalf("got %d, %v", b, err)
	}
	if _, err := counterFromHeader(&histories.Header{Model: "counter"}); err == nil {
		t.Fatal("no params.before: want an error")
	}
	ops := counterScript(t, "0 invoke inc\n0 ok inc 18")
	r, err := Check(context.Background(), h, ops, Options{})
	if err != nil || r.Verdict != Valid || r.Checker != "counter" {
		t.Fatalf("Check dispatch: %+v %v", r, err)
	}
	zero := int64(0)
	if r, err := Check(context.Background(), h, ops, Options{Initial: &zero}); err != nil || r.Verdict != Invalid {
		t.Fatalf("--initial 0 over a history that wrote 18 first: %v %v", r.Verdict, err)
	}
}

// counterLiteralModel is the counter written as its specification reads: one value, an
// unknown increment either adding 1 or doing nothing. It checks counterModel's interval
// encoding.
func counterLiteralModel(before int64) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{before} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(int64), input.(counterInput), output.(counterOutput)
			switch {
			case in.read && out.value == s:
				return []any{s}
			case in.read:
				return nil
			case out.unknown:
				return []any{s, s + 1}
			case out.value == s+1 && (out.readVal == nil || *out.readVal == s):
				return []any{s + 1}
			}
			return nil
		},
	}
	return nm.ToModel()
}

// counterSimulate runs procs processes against a correct counter and records the
// history: each increment takes effect (returning the value it wrote) or a read observes
// at a random moment inside its interval; some increments end unknown (applied or not),
// some fail without effect, some never complete.
func counterSimulate(rng *rand.Rand, procs, opsPer int, before int64, readP, infoP, failP float64) []histories.Op {
	type pstate struct {
		left           int
		busy, effected bool
		read           bool
		value          int64
		readVal        int64
		hung           bool
		id             int
	}
	ps := make([]*pstate, procs)
	for i := range ps {
		ps[i] = &pstate{left: opsPer, id: i}
	}
	next := procs
	counter := before
	var ops []histories.Op
	emit := func(p *pstate, typ histories.Type, value any) {
		f := "increment"
		if p.read {
			f = "read"
		}
		ops = append(ops, histories.Op{Index: int64(len(ops)), Process: p.id, Type: typ, F: f, Value: histories.Value(value)})
	}
	for {
		var live []*pstate
		for _, p := range ps {
			if !p.hung && (p.busy || p.left > 0) {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			break
		}
		p := live[rng.IntN(len(live))]
		switch {
		case !p.busy:
			p.busy, p.effected, p.read = true, false, rng.Float64() < readP
			p.left--
			emit(p, histories.Invoke, nil)
		case !p.effected && !p.read && rng.Float64() < failP:
			p.busy = false
			emit(p, histories.Fail, nil)
		case !p.effected && !p.read && rng.Float64() < infoP/2:
			// Unknown, never applied.
			p.busy = false
			emit(p, histories.Info, nil)
			p.id, next = next, next+1
		case !p.effected:
			p.effected = true
			if p.read {
				p.value = counter
			} else {
				p.readVal = counter
				counter++
				p.value = counter
			}
		case !p.read && rng.Float64() < infoP:
			// Applied, but the client was not told.
			p.busy = false
			if rng.Float64() < 0.3 {
				p.hung = true
				continue
			}
			emit(p, histories.Info, nil)
			p.id, next = next, next+1
		default:
			p.busy = false
			switch {
			case p.read:
				emit(p, histories.OK, map[string]int64{"value": p.value})
			case rng.IntN(2) == 0:
				emit(p, histories.OK, map[string]int64{"read": p.readVal, "wrote": p.value})
			default:
				emit(p, histories.OK, map[string]int64{"wrote": p.value})
			}
		}
	}
	return ops
}

// counterMutate breaks a history in one of the ways stores break: a value off by one, a
// lost update (an increment that read what another read), an unknown or failed increment
// turned acknowledged, a read of something else.
func counterMutate(rng *rand.Rand, ops []histories.Op) []histories.Op {
	var oks, others []int
	for i, op := range ops {
		switch {
		case op.Type == histories.OK:
			oks = append(oks, i)
		case op.Type == histories.Fail || op.Type == histories.Info:
			others = append(others, i)
		}
	}
	out := append([]histories.Op(nil), ops...)
	if len(oks) == 0 {
		return out
	}
	i := oks[rng.IntN(len(oks))]
	op := out[i]
	delta := int64(1 + rng.IntN(2))
	if rng.IntN(2) == 0 {
		delta = -delta
	}
	var v counterValue
	if err := json.Unmarshal(op.Value, &v); err != nil {
		panic(err)
	}
	switch k := rng.IntN(4); {
	case k == 0 && op.F == "increment" && len(oks) > 1:
		// Copy another increment's result: the lost update.
		j := oks[rng.IntN(len(oks))]
		if ops[j].F == "increment" {
			op.Value = ops[j].Value
		}
	case k == 1 && len(others) > 0 && ops[others[len(others)-1]].F == "increment":
		// A failed or unknown increment reported as acknowledged, writing a value near
		// one seen elsewhere.
		j := others[len(others)-1]
		o := out[j]
		o.Type = histories.OK
		var w int64
		if v.Value != nil {
			w = *v.Value
		} else {
			w = *v.Wrote
		}
		o.Value = histories.Value(map[string]int64{"wrote": w + delta})
		out[j] = o
		return out
	case op.F == "read":
		op.Value = histories.Value(map[string]int64{"value": *v.Value + delta})
	default:
		m := map[string]int64{"wrote": *v.Wrote + delta}
		if v.Read != nil && rng.IntN(3) > 0 {
			m["read"] = *v.Read + delta
		}
		op.Value = histories.Value(m)
	}
	out[i] = op
	return out
}

// TestCounterDifferential checks the exact checker against porcupine, with the interval
// model and with the literal one, on thousands of small random histories: simulated
// linearizable runs, and the same broken by mutation.
func TestCounterDifferential(t *testing.T) {
	const n = 6000
	rng := rand.New(rand.NewPCG(2026, 5))
	verdicts := map[Verdict]int{}
	for i := range n {
		before := rng.Int64N(4)
		ops := counterSimulate(rng, 2+rng.IntN(4), 1+rng.IntN(6), before,
			[]float64{0, 0.2, 0.4}[rng.IntN(3)], []float64{0, 0.15, 0.3}[rng.IntN(3)], []float64{0, 0.1}[rng.IntN(2)])
		mutated := i%2 == 1
		if mutated {
			for range 1 + rng.IntN(2) {
				ops = counterMutate(rng, ops)
			}
		}
		r, err := CheckCounter(context.Background(), ops, before)
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		if !mutated && r.Verdict != Valid {
			t.Fatalf("history %d is a simulated linearizable run but the checker says %s: %s\n%s", i, r.Verdict, r.Summary, counterDump(ops, before))
		}
		if got := counterPorcupine(t, ops, counterModel(before)); got != r.Verdict {
			t.Fatalf("history %d: exact checker says %s (%s), porcupine %s\n%s", i, r.Verdict, r.Summary, got, counterDump(ops, before))
		}
		if got := counterPorcupine(t, ops, counterLiteralModel(before)); got != r.Verdict {
			t.Fatalf("history %d: exact checker says %s (%s), porcupine with the literal model %s\n%s", i, r.Verdict, r.Summary, got, counterDump(ops, before))
		}
		verdicts[r.Verdict]++
	}
	t.Logf("%d histories: %d valid, %d invalid", n, verdicts[Valid], verdicts[Invalid])
	if verdicts[Invalid] < n/5 || verdicts[Valid] < n/5 {
		t.Errorf("too one-sided to tell the checkers apart: %v", verdicts)
	}
}

func counterDump(ops []histories.Op, before int64) string {
	return dumpOps(fmt.Sprintf("before %d", before), ops)
}

// A large run: the checker stays exact and fast where search would not.
func TestCounterLargeHistory(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	ops := counterSimulate(rng, 32, 3000, 1000, 0.05, 0.01, 0.01)
	start := time.Now()
	r, err := CheckCounter(context.Background(), ops, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Valid {
		t.Fatalf("%s: %s", r.Verdict, r.Summary)
	}
	t.Logf("%d events checked in %v", len(ops), time.Since(start))
	// One lost update in the middle is found and named.
	for i, op := range ops {
		if op.Type == histories.OK && op.F == "increment" && i > len(ops)/2 {
			for j := i + 1; j < len(ops); j++ {
				if ops[j].Type == histories.OK && ops[j].F == "increment" {
					ops[j].Value = op.Value
					break
				}
			}
			break
		}
	}
	r, err = CheckCounter(context.Background(), ops, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Invalid || !strings.Contains(anomalyKinds(r), "lost-update") {
		t.Fatalf("one copied result: %s [%s]", r.Verdict, anomalyKinds(r))
	}
}

// TestCounterGolden checks every history under testdata/counter against the verdict and
// anomaly kinds in the .verdict file beside it, and porcupine against the checker.
func TestCounterGolden(t *testing.T) {
	goldenWalk(t, "counter", func(t *testing.T, h *histories.Header, ops []histories.Op) (Result, string) {
		r := checkAll(t, h, ops)
		before, _ := counterFromHeader(h)
		if pv := counterPorcupine(t, ops, counterModel(before)); pv != r.Verdict {
			t.Errorf("porcupine says %s, exact checker %s", pv, r.Verdict)
		}
		return r, anomalyKinds(r)
	})
}
