package indoubttest

import (
	"encoding/json"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// Model is what Check holds a history to: one of the models of package checker, with
// the parameters its checker needs. Build one with Budget, Counter, Register or
// CASRegister. The history's header names it, so that `indoubt check` re-checks the
// run directory's history.jsonl without flags.
type Model struct {
	// Name is the model's name in the history header: budget, counter, register,
	// cas-register.
	Name string
	// Params are the header's params (see histories.Header).
	Params map[string]json.RawMessage
	// Noun names one operation in explanations ("charge", "transfer"); "" means the
	// operation's function.
	Noun string
}

// Budget is one account that starts at initial, and operations that each take one
// unit or are rejected when nothing is left. Record each as f "decrement" with no
// argument, completed Ok(Applied(balance)) or Ok(Rejected()); final reads as
// Read("read", Balance(n)). A unit taken twice shows as a balance lower than any
// order of the acknowledged operations allows.
func Budget(initial int64) Model {
	return Model{Name: "budget", Params: map[string]json.RawMessage{"budget": histories.Value(initial)}}
}

// Counter is a counter that starts at before, raised by 1 by each "increment", read by
// "read": the value formats are those of package histories ("Values").
func Counter(before int64) Model {
	return Model{Name: "counter", Params: map[string]json.RawMessage{"before": histories.Value(before)}}
}

// Register is integer registers, one per Op key, that start absent (initial nil) or at
// *initial, with "read" and "write", checked for linearizability.
func Register(initial *int64) Model {
	return Model{Name: checker.RegisterModel, Params: map[string]json.RawMessage{"initial": histories.Value(initial)}}
}

// CASRegister is Register with "cas" ([from,to]) as well.
func CASRegister(initial *int64) Model {
	return Model{Name: checker.CASRegisterModel, Params: map[string]json.RawMessage{"initial": histories.Value(initial)}}
}

// As returns m with the noun explanations use for one operation: Budget(100).As("charge").
func (m Model) As(noun string) Model {
	m.Noun = noun
	return m
}

// Applied is the ok value of a budget decrement that took one unit; balance is what the
// store reported after it (-1 when it does not say; the checker does not rely on it).
func Applied(balance int64) any {
	return struct {
		Applied bool  `json:"applied"`
		Balance int64 `json:"balance"`
	}{true, balance}
}

// Rejected is the ok value of a budget decrement refused because nothing was left.
func Rejected() any {
	return struct {
		Applied bool `json:"applied"`
	}{false}
}

// Balance is the ok value of a budget read.
func Balance(n int64) any {
	return struct {
		Balance int64 `json:"balance"`
	}{n}
}

// ExactlyOnce is effects identified by op id: every acknowledged one must be present
// exactly once in the final state, every failed one absent, every unknown one at most
// once. Record each as f "apply" (any value) and use its Op.ID as the tag of what it
// writes; read the final state once, as Read("read", checker.ExactlyOnceState{...}):
// each tag present and how many times.
func ExactlyOnce() Model {
	return Model{Name: checker.ExactlyOnceModel}
}

// Bank is transfers between accounts: record each as f "transfer" with a
// checker.Transfer argument, and read every balance as Read("read", checker.Balances{...}).
// The total must be conserved at every read, no balance may go below its floor, and
// the final balances must be explained by every acknowledged transfer once and some of
// the unknown ones at most once.
func Bank(p checker.BankParams) Model {
	return Model{Name: checker.BankModel, Params: p.HeaderParams()}
}
