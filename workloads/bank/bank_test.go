package bank_test

import (
	"encoding/json"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads/bank"
)

func op(p int, typ histories.Type, f string, v any, errText string) histories.Op {
	o := histories.Op{Process: p, Type: typ, F: f, Error: errText}
	if v != nil {
		b, _ := json.Marshal(v)
		o.Value = b
	}
	return o
}

// Summary counts a transfer acknowledged, one refused for lack of funds (fail with no
// error), one failed on a conflict, one unknown and one never completed, and the reads
// whose balances do not sum to the total; the last ok read is the final balances.
func TestSummary(t *testing.T) {
	w := &bank.Workload{Accounts: 2, Initial: 10, MaxTransfer: 5, ReadShare: 0.5}
	tr := checker.Transfer{From: "0", To: "1", Amount: 3}
	ops := []histories.Op{
		op(0, histories.Invoke, "transfer", tr, ""), op(0, histories.OK, "transfer", nil, ""),
		op(1, histories.Invoke, "transfer", tr, ""), op(1, histories.Fail, "transfer", nil, ""),
		op(2, histories.Invoke, "transfer", tr, ""), op(2, histories.Fail, "transfer", nil, "Error 1213 (40001): Deadlock found"),
		op(3, histories.Invoke, "transfer", tr, ""), op(3, histories.Info, "transfer", nil, "connection lost"),
		op(4, histories.Invoke, "transfer", tr, ""),
		op(5, histories.Invoke, "read", nil, ""), op(5, histories.OK, "read", checker.Balances{"0": 9, "1": 12}, ""),
		op(6, histories.Invoke, "read", nil, ""), op(6, histories.OK, "read", checker.Balances{"0": 7, "1": 13}, ""),
		{Process: histories.Nemesis, Type: histories.Info, F: "start"},
	}
	f := w.Summary(ops).(bank.Final)
	want := bank.Final{Accounts: 2, Total: 20, Acknowledged: 1, Refused: 1, Failed: 1, Unknown: 2, Reads: 2, Unconserved: 1,
		After: checker.Balances{"0": 7, "1": 13}}
	got, _ := json.Marshal(f)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("Summary =\n %s\nwant\n %s", got, exp)
	}
	if a := f.Figures().Applied; a == nil || *a != 1 {
		t.Errorf("figures: applied %v, want 1", a)
	}
}

// The header's params are the checker's: every account at the initial balance.
func TestParams(t *testing.T) {
	w := bank.New(nil)
	var accounts checker.Balances
	if err := json.Unmarshal(w.Params()["accounts"], &accounts); err != nil {
		t.Fatal(err)
	}
	if len(accounts) != bank.DefaultAccounts || accounts["0"] != bank.DefaultInitial || accounts["7"] != bank.DefaultInitial {
		t.Errorf("accounts %v", accounts)
	}
	if w.Model() != checker.BankModel {
		t.Errorf("model %q", w.Model())
	}
}
