package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// dbcop's histories (Biswas and Enea, "On the Complexity of Checking Transactional
// Consistency", OOPSLA 2019), as its tool writes them in JSON: an object whose "data"
// holds the sessions (beside "params", "info", "start" and "end", which say how the
// history was made), each session a list of transactions in the order the session ran
// them, each transaction
//
//	{"events": [{"write": true, "variable": 3, "value": 7, "success": true}, ...],
//	 "success": true}
//
// variables and values non-negative integers. Value 0 is every variable's initial
// value: a read of 0 saw no write, and no transaction writes 0. An event whose
// "success" is false did not happen (the client's request failed); a transaction whose
// "success" is false aborted.

// ReadDBCop reads a history in dbcop's JSON format as the events of an rw-register
// history (model "rw-register"): each session a process, numbered from 0 in the order
// of "data"; each committed transaction an ok completion of its session's process,
// without an invocation (the format records no time, so no transaction is ordered
// after another by real time), with ["w", variable, value] and ["r", variable, value]
// micro-ops of its successful events in their order, a read of 0 as ["r", variable,
// null]; each aborted transaction a fail completion of its session's process with the
// same micro-ops. A transaction with no successful event is left out. The whole
// document may also be the list of sessions alone.
//
// Anything else is refused with one error naming name, the line and the column: input
// that is not JSON, or not valid UTF-8; a session that is not a list; a transaction or
// event that is not an object, or lacks one of its fields, or holds a field of another
// type (a negative or fractional variable or value); a write of 0; data after the
// document; and a document with no transaction.
func ReadDBCop(r io.Reader, name string) ([]Op, error) {
	doc, dec, err := readJSONDoc(r, name)
	if err != nil {
		return nil, err
	}
	tok := func(want json.Delim, what string) error {
		off := dec.InputOffset()
		t, err := dec.Token()
		if err != nil {
			return doc.errAt(off, "%s", jsonWhy(err))
		}
		if t != want {
			return doc.errAt(off, "%s is not a JSON %s", what, map[json.Delim]string{'[': "list", '{': "object"}[want])
		}
		return nil
	}
	var ops []Op
	sessions := func() error {
		if err := tok('[', "the sessions"); err != nil {
			return err
		}
		for s := 0; dec.More(); s++ {
			if err := tok('[', fmt.Sprintf("session %d", s)); err != nil {
				return err
			}
			for t := 0; dec.More(); t++ {
				off := dec.InputOffset()
				op, keep, err := dbcopTxn(dec, s)
				if err != nil {
					return doc.errAt(off, "session %d, transaction %d: %v", s, t, err)
				}
				if keep {
					op.Index, op.Time = int64(len(ops)), int64(len(ops))
					ops = append(ops, op)
				}
			}
			if _, err := dec.Token(); err != nil { // the session's ']'
				return doc.errAt(dec.InputOffset(), "%s", jsonWhy(err))
			}
		}
		if _, err := dec.Token(); err != nil { // the sessions' ']'
			return doc.errAt(dec.InputOffset(), "%s", jsonWhy(err))
		}
		return nil
	}
	off := dec.InputOffset()
	first, err := dec.Token()
	switch {
	case errors.Is(err, io.EOF):
		return nil, fmt.Errorf("%s: %w: want dbcop's JSON (an object whose \"data\" lists sessions of transactions)", name, ErrEmpty)
	case err != nil:
		return nil, doc.errAt(off, "%s", jsonWhy(err))
	case first == json.Delim('['):
		// The list of sessions alone: put the '[' back by reading again.
		dec = json.NewDecoder(bytes.NewReader(doc.data))
		dec.UseNumber()
		if err := sessions(); err != nil {
			return nil, err
		}
	case first == json.Delim('{'):
		found := false
		for dec.More() {
			off := dec.InputOffset()
			k, err := dec.Token()
			if err != nil {
				return nil, doc.errAt(off, "%s", jsonWhy(err))
			}
			if k != "data" {
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					return nil, doc.errAt(off, "%s", jsonWhy(err))
				}
				continue
			}
			if found {
				return nil, doc.errAt(off, "\"data\" twice in the history")
			}
			found = true
			if err := sessions(); err != nil {
				return nil, err
			}
		}
		if !found {
			return nil, doc.errAt(off, "no \"data\" in the history: want dbcop's JSON (an object whose \"data\" lists sessions of transactions)")
		}
		if _, err := dec.Token(); err != nil {
			return nil, doc.errAt(dec.InputOffset(), "%s", jsonWhy(err))
		}
	default:
		return nil, doc.errAt(off, "not dbcop's JSON: want an object whose \"data\" lists sessions of transactions")
	}
	if off := dec.InputOffset(); dec.More() || !dbcopAtEnd(doc.data[off:]) {
		return nil, doc.errAt(off, "data after the history")
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%s: %w: no transaction with a successful event in it", name, ErrEmpty)
	}
	return ops, nil
}

// dbcopField returns the value of key in the JSON object raw, for an error message.
func dbcopField(raw json.RawMessage, key string) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	return m[key]
}

// dbcopAtEnd says that rest is only whitespace.
func dbcopAtEnd(rest []byte) bool {
	return len(bytes.TrimSpace(rest)) == 0
}

// dbcopTxn decodes the transaction dec reads next as a completion of process session;
// keep is false for one with no successful event.
func dbcopTxn(dec *json.Decoder, session int) (op Op, keep bool, err error) {
	var t struct {
		Events  *[]json.RawMessage `json:"events"`
		Success *bool              `json:"success"`
	}
	if err := dec.Decode(&t); err != nil {
		return op, false, fmt.Errorf("%s", jsonWhy(err))
	}
	if t.Events == nil || t.Success == nil {
		return op, false, fmt.Errorf("want an object with \"events\" and \"success\"")
	}
	var mops []string
	for i, raw := range *t.Events {
		var e struct {
			Write    *bool   `json:"write"`
			Variable *uint64 `json:"variable"`
			Value    *uint64 `json:"value"`
			Success  *bool   `json:"success"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return op, false, fmt.Errorf("event %d: %s is %s, want %s", i, te.Field, elleShow(dbcopField(raw, te.Field)), map[bool]string{true: "true or false", false: "an integer, 0 or more"}[te.Type.Kind().String() == "bool"])
			}
			return op, false, fmt.Errorf("event %d: %s", i, jsonWhy(err))
		}
		if e.Write == nil || e.Variable == nil || e.Value == nil || e.Success == nil {
			return op, false, fmt.Errorf("event %d: want \"write\", \"variable\", \"value\" and \"success\"", i)
		}
		if !*e.Success {
			continue
		}
		switch {
		case *e.Write && *e.Value == 0:
			return op, false, fmt.Errorf("event %d writes 0 to variable %d: 0 is the initial value, which a read of 0 is taken to see", i, *e.Variable)
		case *e.Write:
			mops = append(mops, fmt.Sprintf(`["w",%d,%d]`, *e.Variable, *e.Value))
		case *e.Value == 0:
			mops = append(mops, fmt.Sprintf(`["r",%d,null]`, *e.Variable))
		default:
			mops = append(mops, fmt.Sprintf(`["r",%d,%d]`, *e.Variable, *e.Value))
		}
	}
	if len(mops) == 0 {
		return op, false, nil
	}
	op = Op{Process: session, Type: OK, F: "txn", Value: json.RawMessage("[" + strings.Join(mops, ",") + "]")}
	if !*t.Success {
		op.Type, op.Error = Fail, "aborted"
	}
	return op, true, nil
}
