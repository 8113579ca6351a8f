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

// Amount is the argument of a budget decrement that takes n units (n >= 1):
// w.Invoke("decrement", indoubttest.Amount(3)). It is applied while at least n are
// left and rejected when fewer are; a decrement invoked with no argument takes 1. A
// history with amounts is decided by the checker's exact search
// (checker.CheckBudgetAmounts), which the helper chooses by itself.
func Amount(n int64) Value { return Value{histories.Value(map[string]int64{"amount": n})} }

// MarshalJSON writes the value as it is recorded, so that a Value can sit inside a
// value that holds one per model: map[string]any{"stock": indoubttest.Balance(3)}.
func (v Value) MarshalJSON() ([]byte, error) {
	if len(v.raw) == 0 {
		return []byte("null"), nil
	}
	return v.raw, nil
}

// budgetInvoke is what a budget decrement may be invoked with: nothing, or Amount(n).
var budgetInvoke = shape{func(v json.RawMessage) bool {
	if len(v) == 0 || string(v) == "null" {
		return true
	}
	var x struct{ Amount *int64 }
	return json.Unmarshal(v, &x) == nil && x.Amount != nil && *x.Amount >= 1
}, "w.Invoke(\"decrement\", nil) for 1 unit, or w.Invoke(\"decrement\", indoubttest.Amount(n))"}

// withAmounts is m with the header's params.amounts set when a budget model's history
// holds a decrement of more than one unit (or m is a part of Models, whose budget parts
// are always searched: the search decides unit decrements exactly too).
func (m Model) withAmounts(ops []histories.Op) Model {
	if m.name != "budget" && m.name != checker.BudgetsModel {
		return m
	}
	for _, op := range ops {
		if op.Type != histories.Invoke || op.F != "decrement" || len(op.Value) == 0 {
			continue
		}
		var x struct{ Amount *int64 }
		if json.Unmarshal(op.Value, &x) == nil && x.Amount != nil && *x.Amount != 1 {
			m.params = maps.Clone(m.params)
			m.params[checker.BudgetAmountsParam] = histories.Value(true)
			return m
		}
	}
	return m
}

// Part is one model of a history held to several at once (Models).
type Part struct {
	// Name names the part in its verdict and anomalies, and is its key in a value that
	// holds one per part: rec.Read("read", map[string]any{"stock":
	// indoubttest.Balance(n), "reservations": checker.ExactlyOnceState{...}}).
	Name string
	// Model is the part's model: Budget, ExactlyOnce, Bank ...
	Model Model
	// Functions maps the functions your test records to the part's model's
	// ({"reserve": "apply", "read": "read"}); nil: the same names. A function it does
	// not name is not the part's business.
	Functions map[string]string
}

// Models holds one history to several models at once: each operation your code
// records is judged by every part that maps its function, each part on its own, and
// the verdict is the worst of theirs (each part's verdict is in the Report's summary,
// results.json's models and report.html). A reservation that takes stock and must be
// made exactly once:
//
//	indoubttest.Models(
//		indoubttest.Part{Name: "stock", Model: indoubttest.Budget(100),
//			Functions: map[string]string{"reserve": "decrement", "read": "read"}},
//		indoubttest.Part{Name: "reservations", Model: indoubttest.ExactlyOnce(),
//			Functions: map[string]string{"reserve": "apply", "read": "read"}})
//
// Invoke "reserve" with indoubttest.Amount(n) and complete it
// op.Ok(indoubttest.Applied(-1)); a reservation your code refuses (too little stock)
// is a failure, op.Fail(err), which no part counts as an effect. A value that is an
// object keyed by part names gives each part its member; any other value goes whole
// to every part. Budget parts are decided by the exact search for amounts.
func Models(parts ...Part) Model {
	m := Model{name: checker.ModelsModel, fs: map[string]function{}, parts: parts}
	var cps []checker.Part
	var finals []string
	for _, p := range parts {
		pm := p.Model
		if pm.name == "budget" || pm.name == checker.BudgetsModel {
			pm.params = maps.Clone(pm.params)
			pm.params[checker.BudgetAmountsParam] = histories.Value(true)
		}
		if pm.name == "" || pm.name == checker.ModelsModel || p.Name == "" {
			m.bad = fmt.Sprintf("indoubttest.Models: part %q: each part needs a name and a model other than Models", p.Name)
		}
		if pm.bad != "" {
			m.bad = pm.bad
		}
		cps = append(cps, checker.Part{Name: p.Name, Model: pm.name, Params: pm.params, Functions: p.Functions})
		for f := range pm.fs {
			mine := f
			for from, to := range p.Functions {
				if to == f {
					mine = from
				}
			}
			m.fs[mine] = function{}
		}
		if pm.final != "" {
			finals = append(finals, fmt.Sprintf("%q: ...", p.Name))
		}
	}
	m.params = checker.ModelsParams(cps...)
	if len(finals) > 0 {
		m.final = fmt.Sprintf("rec.Read(\"read\", map[string]any{%s}) (each part's final state under its name)", strings.Join(finals, ", "))
	}
	return m
}

// partsMisuse is misuse for Models: each part's problems with its view of ops.
func (m Model) partsMisuse(ops []histories.Op, max int) []string {
	var out []string
	if m.bad != "" {
		out = append(out, m.bad)
	}
	known := map[string]bool{}
	for _, p := range m.parts {
		cp := checker.Part{Name: p.Name, Functions: p.Functions}
		for _, s := range p.Model.misuse(cp.View(ops), max) {
			out = append(out, p.Name+": "+s)
		}
		for f := range p.Model.fs {
			known[f] = true
		}
		for f := range p.Functions {
			known[f] = true
		}
	}
	for _, op := range ops {
		if op.IsClient() && op.Type == histories.Invoke && !known[op.F] {
			out = append(out, fmt.Sprintf("operation %s: no part reads Invoke(%q) (parts read %s)", op.OpID, op.F, strings.Join(slices.Sorted(maps.Keys(known)), ", ")))
			break
		}
	}
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// bankLog is Bank with a transfer log.
func bankLog(p checker.BankParams) Model {
	use := "rec.Read(\"read\", checker.BankLog{Balances: checker.Balances{account: balance, ...}, Log: checker.ExactlyOnceState{opID: count, ...}})"
	return Model{name: checker.BankModel, params: p.HeaderParams(), fs: map[string]function{
		"transfer": {invoke: shape{func(v json.RawMessage) bool {
			var t checker.Transfer
			return json.Unmarshal(v, &t) == nil && t.From != "" && t.To != ""
		}, "w.Invoke(\"transfer\", checker.Transfer{From: a, To: b, Amount: n})"}},
		"read": {ok: shape{func(v json.RawMessage) bool {
			var l checker.BankLog
			return json.Unmarshal(v, &l) == nil && l.Balances != nil && l.Log != nil
		}, use}},
	}, final: use}
}
