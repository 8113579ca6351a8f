package histories_test

import (
	"fmt"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// A history as dbcop writes it: session 0 writes variables 0 and 1; session 1 reads
// variable 0 as session 0 wrote it and variable 1 at its initial value 0 (a fractured
// read, which read atomic forbids), then writes in a transaction that aborts.
func ExampleReadDBCop() {
	doc := `{"info": "example", "data": [
	  [{"events": [{"write": true, "variable": 0, "value": 1, "success": true},
	               {"write": true, "variable": 1, "value": 1, "success": true}], "success": true}],
	  [{"events": [{"write": false, "variable": 0, "value": 1, "success": true},
	               {"write": false, "variable": 1, "value": 0, "success": true}], "success": true},
	   {"events": [{"write": true, "variable": 1, "value": 2, "success": true}], "success": false}]]}`
	ops, err := histories.ReadDBCop(strings.NewReader(doc), "history.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range ops {
		fmt.Println(op.Process, op.Type, string(op.Value))
	}
	_, err = histories.ReadDBCop(strings.NewReader(`{"data": [[{"events": []}]]}`), "cut.json")
	fmt.Println(err)
	// Output:
	// 0 ok [["w",0,1],["w",1,1]]
	// 1 ok [["r",0,1],["r",1,null]]
	// 1 fail [["w",1,2]]
	// cut.json:1:12: session 0, transaction 0: want an object with "events" and "success"
}

// A Jepsen list-append history as elle-cli reads it in JSON: process 0 appends 1 to
// key "x"; process 1 reads it. Ops without "f" are transactions, as Elle reads them.
func ExampleReadElleJSON() {
	doc := `[{"index": 0, "process": 0, "type": "invoke", "value": [["append", "x", 1]]},
	 {"index": 1, "process": 0, "type": "ok", "value": [["append", "x", 1]]},
	 {"index": 2, "process": 1, "type": "invoke", "value": [["r", "x", null]]},
	 {"index": 3, "process": 1, "type": "ok", "value": [["r", "x", [1]]]}]`
	ops, err := histories.ReadElleJSON(strings.NewReader(doc), "history.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, op := range ops {
		fmt.Println(op.Index, op.Process, op.Type, op.F, string(op.Value))
	}
	// Output:
	// 0 0 invoke txn [["append","x",1]]
	// 1 0 ok txn [["append","x",1]]
	// 2 1 invoke txn [["r","x",null]]
	// 3 1 ok txn [["r","x",[1]]]
}
