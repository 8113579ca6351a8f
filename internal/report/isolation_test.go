package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

// txnOps is a list-append history of one process: each transaction invoked at 10*i and
// completed ok at 10*i+5 with the micro-ops given.
func txnOps(t *testing.T, txns ...string) []histories.Op {
	t.Helper()
	var ops []histories.Op
	for i, tx := range txns {
		if !json.Valid([]byte(tx)) {
			t.Fatalf("bad transaction %s", tx)
		}
		id := "0-" + string(rune('a'+i))
		ops = append(ops,
			histories.Op{Index: int64(2 * i), Time: int64(10 * i), Process: 0, Type: histories.Invoke, F: "txn", OpID: id},
			histories.Op{Index: int64(2*i + 1), Time: int64(10*i + 5), Process: 0, Type: histories.OK, F: "txn", OpID: id, Value: json.RawMessage(tx)})
	}
	return ops
}

// An isolation verdict says what the store promises at the level checked (PostgreSQL's
// REPEATABLE READ is snapshot isolation), and whether an acknowledged append was lost:
// none when a later read holds them all, each one named when none does, unknown when no
// read came after.
func TestIsolationNotes(t *testing.T) {
	r := &results.Results{Store: "postgres", Txn: &results.TxnCheck{Models: []string{"repeatable-read"}}}
	both := txnOps(t, `[["r","x",[]],["append","x",1]]`, `[["r","x",[]],["append","x",2]]`, `[["r","x",[1,2]]]`)
	notes := IsolationNotes(r, both)
	if len(notes) != 2 || !strings.Contains(notes[0], "PostgreSQL's REPEATABLE READ is snapshot isolation") ||
		notes[1] != "no acknowledged write was lost: a read of each of the 1 key written, begun after its last acknowledged append, holds every one" {
		t.Errorf("lost update, both appends read after: %q", notes)
	}
	lost := txnOps(t, `[["append","x",1]]`, `[["append","x",2]]`, `[["append","y",3]]`, `[["r","x",[2]],["r","y",[3]]]`)
	notes = IsolationNotes(&results.Results{Store: "redis", Txn: &results.TxnCheck{}}, lost)
	if len(notes) != 1 || notes[0] != "1 acknowledged append is missing from every read begun after it was acknowledged: 1 to key \"x\"" {
		t.Errorf("append 1 never read after: %q", notes)
	}
	unread := txnOps(t, `[["r","x",[]]]`, `[["append","x",1]]`)
	notes = IsolationNotes(&results.Results{Store: "postgres", Txn: &results.TxnCheck{Models: []string{"serializable"}}}, unread)
	if len(notes) != 2 || !strings.Contains(notes[0], "SERIALIZABLE") || !strings.Contains(notes[1], "not known") {
		t.Errorf("no read after the append: %q", notes)
	}
	if notes := IsolationNotes(&results.Results{Store: "postgres"}, both); notes != nil {
		t.Errorf("not a transactional check: %q", notes)
	}
}
