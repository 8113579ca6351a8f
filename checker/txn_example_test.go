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

// A history file checked as it is read, the way `indoubt check` reads one: the header
// names the model, and each transaction's value is parsed once, as its line is read.
// The append of 1 failed, yet a read saw it (an aborted read, G1a) and a committed
// append of 2 came after it (a dirty update).
func ExampleCheckReader() {
	const file = `{"header":{"format":"indoubt-history/1","workload":"list-append","model":"list-append"}}
{"index":0,"time":10,"process":0,"type":"invoke","f":"txn","value":[["append","x",1]]}
{"index":1,"time":20,"process":0,"type":"fail","f":"txn","value":[["append","x",1]],"error":"aborted"}
{"index":2,"time":30,"process":1,"type":"invoke","f":"txn","value":[["append","x",2]]}
{"index":3,"time":40,"process":1,"type":"ok","f":"txn","value":[["append","x",2]]}
{"index":4,"time":50,"process":2,"type":"invoke","f":"txn","value":[["r","x",null]]}
{"index":5,"time":60,"process":2,"type":"ok","f":"txn","value":[["r","x",[1,2]]]}
`
	rd, err := histories.NewReader(strings.NewReader(file), "history.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	res, err := checker.CheckReader(context.Background(), rd, checker.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Verdict)
	for _, a := range res.Anomalies {
		fmt.Println(a.Kind, a.Ops)
		fmt.Println(a.Explanation)
	}
	// Output:
	// invalid
	// G1a [5 1]
	// transaction 5 read key x = [1 2], which holds 1, appended by transaction 1 (fail), which failed: it read aborted state
	// dirty-update [1 3]
	// key x's version order has 2, appended by transaction 3, which committed, after 1, appended by transaction 1 (fail), which failed: a committed append built on aborted state
}
