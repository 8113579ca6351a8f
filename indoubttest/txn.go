package indoubttest

import (
	"encoding/json"
	"fmt"

	"github.com/indoubt/indoubt/checker"
)

// Isolation from your own code: the list-append and rw-register models.
//
// A test runs transactions of its own design through the code under test, each a few
// micro-ops over a few keys, records each as one operation whose value is the
// transaction (Txn), and Check holds the history to the consistency models named, in
// the manner of Jepsen's Elle (checker.CheckListAppend, checker.CheckRWRegister): a
// cycle of dependencies between transactions that the models forbid fails the test,
// with each anomaly named (G-single-item, G2-item, lost-update, ...).

// ListAppend is transactions over lists: Append(key, v) appends v to the list at key,
// ReadList(key) reads the whole list. Every value appended to a key must be unique (a
// counter per test does). The history must satisfy the consistency models named
// (checker.TxnConsistencyModels: "serializable", "snapshot-isolation",
// "read-committed", ...; none: "strict-serializable"). Record each transaction as
// Worker.Invoke("txn", tx) with its micro-ops, the reads not yet known, and complete it
// with Op.Ok(tx) once the reads are filled in (MicroOp.SawList).
func ListAppend(models ...string) Model {
	return txnModel(checker.ListAppendModel, models, "append")
}

// RWRegister is transactions over registers: Write(key, v) writes v, ReadValue(key)
// reads the register (MicroOp.SawValue; nil for a register never written). Every value
// written to a key must be unique. As ListAppend otherwise.
func RWRegister(models ...string) Model {
	return txnModel(checker.RWRegisterModel, models, "w")
}

func txnModel(name string, models []string, write string) Model {
	m := Model{name: name, fs: map[string]function{
		checker.TxnFunction: {
			invoke: shape{isTxn(write, false), fmt.Sprintf("w.Invoke(\"txn\", indoubttest.Txn{indoubttest.%s(key, v), indoubttest.%s(key)})", writeName(write), readName(write))},
			ok:     shape{isTxn(write, true), fmt.Sprintf("op.Ok(tx), every read filled in with %s", sawName(write))},
		},
	}}
	if len(models) > 0 {
		if err := (checker.TxnOptions{ConsistencyModels: models}).Validate(); err != nil {
			m.bad = fmt.Sprintf("%s: %v", map[string]string{"append": "ListAppend", "w": "RWRegister"}[write], err)
		}
		m.params = map[string]json.RawMessage{"consistency_models": mustJSON(models)}
	}
	return m
}

func writeName(w string) string {
	if w == "append" {
		return "Append"
	}
	return "Write"
}

func readName(w string) string {
	if w == "append" {
		return "ReadList"
	}
	return "ReadValue"
}

func sawName(w string) string {
	if w == "append" {
		return "tx[i].SawList(list)"
	}
	return "tx[i].SawValue(v)"
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// isTxn reports whether v is a transaction of the model whose write is write: micro-ops
// [write, key, value] and ["r", key, seen], with every list-append read filled in when
// done (an ok completion).
func isTxn(write string, done bool) func(json.RawMessage) bool {
	return func(v json.RawMessage) bool {
		var mops [][]json.RawMessage
		if json.Unmarshal(v, &mops) != nil || len(mops) == 0 {
			return false
		}
		for _, m := range mops {
			var f string
			if len(m) != 3 || json.Unmarshal(m[0], &f) != nil {
				return false
			}
			switch f {
			case write:
				if string(m[2]) == "null" {
					return false
				}
			case "r":
				var l []int64
				if write == "append" && string(m[2]) != "null" && json.Unmarshal(m[2], &l) != nil {
					return false
				}
				if write == "append" && done && string(m[2]) == "null" {
					return false
				}
			default:
				return false
			}
		}
		return true
	}
}

// Txn is one transaction of the list-append or rw-register model: its micro-ops in the
// order the code runs them. It is the value of the operation's invocation (reads not yet
// known) and, with each read filled in, of its ok completion. Its JSON is the history
// format's: [["append","x",1],["r","y",[1,2]]].
type Txn []MicroOp

// MicroOp is one step of a transaction: an append or a write of a value to a key, or a
// read of a key. Make one with Append, ReadList, Write or ReadValue.
type MicroOp struct {
	// F is "append", "w" or "r".
	F string
	// Key is the list or register.
	Key string
	// Value is what an append or write wrote; for a read, what it saw once filled in
	// (a []int64 list, an *int64 register value), nil until then.
	Value any
}

// Append appends v to the list at key (list-append).
func Append(key string, v int64) MicroOp { return MicroOp{F: "append", Key: key, Value: v} }

// ReadList reads the list at key (list-append); fill in what it saw with SawList.
func ReadList(key string) MicroOp { return MicroOp{F: "r", Key: key} }

// Write writes v to the register at key (rw-register).
func Write(key string, v int64) MicroOp { return MicroOp{F: "w", Key: key, Value: v} }

// ReadValue reads the register at key (rw-register); fill in what it saw with
// SawValue.
func ReadValue(key string) MicroOp { return MicroOp{F: "r", Key: key} }

// SawList fills in the list a ReadList saw, in the list's order; a nil list is the
// empty list (the key had no row).
func (m *MicroOp) SawList(list []int64) {
	if list == nil {
		list = []int64{}
	}
	m.Value = list
}

// SawValue fills in the value a ReadValue saw; nil when the register was never
// written.
func (m *MicroOp) SawValue(v *int64) {
	if v == nil {
		m.Value = nil
		return
	}
	m.Value = *v
}

// MarshalJSON writes the micro-op as the history format has it: [f, key, value].
func (m MicroOp) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{m.F, m.Key, m.Value})
}
