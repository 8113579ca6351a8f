package txn

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Func is the function of a micro-op, as the history spells it.
type Func string

// The micro-op functions: list-append transactions append and read whole lists,
// rw-register transactions write and read single values.
const (
	Append Func = "append"
	Read   Func = "r"
	Write  Func = "w"
)

// Mop is one micro-op of a transaction. Keys and values are integers; every value
// appended or written is unique across the run, so it names the transaction that wrote
// it.
type Mop struct {
	F   Func
	Key int64
	// Value is what an append or a write puts; a register read's result when Found.
	Value int64
	// List is a done list read's result: never nil, empty for a key never appended
	// to. A done read with a nil List is a register read.
	List []int64
	// Done is set on a read once it has its result; an invocation's reads are not done
	// and encode as null.
	Done bool
	// Found is set on a done register read that found a value; a register never written
	// reads as null.
	Found bool
}

// IsRead reports whether m is a read.
func (m Mop) IsRead() bool { return m.F == Read }

// Txn is a transaction: its micro-ops in order. It encodes as the history's transaction
// value: [["append",1,7],["r",2,[3,5]],["w",3,8],["r",3,null]].
type Txn []Mop

// ReadOnly reports whether every micro-op of t is a read.
func (t Txn) ReadOnly() bool {
	for _, m := range t {
		if !m.IsRead() {
			return false
		}
	}
	return true
}

// Keys returns the distinct keys t touches, in the order it first touches them.
func (t Txn) Keys() []int64 {
	var ks []int64
outer:
	for _, m := range t {
		for _, k := range ks {
			if k == m.Key {
				continue outer
			}
		}
		ks = append(ks, m.Key)
	}
	return ks
}

// Clone returns a copy of t that shares nothing with it.
func (t Txn) Clone() Txn {
	out := make(Txn, len(t))
	for i, m := range t {
		out[i] = m
		if m.List != nil {
			out[i].List = append([]int64(nil), m.List...)
		}
	}
	return out
}

// AppendJSON appends t's history value to b (histories.JSONAppender).
func (t Txn) AppendJSON(b []byte) []byte {
	b = append(b, '[')
	for i, m := range t {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `["`...)
		b = append(b, m.F...)
		b = append(b, `",`...)
		b = strconv.AppendInt(b, m.Key, 10)
		b = append(b, ',')
		switch {
		case m.F != Read:
			b = strconv.AppendInt(b, m.Value, 10)
		case !m.Done:
			b = append(b, "null"...)
		case m.List != nil:
			b = appendList(b, m.List)
		case m.Found:
			b = strconv.AppendInt(b, m.Value, 10)
		default:
			b = append(b, "null"...)
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

func appendList(b []byte, l []int64) []byte {
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return append(b, ']')
}

// MarshalJSON encodes t as AppendJSON does.
func (t Txn) MarshalJSON() ([]byte, error) { return t.AppendJSON(nil), nil }

// UnmarshalJSON reads a transaction value back: what a history holds. A read's list
// argument makes a list read (List non-nil, even when empty); a number a register read
// that found it; null an invocation's read, or a register read of a key never written
// when the value is a completion's (Done is then set by the caller, who knows which).
func (t *Txn) UnmarshalJSON(b []byte) error {
	var raw [][]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("transaction: %w", err)
	}
	out := make(Txn, 0, len(raw))
	for i, r := range raw {
		if len(r) != 3 {
			return fmt.Errorf("transaction: micro-op %d has %d elements, want 3", i, len(r))
		}
		var m Mop
		var f string
		if err := json.Unmarshal(r[0], &f); err != nil {
			return fmt.Errorf("transaction: micro-op %d: function: %w", i, err)
		}
		m.F = Func(f)
		if m.F != Append && m.F != Read && m.F != Write {
			return fmt.Errorf("transaction: micro-op %d: unknown function %q", i, f)
		}
		if err := json.Unmarshal(r[1], &m.Key); err != nil {
			return fmt.Errorf("transaction: micro-op %d: key: %w", i, err)
		}
		switch arg := string(r[2]); {
		case arg == "null":
			if m.F != Read {
				return fmt.Errorf("transaction: micro-op %d: %s of null", i, m.F)
			}
		case len(arg) > 0 && arg[0] == '[':
			if m.F != Read {
				return fmt.Errorf("transaction: micro-op %d: %s of a list", i, m.F)
			}
			m.List = []int64{}
			if err := json.Unmarshal(r[2], &m.List); err != nil {
				return fmt.Errorf("transaction: micro-op %d: list: %w", i, err)
			}
			m.Done = true
		default:
			if err := json.Unmarshal(r[2], &m.Value); err != nil {
				return fmt.Errorf("transaction: micro-op %d: value: %w", i, err)
			}
			if m.F == Read {
				m.Done, m.Found = true, true
			}
		}
		out = append(out, m)
	}
	*t = out
	return nil
}
