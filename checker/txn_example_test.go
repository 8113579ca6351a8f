package checker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// Write skew under snapshot isolation: two transactions each read both keys empty
// and append to one of them. Each missed the other's append, a cycle of two
// anti-dependencies (G2-item): allowed by snapshot isolation, not by serializability.
func ExampleCheckListAppend() {
	txn := func(i int64, p int, t histories.Type, v string) histories.Op {
		return histories.Op{Index: i, Process: p, Type: t, F: checker.TxnFunction, Value: json.RawMessage(v)}
	}
	ops := []histories.Op{
		txn(0, 0, histories.Invoke, `[["r","x",null],["r","y",null],["append","x",1]]`),
		txn(1, 1, histories.Invoke, `[["r","x",null],["r","y",null],["append","y",1]]`),
		txn(2, 0, histories.OK, `[["r","x",[]],["r","y",[]],["append","x",1]]`),
		txn(3, 1, histories.OK, `[["r","x",[]],["r","y",[]],["append","y",1]]`),
		txn(4, 2, histories.Invoke, `[["r","x",null],["r","y",null]]`),
		txn(5, 2, histories.OK, `[["r","x",[1]],["r","y",[1]]]`),
	}
	for _, models := range [][]string{{"snapshot-isolation"}, {"serializable"}} {
		res, err := checker.CheckListAppend(context.Background(), ops, checker.TxnOptions{ConsistencyModels: models})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(models[0], res.Verdict)
		for _, a := range res.Anomalies {
			fmt.Println(a.Kind, a.Ops)
			fmt.Println(a.Explanation)
		}
		if res.Verdict == checker.Invalid {
			fmt.Printf("not: %s\n", res.Details["not"])
		}
	}
	// Output:
	// snapshot-isolation valid
	// serializable invalid
	// G2-item [2 3]
	// a cycle of 2 transactions, T1 = transaction 2, T2 = transaction 3:
	// T1 < T2: T1 read key y = [] and did not see T2's append of 1, the first to key y
	// T2 < T1: T2 read key x = [] and did not see T1's append of 1, the first to key x
	// not: ["repeatable-read"]
}

// A register read that saw nothing though the write it should have seen had
// completed: serializable (the read may be ordered first), but neither strictly
// serializable nor strongly snapshot isolated.
func ExampleCheckRWRegister() {
	txn := func(i int64, p int, t histories.Type, v string) histories.Op {
		return histories.Op{Index: i, Process: p, Type: t, F: checker.TxnFunction, Value: json.RawMessage(v)}
	}
	ops := []histories.Op{
		txn(0, 0, histories.Invoke, `[["w","x",1]]`),
		txn(1, 0, histories.OK, `[["w","x",1]]`),
		txn(2, 1, histories.Invoke, `[["r","x",null]]`),
		txn(3, 1, histories.OK, `[["r","x",null]]`),
	}
	res, err := checker.CheckRWRegister(context.Background(), ops, checker.TxnOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict, res.Summary)
	// Output:
	// invalid violates strong-snapshot-isolation: G-single-item-realtime 1, among 2 transactions
}
