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
