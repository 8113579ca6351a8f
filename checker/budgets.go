package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// BudgetsModel names the model of several budget accounts, one per key (a SKU, a
// customer), in a history's header and in Options.Model. Its params hold "budgets",
// each key's initial balance: {"budgets":{"sku-1":10,"sku-2":5}}. Every operation
// carries its account as Op.Key, with the functions and values of the budget model.
//
// Why each account can be checked alone: the accounts share nothing, and
// linearizability is local (Herlihy and Wing): a history is linearizable iff its
// restriction to each object is. So CheckBudgets runs CheckBudget on each key's events,
// which keep their history indices, and joins the results.
const BudgetsModel = "budgets"

// budgetsFromHeader reads each key's initial balance from a budgets history's header.
func budgetsFromHeader(h *histories.Header) (map[string]int64, error) {
	if h == nil {
		return nil, fmt.Errorf("budgets history: no header to read params.budgets from")
	}
	raw, ok := h.Params["budgets"]
	if !ok {
		return nil, fmt.Errorf("budgets history: header has no params.budgets (account -> initial balance)")
	}
	var b map[string]int64
	if err := json.Unmarshal(raw, &b); err != nil || len(b) == 0 {
		return nil, fmt.Errorf("budgets history: params.budgets %s is not an object of account to initial balance (%v)", raw, err)
	}
	return b, nil
}

// checkBudgetsModel is Check's case of BudgetsModel.
func checkBudgetsModel(ctx context.Context, h *histories.Header, ops []histories.Op) (Result, error) {
	b, err := budgetsFromHeader(h)
	if err != nil {
		return Result{}, err
	}
	amounts, err := budgetHasAmounts(h)
	if err != nil {
		return Result{}, err
	}
	if amounts {
		return checkBudgets(ctx, ops, b, CheckBudgetAmounts)
	}
	return CheckBudgets(ctx, ops, b)
}

// CheckBudgets decides a history of several budget accounts, each operation on the
// account its Key names, each account starting at budgets[key]: it is valid iff every
// account's history is (CheckBudget). The anomalies name their account; the summary
// counts the accounts checked. An operation on a key budgets does not list makes the
// history uncheckable.
func CheckBudgets(ctx context.Context, ops []histories.Op, budgets map[string]int64) (Result, error) {
	return checkBudgets(ctx, ops, budgets, CheckBudget)
}

// checkBudgets is CheckBudgets with each account decided by one (CheckBudget, or
// CheckBudgetAmounts for a history with amounts).
func checkBudgets(ctx context.Context, ops []histories.Op, budgets map[string]int64, one func(context.Context, []histories.Op, int64) (Result, error)) (Result, error) {
	byKey := map[string][]histories.Op{}
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		if _, ok := budgets[op.Key]; !ok {
			return Result{}, fmt.Errorf("history index %d: %s on account %q, which params.budgets does not list", op.Index, op.F, op.Key)
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	res := Result{Checker: BudgetsModel, Verdict: Valid, Anomalies: []Anomaly{}, Details: map[string]json.RawMessage{}}
	var bad []string
	per := map[string]json.RawMessage{}
	for _, key := range slices.Sorted(maps.Keys(budgets)) {
		r, err := one(ctx, byKey[key], budgets[key])
		if err != nil {
			return Result{}, fmt.Errorf("account %q: %w", key, err)
		}
		switch r.Verdict {
		case Invalid:
			res.Verdict = Invalid
			bad = append(bad, fmt.Sprintf("account %s: %s", key, r.Summary))
		case Unknown:
			if res.Verdict == Valid {
				res.Verdict = Unknown
			}
			bad = append(bad, fmt.Sprintf("account %s: %s", key, r.Summary))
		}
		for _, a := range r.Anomalies {
			a.Explanation = fmt.Sprintf("account %s: %s", key, a.Explanation)
			res.Anomalies = append(res.Anomalies, a)
		}
		per[key] = histories.Value(r.Details)
	}
	res.Details["accounts"] = histories.Value(per)
	if res.Verdict == Valid {
		res.Summary = fmt.Sprintf("%d accounts, each valid as a budget", len(budgets))
	} else {
		res.Summary = strings.Join(bad, "; ")
	}
	return res, nil
}
