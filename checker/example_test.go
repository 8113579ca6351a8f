package checker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// A budget of 1 and two decrements acknowledged as applied: one more than the
// account held. The header names the model and the budget, so Check needs no options.
func ExampleCheck_budget() {
	h := &histories.Header{Format: histories.FormatV1, Workload: "budget", Model: "budget",
		Params: map[string]json.RawMessage{"budget": histories.Value(1)}}
	applied := histories.Value(map[string]any{"applied": true})
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "decrement"},
		{Index: 1, Process: 1, Type: histories.Invoke, F: "decrement"},
		{Index: 2, Process: 0, Type: histories.OK, F: "decrement", Value: applied},
		{Index: 3, Process: 1, Type: histories.OK, F: "decrement", Value: applied},
	}
	res, err := checker.Check(context.Background(), h, ops, checker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict, res.Verdict.ExitCode())
	for _, a := range res.Anomalies {
		fmt.Println(a.Kind, a.Ops)
	}
	// Output:
	// invalid 1
	// overdraft [1 3]
}

// A register written 1, then a write of 2 whose outcome is unknown, then reads of 2
// and of 1: the unknown write took effect before the first read, and nothing wrote 1
// again, so no order of the operations explains the last read.
func ExampleCheckRegister() {
	var b strings.Builder
	for i, line := range []string{
		`"process":0,"type":"invoke","f":"write","value":1`,
		`"process":0,"type":"ok","f":"write","value":1`,
		`"process":1,"type":"invoke","f":"write","value":2`,
		`"process":1,"type":"info","f":"write","error":"conn closed"`,
		`"process":0,"type":"invoke","f":"read"`,
		`"process":0,"type":"ok","f":"read","value":2`,
		`"process":0,"type":"invoke","f":"read"`,
		`"process":0,"type":"ok","f":"read","value":1`,
	} {
		fmt.Fprintf(&b, `{"index":%d,"time":%d,%s}`+"\n", i, i, line)
	}
	r, err := histories.NewReader(strings.NewReader(b.String()), "register.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	ops, err := r.ReadAll()
	if err != nil {
		log.Fatal(err)
	}
	res, err := checker.CheckRegister(context.Background(), ops, checker.RegisterOptions{Model: checker.RegisterModel})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict)
	fmt.Println(res.Summary)
	// Output:
	// invalid
	// the register is not linearizable as a register (1 of 1 keys)
}

// A client applies two payments, each under its own op id (its idempotency key). The
// reply to the first is cut after its COMMIT and the client retries it without the key:
// the final read finds it twice.
func ExampleCheck_exactlyOnce() {
	h := &histories.Header{Format: histories.FormatV1, Workload: "payments", Model: checker.ExactlyOnceModel}
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "apply", OpID: "pay-1"},
		{Index: 1, Process: 0, Type: histories.OK, F: "apply", OpID: "pay-1", Attempt: 2},
		{Index: 2, Process: 0, Type: histories.Invoke, F: "apply", OpID: "pay-2"},
		{Index: 3, Process: 0, Type: histories.OK, F: "apply", OpID: "pay-2"},
		{Index: 4, Process: 1, Type: histories.Invoke, F: "read"},
		{Index: 5, Process: 1, Type: histories.OK, F: "read", Value: histories.Value(checker.ExactlyOnceState{"pay-1": 2, "pay-2": 1})},
	}
	res, err := checker.Check(context.Background(), h, ops, checker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict)
	for _, a := range res.Anomalies {
		fmt.Println(a.Kind, a.Ops)
	}
	// Output:
	// invalid
	// duplicate [0 1 4 5]
}

// Two accounts of 10, one transfer acknowledged and one whose reply was lost; the final
// balances, given as Options.Final because this client read them after the history was
// written, are explained by the acknowledged transfer and the unknown one both applied.
func ExampleCheck_bank() {
	p := checker.BankParams{Accounts: checker.Balances{"alice": 10, "bob": 10}}
	h := &histories.Header{Format: histories.FormatV1, Workload: "transfer", Model: checker.BankModel, Params: p.HeaderParams()}
	t := histories.Value(checker.Transfer{From: "alice", To: "bob", Amount: 3})
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "transfer", OpID: "t-1", Value: t},
		{Index: 1, Process: 0, Type: histories.OK, F: "transfer", OpID: "t-1"},
		{Index: 2, Process: 0, Type: histories.Invoke, F: "transfer", OpID: "t-2", Value: t},
		{Index: 3, Process: 0, Type: histories.Info, F: "transfer", OpID: "t-2", Error: "conn closed"},
	}
	final := histories.Value(checker.Balances{"alice": 4, "bob": 16})
	res, err := checker.Check(context.Background(), h, ops, checker.Options{Final: final})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict)
	// Output:
	// valid
}

// A program that reads its final state some other way gives it to the check as the
// value of the model's read: here an exactly-once history whose final state holds
// payment p-1 twice.
func ExampleWithFinalRead() {
	ops := []histories.Op{
		{Index: 0, Time: 1, Process: 0, Type: histories.Invoke, F: "apply", OpID: "p-1"},
		{Index: 1, Time: 2, Process: 0, Type: histories.OK, F: "apply", OpID: "p-1"},
	}
	all := checker.WithFinalRead(ops, json.RawMessage(`{"p-1":2}`))
	res, err := checker.Check(context.Background(), &histories.Header{Model: checker.ExactlyOnceModel}, all, checker.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Verdict, res.Anomalies[0].Kind)
	// Output: invalid duplicate
}
