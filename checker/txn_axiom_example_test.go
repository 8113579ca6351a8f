package checker_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// Causal consistency, checked completely: process 0 writes x, then y; process 1 sees
// the write of y but not the earlier write of x of the same session.
func ExampleCheckRWRegister_causal() {
	txn := func(i int64, p int, v string) histories.Op {
		return histories.Op{Index: i, Process: p, Type: histories.OK, F: checker.TxnFunction, Value: json.RawMessage(v)}
	}
	ops := []histories.Op{
		txn(0, 0, `[["w","x",1]]`),
		txn(1, 0, `[["w","y",1]]`),
		txn(2, 1, `[["r","y",1],["r","x",null]]`),
	}
	for _, m := range []string{"axiomatic-read-atomic", "causal"} {
		r, err := checker.CheckRWRegister(context.Background(), ops, checker.TxnOptions{ConsistencyModels: []string{m}})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(m+":", r.Verdict)
	}
	r, _ := checker.CheckRWRegister(context.Background(), ops, checker.TxnOptions{ConsistencyModels: []string{"causal"}})
	fmt.Println(r.Anomalies[0].Explanation)
	// Output:
	// axiomatic-read-atomic: valid
	// causal: invalid
	// a cycle of a transaction and the initial state in the commit order causal consistency requires, T1 = transaction 0:
	// T1 < the initial state: T1 happens before transaction 2 (transaction 0 → transaction 1 → transaction 2); transaction 2 read key x = null (micro-op 1), the initial state; T1 wrote key x too (1, micro-op 0): under causal consistency a transaction sees all that happens before it
	// the initial state < T1: the initial state precedes every transaction, T1 among them
}
