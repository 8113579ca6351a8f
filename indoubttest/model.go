package indoubttest

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// Model is what Check holds a history to: one of the models of package checker, with
// the parameters its checker needs, and the functions and values it reads. Build one
// with Budget, Budgets, Counter, Register, CASRegister, ExactlyOnce,
// ExactlyOnceResponse, Bank, ListAppend or RWRegister. The history's header names it, so that `indoubt check`
// re-checks the run directory's history.jsonl without flags.
type Model struct {
	name   string
	params map[string]json.RawMessage
	fs     map[string]function
	keys   []string // the objects of a model over several keys; nil: one object
	parts  []Part   // the parts of Models; nil for one model
	// final is what a final read records, when the checker cannot judge without one.
	final string
	// bad says why the constructor's arguments cannot be used (an unknown consistency
	// model); Check fails the test with it.
	bad string
}

// function is one function of a model: the values its invocation and its ok
// completion must hold, and how a test makes them.
type function struct {
	invoke, ok shape
}

// shape is a value a model reads; use says how to make one ("op.Ok(indoubttest.Applied(
// balance))"). A nil check accepts anything.
type shape struct {
	check func(json.RawMessage) bool
	use   string
}

func (s shape) holds(v json.RawMessage) bool { return s.check == nil || s.check(v) }

// Value is a value a model reads, made by Applied, Replayed, Rejected, Balance,
// Incremented, Count or Response; Op.Ok and Recorder.Read take it, or any other value
// JSON encodes (an integer for a register, a checker.ExactlyOnceState).
type Value struct{ raw json.RawMessage }

// String returns the value as it is recorded in the history, JSON.
func (v Value) String() string { return string(v.raw) }

// Applied is the ok value of a budget decrement that took one unit; balance is what the
// store reported after it (-1 when it does not say; the checker does not rely on it).
func Applied(balance int64) Value {
	return Value{histories.Value(map[string]any{"applied": true, "balance": balance})}
}

// Replayed is the ok value of a budget decrement that your code answered from its
// record of an earlier attempt (it found the idempotency key that attempt wrote): the
// unit was taken once, by that attempt, and this one changed nothing. The checker reads
// it as Applied; the proxy's evidence names the operation a replay, not a second
// application.
func Replayed(balance int64) Value {
	return Value{histories.Value(map[string]any{"applied": true, "balance": balance, "replayed": true})}
}

// Rejected is the ok value of a budget decrement refused because nothing was left.
func Rejected() Value { return Value{histories.Value(map[string]any{"applied": false, "balance": 0})} }

// Balance is the ok value of a budget read: the balance left.
func Balance(n int64) Value { return Value{histories.Value(map[string]any{"balance": n})} }

// Incremented is the ok value of a counter increment: the value the increment wrote
// (the counter's value after it).
func Incremented(wrote int64) Value { return Value{histories.Value(map[string]any{"wrote": wrote})} }

// Count is the ok value of a counter read.
func Count(n int64) Value { return Value{histories.Value(map[string]any{"value": n})} }

// Response is the ok value of an ExactlyOnceResponse apply: the response your code
// returned for it (an order id, a receipt), as JSON encodes it.
func Response(v any) Value { return Value{histories.Value(map[string]any{"response": v})} }

// Responses is the final state of the ExactlyOnceResponse model: for each op id present
// in the store, the response stored with each of its effects (one for an effect
// present once; two for a duplicate). Record it with rec.Read("read", responses).
type Responses map[string][]any

// Budget is one account that starts at initial, and operations that each take one
// unit, or n units when invoked with Amount(n), or are rejected when too little is
// left. Record each as "decrement" (w.Invoke("decrement", nil) or
// w.Invoke("decrement", indoubttest.Amount(n))), completed op.Ok(Applied(balance)),
// op.Ok(Replayed(balance)) or op.Ok(Rejected()) (or Done with those); read the final
// balance with rec.Read("read", Balance(n)). A unit taken twice shows as a balance
// lower than any order of the acknowledged operations allows.
func Budget(initial int64) Model {
	return Model{name: "budget", params: map[string]json.RawMessage{"budget": histories.Value(initial)}, fs: budgetFs}
}

// Budgets is Budget over several accounts, each key (a SKU, a customer) its own
// budget starting at its initial value: record each operation with
// Worker.InvokeOn(key, "decrement", nil) and read each final balance with
// rec.ReadOn(key, "read", Balance(n)). Each account is checked on its own.
func Budgets(initial map[string]int64) Model {
	return Model{name: checker.BudgetsModel, params: map[string]json.RawMessage{"budgets": histories.Value(initial)},
		fs: budgetFs, keys: slices.Sorted(maps.Keys(initial))}
}

var budgetFs = map[string]function{
	"decrement": {invoke: budgetInvoke, ok: shape{func(v json.RawMessage) bool {
		var x struct{ Applied *bool }
		return json.Unmarshal(v, &x) == nil && x.Applied != nil
	}, "op.Ok(indoubttest.Applied(balance)), op.Ok(indoubttest.Replayed(balance)) or op.Ok(indoubttest.Rejected())"}},
	"read": {ok: shape{hasInt("balance"), "rec.Read(\"read\", indoubttest.Balance(n))"}},
}

// Counter is a counter that starts at before, raised by 1 by each "increment",
// completed op.Ok(Incremented(wrote)) with the value it wrote; read it with
// rec.Read("read", Count(n)).
func Counter(before int64) Model {
	return Model{name: "counter", params: map[string]json.RawMessage{"before": histories.Value(before)}, fs: map[string]function{
		"increment": {ok: shape{hasInt("wrote"), "op.Ok(indoubttest.Incremented(wrote))"}},
		"read":      {ok: shape{hasInt("value"), "rec.Read(\"read\", indoubttest.Count(n))"}},
	}}
}

// Register is integer registers that start absent (initial nil) or at *initial, with
// "read" (completed Ok(n), or Ok(nil) for an absent register) and "write" (invoked with
// n), checked for linearizability; Worker.InvokeOn keeps registers of several keys
// apart.
func Register(initial *int64) Model {
	return Model{name: checker.RegisterModel, params: map[string]json.RawMessage{"initial": histories.Value(initial)}, fs: registerFs(false)}
}

// CASRegister is Register with "cas" as well, invoked with [from, to] ([2]int64{from,
// to}) and completed Ok([2]int64{from, to}) when it swapped, Fail when the compare did
// not match.
func CASRegister(initial *int64) Model {
	return Model{name: checker.CASRegisterModel, params: map[string]json.RawMessage{"initial": histories.Value(initial)}, fs: registerFs(true)}
}

func registerFs(cas bool) map[string]function {
	fs := map[string]function{
		"read":  {ok: shape{func(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" || isInt(v) }, "op.Ok(n), or op.Ok(nil) for an absent register"}},
		"write": {invoke: shape{isInt, "w.Invoke(\"write\", n)"}},
	}
	if cas {
		fs["cas"] = function{invoke: shape{isPair, "w.Invoke(\"cas\", [2]int64{from, to})"}}
	}
	return fs
}

// ExactlyOnce is effects identified by op id: every acknowledged one must be present
// exactly once in the final state, every failed one absent, every unknown one at most
// once. Record each as "apply" (any value) and use its Op.ID as the tag of what it
// writes; read the final state once, after the workers, as
// rec.Read("read", checker.ExactlyOnceState{...}): each tag present and how many times.
func ExactlyOnce() Model {
	return Model{name: checker.ExactlyOnceModel, fs: map[string]function{
		"apply": {},
		"read":  {ok: shape{isObjectOf(isInt), "rec.Read(\"read\", checker.ExactlyOnceState{opID: count, ...})"}},
	}, final: "rec.Read(\"read\", checker.ExactlyOnceState{opID: count, ...})"}
}

// ExactlyOnceResponse is ExactlyOnce that also holds every acknowledged apply to the
// response the store kept for its effect: a retry that finds the effect applied must
// answer with the original response (the same order id), not a new one. Complete each
// "apply" with op.Ok(Response(v)) and read the final state as
// rec.Read("read", Responses{opID: {stored response}, ...}).
func ExactlyOnceResponse() Model {
	return Model{name: checker.ExactlyOnceResponseModel, fs: map[string]function{
		"apply": {ok: shape{func(v json.RawMessage) bool { return hasKey(v, "response") }, "op.Ok(indoubttest.Response(v))"}},
		"read": {ok: shape{isObjectOf(func(v json.RawMessage) bool {
			var a []json.RawMessage
			return json.Unmarshal(v, &a) == nil
		}), "rec.Read(\"read\", indoubttest.Responses{opID: {response}, ...})"}},
	}, final: "rec.Read(\"read\", indoubttest.Responses{opID: {response}, ...})"}
}

// Bank is transfers between accounts: record each as "transfer" invoked with a
// checker.Transfer, and read every balance as rec.Read("read", checker.Balances{...}).
// The total must be conserved at every read, no balance may go below its floor, and
// the final balances must be explained by every acknowledged transfer once and some of
// the unknown ones at most once.
//
// With p.Log your code writes each transfer's op id (Op.ID) into a log table in the
// same transaction as the transfer, and every read returns the log beside the
// balances: rec.Read("read", checker.BankLog{Balances: ..., Log: checker.ExactlyOnceState{opID:
// count, ...}}). Each transfer is then held to exactly once by the log, and the
// balances to what the log gives: a failed transfer whose id stayed logged
// (fail-applied) or a transfer applied twice (duplicate) is named even where the
// balances alone could hide it.
func Bank(p checker.BankParams) Model {
	if p.Log {
		return bankLog(p)
	}
	return Model{name: checker.BankModel, params: p.HeaderParams(), fs: map[string]function{
		"transfer": {invoke: shape{func(v json.RawMessage) bool {
			var t checker.Transfer
			return json.Unmarshal(v, &t) == nil && t.From != "" && t.To != ""
		}, "w.Invoke(\"transfer\", checker.Transfer{From: a, To: b, Amount: n})"}},
		"read": {ok: shape{isObjectOf(isInt), "rec.Read(\"read\", checker.Balances{account: balance, ...})"}},
	}, final: "rec.Read(\"read\", checker.Balances{account: balance, ...})"}
}

func isInt(v json.RawMessage) bool {
	var n int64
	return json.Unmarshal(v, &n) == nil
}

func isPair(v json.RawMessage) bool {
	var p [2]int64
	var a []json.RawMessage
	return json.Unmarshal(v, &a) == nil && len(a) == 2 && json.Unmarshal(v, &p) == nil
}

func hasKey(v json.RawMessage, key string) bool {
	var x map[string]json.RawMessage
	if json.Unmarshal(v, &x) != nil {
		return false
	}
	_, ok := x[key]
	return ok
}

func hasInt(key string) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var x map[string]json.RawMessage
		return json.Unmarshal(v, &x) == nil && x[key] != nil && isInt(x[key])
	}
}

func isObjectOf(elem func(json.RawMessage) bool) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var x map[string]json.RawMessage
		if json.Unmarshal(v, &x) != nil || x == nil {
			return false
		}
		for _, e := range x {
			if !elem(e) {
				return false
			}
		}
		return true
	}
}

// header is the history's header for the model.
func (m Model) header(store string, seed int64) histories.Header {
	return histories.Header{Format: histories.FormatV1, Workload: "app", Model: m.name, Store: store, Seed: seed, Params: m.params}
}

// misuse says, in the helper's terms, what in ops the model cannot read: a function it
// does not know, a value it does not read (naming the constructor to use), an object
// it does not have, a final read it needs and did not get. At most max problems.
func (m Model) misuse(ops []histories.Op, max int) []string {
	if m.name == "" {
		return []string{"the model is the zero Model: build one with indoubttest.Budget, Counter, Register, ExactlyOnce, Bank ..."}
	}
	if m.parts != nil {
		return m.partsMisuse(ops, max)
	}
	var out []string
	add := func(format string, args ...any) {
		if len(out) < max {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	if m.bad != "" {
		add("%s", m.bad)
	}
	names := slices.Sorted(maps.Keys(m.fs))
	invoked := map[string]string{} // op id -> function, from the invocation
	final := false
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		fn, known := m.fs[op.F]
		who := "operation " + op.OpID
		if histories.IsFinalReadID(op.OpID) {
			who = "final read " + op.OpID
			final = final || op.Type == histories.OK
		}
		if op.Type == histories.Invoke {
			invoked[op.OpID] = op.F
			if !known {
				add("%s: the %s model reads %s, not Invoke(%q)", who, m.name, strings.Join(names, " and "), op.F)
				continue
			}
			if !fn.invoke.holds(op.Value) {
				add("%s (%s): invoked with %s, which the %s model does not read: %s", who, op.F, show(op.Value), m.name, fn.invoke.use)
			}
			switch {
			case m.keys != nil && !slices.Contains(m.keys, op.Key):
				add("%s (%s): key %q is not one of the model's (%s): use Worker.InvokeOn(key, ...) and Recorder.ReadOn(key, ...)", who, op.F, op.Key, strings.Join(m.keys, ", "))
			}
			continue
		}
		if known && op.Type == histories.OK && !fn.ok.holds(op.Value) {
			add("%s (%s): Ok(%s) is not a value the %s model reads: complete it with %s", who, op.F, show(op.Value), m.name, fn.ok.use)
		}
	}
	if m.final != "" && !final {
		add("the %s model judges the final state, and nothing recorded it: after the workers are done, record the final state with %s", m.name, m.final)
	}
	return out
}

// show is a recorded value as the test wrote it.
func show(v json.RawMessage) string {
	if len(v) == 0 {
		return "nil"
	}
	if len(v) > 80 {
		return string(v[:77]) + "..."
	}
	return string(v)
}
