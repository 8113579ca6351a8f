package indoubttest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
)

// A transaction is recorded twice: invoked with its reads unknown, completed with what
// they saw.
func ExampleTxn() {
	tx := indoubttest.Txn{indoubttest.Append("x", 1), indoubttest.ReadList("y")}
	invoked, _ := json.Marshal(tx) // w.Invoke("txn", tx)
	tx[1].SawList([]int64{3, 4})   // the code under test ran the read
	done, _ := json.Marshal(tx)    // op.Ok(tx)
	fmt.Println(string(invoked))
	fmt.Println(string(done))

	reg := indoubttest.Txn{indoubttest.Write("x", 7), indoubttest.ReadValue("y")}
	reg[1].SawValue(nil) // never written
	b, _ := json.Marshal(reg)
	fmt.Println(string(b))
	// Output:
	// [["append","x",1],["r","y",null]]
	// [["append","x",1],["r","y",[3,4]]]
	// [["w","x",7],["r","y",null]]
}

// TestTxnModels: without a server, the list-append model catches a lost update that a
// test recorded (two transactions read the same list and both appended to it), names it,
// and passes the same transactions run one after the other; rw-register likewise; a
// transaction recorded with a value the model does not read, or an unknown consistency
// model, fails the test with the call to use.
func TestTxnModels(t *testing.T) {
	run := func(t testing.TB, m indoubttest.Model, txns ...[2]indoubttest.Txn) *indoubttest.Report {
		rec := indoubttest.NewRecorder(t, nil)
		var ops []*indoubttest.Op
		for _, tx := range txns {
			ops = append(ops, rec.Worker().Invoke("txn", tx[0]))
		}
		for i, tx := range txns {
			ops[i].Ok(tx[1])
		}
		return indoubttest.Evaluate(t, rec, m)
	}
	la := func(read []int64, v int64) [2]indoubttest.Txn {
		inv := indoubttest.Txn{indoubttest.ReadList("x"), indoubttest.Append("x", v)}
		done := append(indoubttest.Txn(nil), inv...)
		done[0].SawList(read)
		return [2]indoubttest.Txn{inv, done}
	}
	if r := run(t, indoubttest.ListAppend("serializable"), la(nil, 1), la(nil, 2), la([]int64{1, 2}, 3)); r.Verdict != checker.Invalid || !r.Found("lost-update") || !strings.Contains(r.Text, "lost-update") {
		t.Errorf("two appends on the same empty read: %v\n%s", r.Verdict, r.Text)
	}
	if r := run(t, indoubttest.ListAppend("serializable"), la(nil, 1), la([]int64{1}, 2), la([]int64{1, 2}, 3)); r.Verdict != checker.Valid {
		t.Errorf("one after the other: %v\n%s", r.Verdict, r.Text)
	}
	seven := int64(7)
	rw := func(read *int64, v int64) [2]indoubttest.Txn {
		inv := indoubttest.Txn{indoubttest.ReadValue("x"), indoubttest.Write("x", v)}
		done := append(indoubttest.Txn(nil), inv...)
		done[0].SawValue(read)
		return [2]indoubttest.Txn{inv, done}
	}
	if r := run(t, indoubttest.RWRegister(), rw(nil, 7), rw(&seven, 8)); r.Verdict != checker.Valid {
		t.Errorf("rw-register, one after the other: %v\n%s", r.Verdict, r.Text)
	}
	for _, tc := range []struct {
		name  string
		model indoubttest.Model
		tx    indoubttest.Txn
		want  string
	}{
		{"a write in a list-append history", indoubttest.ListAppend(), indoubttest.Txn{indoubttest.Write("x", 1)}, `w.Invoke("txn", indoubttest.Txn{indoubttest.Append(key, v)`},
		{"a read not filled in", indoubttest.ListAppend(), indoubttest.Txn{indoubttest.ReadList("x")}, "tx[i].SawList(list)"},
		{"an unknown consistency model", indoubttest.ListAppend("serialisable"), indoubttest.Txn{indoubttest.Append("x", 1)}, "ListAppend"},
	} {
		c := &capture{TB: t}
		rec := indoubttest.NewRecorder(c, nil)
		rec.Worker().Invoke("txn", tc.tx).Ok(tc.tx)
		indoubttest.Evaluate(c, rec, tc.model)
		if msg := strings.Join(c.errs, "\n"); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %q, want it to say %q", tc.name, msg, tc.want)
		}
	}
}
