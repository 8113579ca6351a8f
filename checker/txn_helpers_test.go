package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// elleTxn turns the notation of Elle's unit tests into a transaction's JSON value.
// List-append: "ax1" appends 1 to x, "ry12" reads y = [1 2], "ry" reads y = null.
// Registers: "wx1" writes 1 to x, "ry2" reads y = 2, "rx_" reads x = null. Keys are
// x, y, z, t and u, values single digits.
func elleTxn(t testing.TB, s string) string {
	t.Helper()
	return elleNotation(t, s, false)
}

// elleReg is elleTxn for registers.
func elleReg(t testing.TB, s string) string {
	t.Helper()
	return elleNotation(t, s, true)
}

func elleNotation(t testing.TB, s string, register bool) string {
	t.Helper()
	var mops []string
	var f, k string
	var vals []string
	flush := func() {
		if f == "" {
			return
		}
		switch {
		case f == "append" || f == "w":
			mops = append(mops, fmt.Sprintf("[%q,%q,%s]", f, k, vals[len(vals)-1]))
		case len(vals) == 0:
			mops = append(mops, fmt.Sprintf("[%q,%q]", f, k))
		case f == "rr":
			mops = append(mops, fmt.Sprintf("[\"r\",%q,%s]", k, vals[0]))
		default:
			mops = append(mops, fmt.Sprintf("[\"r\",%q,[%s]]", k, strings.Join(vals, ",")))
		}
		f, k, vals = "", "", nil
	}
	for _, c := range s {
		switch {
		case c == 'a':
			flush()
			f = "append"
		case c == 'w':
			flush()
			f = "w"
		case c == 'r':
			flush()
			f = "r"
			if register {
				f = "rr"
			}
		case strings.ContainsRune("xyztu", c):
			k = string(c)
		case c == '_':
			vals = append(vals, "null")
		case c >= '0' && c <= '9':
			vals = append(vals, string(c))
		default:
			t.Fatalf("bad notation %q", s)
		}
	}
	flush()
	return "[" + strings.Join(mops, ",") + "]"
}

// tev is one event of a test history.
type tev struct {
	p int
	t histories.Type
	v string // JSON value
}

// tok is an ok completion, without invocation, of process 0.
func tok(v string) tev { return tev{0, histories.OK, v} }

// pairOf is the invocation and completion of a transaction, as Elle's tests make them:
// the invocation's reads are null.
func pairOf(t testing.TB, p int, typ histories.Type, v string) []tev {
	t.Helper()
	var mops [][]json.RawMessage
	if err := json.Unmarshal([]byte(v), &mops); err != nil {
		t.Fatal(err)
	}
	var inv []string
	for _, m := range mops {
		if string(m[0]) == `"r"` {
			inv = append(inv, fmt.Sprintf("[\"r\",%s,null]", m[1]))
			continue
		}
		parts := make([]string, len(m))
		for i, x := range m {
			parts[i] = string(x)
		}
		inv = append(inv, "["+strings.Join(parts, ",")+"]")
	}
	return []tev{{p, histories.Invoke, "[" + strings.Join(inv, ",") + "]"}, {p, typ, v}}
}

// txnOps builds a history of events, indices from 0.
func txnOps(evs ...tev) []histories.Op {
	ops := make([]histories.Op, len(evs))
	for i, e := range evs {
		ops[i] = histories.Op{Index: int64(i), Time: int64(i), Process: e.p, Type: e.t, F: TxnFunction}
		if e.v != "" {
			ops[i].Value = json.RawMessage(e.v)
		}
	}
	return ops
}

// txnWant is what a check should give, as Elle's tests assert it: valid, invalid or
// unknown, the anomaly types reported, and the weakest models violated.
type txnWant struct {
	verdict Verdict
	types   []string
	not     []string
}

// txnGot reads a Result the way txnWant says it.
func txnGot(t testing.TB, r Result) txnWant {
	t.Helper()
	var got txnWant
	got.verdict = r.Verdict
	if raw, ok := r.Details["anomaly_types"]; ok {
		if err := json.Unmarshal(raw, &got.types); err != nil {
			t.Fatal(err)
		}
	}
	if raw, ok := r.Details["not"]; ok {
		if err := json.Unmarshal(raw, &got.not); err != nil {
			t.Fatal(err)
		}
	}
	return elleView(t, r, got)
}

// elleView is what Elle would say of a Result: Elle knows Adya's family of models and
// its own anomalies, not the axiomatic levels (txn_axiom.go), which
// TestAxiomGolden and TestAxiomDifferential hold to their definitions. Their
// anomalies are left out of the types, and the weakest models violated are the
// weakest of the others the history violates.
func elleView(t testing.TB, r Result, got txnWant) txnWant {
	t.Helper()
	own := map[string]bool{axCausalityCycle: true, axRCCycle: true, axRACycle: true, axCCCycle: true, axNotOwnWrite: true}
	if r.Checker == RWRegisterModel {
		own["garbage-read"], own["future-read"] = true, true
	}
	var types []string
	for _, k := range got.types {
		if !own[k] {
			types = append(types, k)
		}
	}
	// Elle's graph of models: the tables without the axiomatic levels.
	elle := map[string][]string{}
	for m, ws := range modelImplies {
		if axModels[m] {
			continue
		}
		for _, w := range ws {
			if !axModels[w] {
				elle[m] = append(elle[m], w)
			}
		}
	}
	var alsoNot []string
	if raw, ok := r.Details["also_not"]; ok {
		if err := json.Unmarshal(raw, &alsoNot); err != nil {
			t.Fatal(err)
		}
	}
	imp := map[string]bool{}
	for _, m := range append(slices.Clone(got.not), alsoNot...) {
		c := canonical(m)
		forbids := false
		for w := range closure(elle, c) {
			forbids = forbids || len(modelForbids[w]) > 0
		}
		if !axModels[c] && forbids {
			imp[c] = true
		}
	}
	if slices.Contains(got.types, "garbage-read") && !slices.Contains(types, "garbage-read") ||
		slices.Contains(got.types, "future-read") && !slices.Contains(types, "future-read") {
		// A read of a value never written or of the reader's own later write, which
		// Elle's rw-register checker does not find, rules out Adya's models too:
		// Elle's are those the other anomalies rule out.
		var forbidding []string
		for a := range closure(anomalyImplies, types...) {
			for _, m := range modelsForbidding[a] {
				if !axModels[m] {
					forbidding = append(forbidding, m)
				}
			}
		}
		imp = closure(reverse(elle), forbidding...)
	}
	if len(types) == 0 && got.verdict == Invalid {
		// Only the axiomatic levels' anomalies: Elle sees none.
		got.verdict, imp = Valid, nil
	}
	var not []string
	for m := range imp {
		weakest := true
		for w := range closure(elle, m) {
			weakest = weakest && (w == m || !imp[w])
		}
		if weakest {
			not = append(not, friendly(m))
		}
	}
	slices.Sort(not)
	got.types, got.not = types, slices.Compact(not)
	return got
}

func (w txnWant) String() string {
	return fmt.Sprintf("%s %v not %v", w.verdict, w.types, w.not)
}

func (w txnWant) equal(o txnWant) bool {
	return w.verdict == o.verdict && slices.Equal(w.types, o.types) && slices.Equal(w.not, o.not)
}

// checkTxnModel runs a transactional model's checker, failing the test on an error.
func checkTxnModel(t testing.TB, model string, ops []histories.Op, opt TxnOptions) Result {
	t.Helper()
	r, err := checkTxn(context.Background(), model, ops, opt)
	if err != nil {
		t.Fatalf("%s: %v", model, err)
	}
	return r
}
