package checker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// keyed builds a history from (process, type, key, f, value) tuples, numbered in order.
func keyed(evs ...histories.Op) []histories.Op {
	for i := range evs {
		evs[i].Index = int64(i)
		evs[i].Time = int64(i)
	}
	return evs
}

func TestBudgets(t *testing.T) {
	inv := func(p int, key, f string) histories.Op {
		return histories.Op{Process: p, Type: histories.Invoke, Key: key, F: f}
	}
	ok := func(p int, key, f, v string) histories.Op {
		return histories.Op{Process: p, Type: histories.OK, Key: key, F: f, Value: json.RawMessage(v)}
	}
	budgets := map[string]int64{"sku-1": 1, "sku-2": 2}
	t.Run("each account within its budget", func(t *testing.T) {
		ops := keyed(
			inv(0, "sku-1", "decrement"), ok(0, "sku-1", "decrement", `{"applied":true,"balance":0}`),
			inv(1, "sku-2", "decrement"), ok(1, "sku-2", "decrement", `{"applied":true,"balance":1}`),
			inv(2, "sku-1", "read"), ok(2, "sku-1", "read", `{"balance":0}`),
			inv(3, "sku-2", "read"), ok(3, "sku-2", "read", `{"balance":1}`),
		)
		res, err := CheckBudgets(context.Background(), ops, budgets)
		if err != nil || res.Verdict != Valid {
			t.Fatalf("verdict %v, err %v: %s", res.Verdict, err, res.Summary)
		}
	})
	t.Run("one account taken twice", func(t *testing.T) {
		// sku-2's final read shows 2 taken where one decrement was invoked.
		ops := keyed(
			inv(0, "sku-1", "decrement"), ok(0, "sku-1", "decrement", `{"applied":true,"balance":0}`),
			inv(1, "sku-2", "decrement"), ok(1, "sku-2", "decrement", `{"applied":true,"balance":1}`),
			inv(2, "sku-1", "read"), ok(2, "sku-1", "read", `{"balance":0}`),
			inv(3, "sku-2", "read"), ok(3, "sku-2", "read", `{"balance":0}`),
		)
		res, err := CheckBudgets(context.Background(), ops, budgets)
		if err != nil || res.Verdict != Invalid {
			t.Fatalf("verdict %v, err %v: %s", res.Verdict, err, res.Summary)
		}
		if len(res.Anomalies) != 1 || !strings.HasPrefix(res.Anomalies[0].Explanation, "account sku-2: ") {
			t.Fatalf("anomalies %+v, want one naming sku-2", res.Anomalies)
		}
		if got := res.Anomalies[0].Ops; len(got) == 0 || got[len(got)-1] != 7 {
			t.Errorf("anomaly events %v: want the history's own indices (the read at 7)", got)
		}
		// The same history through Check, by its header: the same verdict.
		h := &histories.Header{Format: histories.FormatV1, Model: BudgetsModel, Params: map[string]json.RawMessage{"budgets": histories.Value(budgets)}}
		if r, err := Check(context.Background(), h, ops, Options{}); err != nil || r.Verdict != Invalid {
			t.Errorf("Check: %v %v", r.Verdict, err)
		}
	})
	t.Run("a key the header does not list", func(t *testing.T) {
		ops := keyed(inv(0, "sku-9", "decrement"), ok(0, "sku-9", "decrement", `{"applied":true,"balance":0}`))
		if _, err := CheckBudgets(context.Background(), ops, budgets); err == nil || !strings.Contains(err.Error(), `"sku-9"`) {
			t.Fatalf("err %v, want one naming sku-9", err)
		}
	})
}
