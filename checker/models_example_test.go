package checker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// A stock of 10 units: a reservation of 3 acknowledged, one of 4 whose outcome is
// unknown, and a final balance of 3, which only the unknown one having taken its 4
// explains.
func ExampleCheckBudgetAmounts() {
	amount := func(n int) json.RawMessage { return histories.Value(map[string]int{"amount": n}) }
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "decrement", Value: amount(3)},
		{Index: 1, Process: 0, Type: histories.OK, F: "decrement", Value: histories.Value(map[string]any{"applied": true})},
		{Index: 2, Process: 1, Type: histories.Invoke, F: "decrement", Value: amount(4)},
		{Index: 3, Process: 1, Type: histories.Info, F: "decrement"},
		{Index: 4, Process: 2, Type: histories.Invoke, F: "read"},
		{Index: 5, Process: 2, Type: histories.OK, F: "read", Value: histories.Value(map[string]int{"balance": 3})},
	}
	res, err := checker.CheckBudgetAmounts(context.Background(), ops, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict)
	fmt.Println(res.Summary)
	// Output:
	// valid
	// linearizable: 1 decrement acknowledged as applied (3 units), 0 rejected, 1 unknown (4 units), budget 10; final balance 3, last read 3
}

// One reservation, held to two models at once: the stock it takes (a budget with
// amounts) and the reservation it records (exactly once). The stock is right; the
// reservation was recorded twice, so the verdict, the worse of the two, is invalid.
func ExampleCheckModels() {
	parts := []checker.Part{
		{Name: "stock", Model: "budget", Params: map[string]json.RawMessage{"budget": histories.Value(10), "amounts": histories.Value(true)},
			Functions: map[string]string{"reserve": "decrement", "read": "read"}},
		{Name: "reservations", Model: checker.ExactlyOnceModel, Functions: map[string]string{"reserve": "apply", "read": "read"}},
	}
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "reserve", OpID: "r1", Value: histories.Value(map[string]int{"amount": 3})},
		{Index: 1, Process: 0, Type: histories.OK, F: "reserve", OpID: "r1", Value: histories.Value(map[string]bool{"applied": true})},
		{Index: 2, Process: 1, Type: histories.Invoke, F: "read", OpID: "final"},
		{Index: 3, Process: 1, Type: histories.OK, F: "read", OpID: "final", Value: histories.Value(map[string]any{
			"stock": map[string]int{"balance": 7}, "reservations": checker.ExactlyOnceState{"r1": 2}})},
	}
	res, err := checker.CheckModels(context.Background(), ops, parts, checker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict)
	var each []checker.PartResult
	if err := json.Unmarshal(res.Details["models"], &each); err != nil {
		log.Fatal(err)
	}
	for _, p := range each {
		fmt.Println(p.Name, p.Verdict, p.Anomalies)
	}
	// Output:
	// invalid
	// stock valid 0
	// reservations invalid 1
}

// Transfers whose op ids the store logs in the same transaction: a transfer refused
// for lack of funds whose log row a rollback bug left committed is named, though the
// balances alone look right.
func ExampleCheckBank_log() {
	p := checker.BankParams{Accounts: checker.Balances{"a": 100, "b": 0}, Log: true}
	t := func(n int64) json.RawMessage { return histories.Value(checker.Transfer{From: "a", To: "b", Amount: n}) }
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "transfer", OpID: "t1", Value: t(30)},
		{Index: 1, Process: 0, Type: histories.OK, F: "transfer", OpID: "t1"},
		{Index: 2, Process: 0, Type: histories.Invoke, F: "transfer", OpID: "t2", Value: t(500)},
		{Index: 3, Process: 0, Type: histories.Fail, F: "transfer", OpID: "t2", Error: "insufficient funds"},
		{Index: 4, Process: 1, Type: histories.Invoke, F: "read", OpID: "final"},
		{Index: 5, Process: 1, Type: histories.OK, F: "read", OpID: "final", Value: histories.Value(checker.BankLog{
			Balances: checker.Balances{"a": 70, "b": 30}, Log: checker.ExactlyOnceState{"t1": 1, "t2": 1}})},
	}
	res, err := checker.CheckBank(context.Background(), ops, p)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict)
	for _, a := range res.Anomalies {
		fmt.Println(a.Kind, a.Ops)
	}
	// Output:
	// invalid
	// fail-applied [2 3 4 5]
	// log-mismatch [4 5]
}
