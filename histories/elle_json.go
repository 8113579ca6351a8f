package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// elle-cli's JSON histories: Jepsen's op maps written as JSON objects, either in one
// JSON list or one object after another (a line each, as JSON Lines), such as
//
//	{"index": 0, "process": 0, "type": "invoke", "f": "txn", "value": [["append", 1, 2], ["r", 1, null]], "time": 1000}
//
// "type" is invoke, ok, fail or info; "process" a worker's number or "nemesis";
// "index" and "time" integers, given on every op or on none; "value" any JSON, a
// transaction's a list of micro-ops ["append"|"r"|"w", key, value]; "error" the
// error of a fail or info completion. Other fields are ignored.

// ReadElleJSON reads a Jepsen history in elle-cli's JSON format, by Jepsen's rules as
// ReadJepsenEDN reads an EDN one: a value of null is no value (Value left empty), an
// op without "f" (or with "f" null) a transaction ("txn"), as Elle reads its own test
// histories; Index and Time are the ops' own when given, else their positions; keys
// and values of micro-ops stay as JSON wrote them (a string "x", an integer 1).
//
// Anything else is refused with one error naming name, the line and the column of the
// op: input that is not JSON or not valid UTF-8; an op that is not an object, has a
// key twice, or lacks "type" or "process"; a type, process, index or time of the wrong
// kind; an "index" or "time" on some ops and not others; an index that does not
// increase; a completion earlier than its invocation; and what Jepsen's rules of a
// process forbid (see "What every reader refuses" in order.go's comment: an invoke
// while the process has one open or after its info, a completion with none open in a
// history with invocations). Input with no op is refused with an error wrapping
// ErrEmpty.
func ReadElleJSON(r io.Reader, name string) ([]Op, error) {
	doc, dec, err := readJSONDoc(r, name)
	if err != nil {
		return nil, err
	}
	list := len(bytes.TrimSpace(doc.data)) > 0 && bytes.TrimSpace(doc.data)[0] == '['
	if list {
		if _, err := dec.Token(); err != nil {
			return nil, doc.errAt(0, "%s", jsonWhy(err))
		}
	}
	var (
		ops            []Op
		times          openTimes
		useIdx, useTm  bool
		lastIdx        int64
		lastAt         string
		hasIdx, hasTm  bool
		idx, tm, count int64
		ats            []string // each op's position, for errors that refer back
	)
	for dec.More() {
		off := dec.InputOffset()
		at := doc.at(off)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s: %s", at, jsonWhy(err))
		}
		op, err := elleJSONOp(raw, &hasIdx, &idx, &hasTm, &tm)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", at, err)
		}
		if count == 0 {
			useIdx, useTm = hasIdx, hasTm
		}
		switch {
		case hasIdx != useIdx:
			return nil, fmt.Errorf("%s: an \"index\" on some ops and not on others (the first op's says): give every op an index, or none", at)
		case hasTm != useTm:
			return nil, fmt.Errorf("%s: a \"time\" on some ops and not on others (the first op's says): give every op a time, or none", at)
		}
		op.Index, op.Time = count, count
		if hasIdx {
			if idx < 0 {
				return nil, fmt.Errorf("%s: index %d is negative", at, idx)
			}
			if count > 0 && idx <= lastIdx {
				return nil, fmt.Errorf("%s: index %d does not increase on index %d at %s: duplicated or reordered ops", at, idx, lastIdx, lastAt)
			}
			op.Index, lastIdx, lastAt = idx, idx, at
		}
		if hasTm {
			op.Time = tm
		}
		if op.Process >= 0 {
			// openTimes names the op it refers back to by its line: give it the op's
			// number, and name the op's position in the error instead.
			if op.Type == Invoke {
				err = times.invoke(op.Process, op.Time, count+1)
			} else {
				err = times.complete(op.Process, op.Type, op.Time, count+1)
			}
			if err != nil {
				msg := elleLineRef.ReplaceAllStringFunc(err.Error(), func(m string) string {
					n, _ := strconv.Atoi(m[strings.LastIndexByte(m, ' ')+1:])
					if n < 1 || n > len(ats) {
						return m
					}
					return "at " + ats[n-1]
				})
				return nil, fmt.Errorf("%s: %s", at, msg)
			}
		}
		ops = append(ops, op)
		ats = append(ats, at)
		count++
	}
	if list {
		off := dec.InputOffset()
		if _, err := dec.Token(); err != nil {
			return nil, doc.errAt(off, "%s", jsonWhy(err))
		}
		if off := dec.InputOffset(); len(bytes.TrimSpace(doc.data[off:])) > 0 {
			return nil, doc.errAt(off, "data after the history's closing ']'")
		}
	} else if off := dec.InputOffset(); len(bytes.TrimSpace(doc.data[off:])) > 0 {
		// More() stops at a stray ']' or '}' without an error: name it.
		return nil, doc.errAt(off, "not an op: want a JSON object")
	}
	if len(ops) == 0 {
		return nil, fmt.Errorf("%s: %w: want elle-cli's JSON (a list of op objects with \"type\", \"process\", \"f\", \"value\")", name, ErrEmpty)
	}
	return ops, nil
}

// elleJSONOp reads one op object.
func elleJSONOp(raw json.RawMessage, hasIdx *bool, idx *int64, hasTm *bool, tm *int64) (Op, error) {
	var op Op
	*hasIdx, *hasTm = false, false
	var hasType, hasProcess bool
	integer := func(key string, v json.RawMessage) (int64, error) {
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q is %s, want an integer", key, elleShow(v))
		}
		return n, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return op, fmt.Errorf("not an op: want a JSON object, got %s", elleShow(raw))
	}
	err := jsonMembers(raw, func(key string, v json.RawMessage) error {
		null := string(v) == "null"
		switch key {
		case "type":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return fmt.Errorf("\"type\" is %s, want invoke, ok, fail or info", elleShow(v))
			}
			t, err := ParseType(s)
			if err != nil {
				return fmt.Errorf("\"type\" is %s, want invoke, ok, fail or info", elleShow(v))
			}
			op.Type, hasType = t, true
		case "process":
			var s string
			if json.Unmarshal(v, &s) == nil && s == jepsenNemesisProcess {
				op.Process, hasProcess = Nemesis, true
				return nil
			}
			n, err := integer(key, v)
			if err != nil || n < 0 || n > 1<<31-1 {
				return fmt.Errorf("\"process\" is %s: a process is a worker's number (0 or more) or \"nemesis\"", elleShow(v))
			}
			op.Process, hasProcess = int(n), true
		case "f":
			if null {
				return nil
			}
			if err := json.Unmarshal(v, &op.F); err != nil || op.F == "" {
				return fmt.Errorf("\"f\" is %s, want a function's name", elleShow(v))
			}
		case "value":
			if null {
				return nil
			}
			var b bytes.Buffer
			if err := json.Compact(&b, v); err != nil {
				return err
			}
			op.Value = b.Bytes()
		case "index", "time":
			n, err := integer(key, v)
			if err != nil {
				return err
			}
			if key == "index" {
				*idx, *hasIdx = n, true
			} else {
				*tm, *hasTm = n, true
			}
		case "error":
			if null {
				return nil
			}
			var s string
			if json.Unmarshal(v, &s) == nil {
				op.Error = s
			} else {
				var b bytes.Buffer
				if err := json.Compact(&b, v); err != nil {
					return err
				}
				op.Error = b.String()
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return op, err
	case !hasType:
		return op, errors.New("op has no \"type\"")
	case !hasProcess:
		return op, errors.New("op has no \"process\"")
	}
	if op.F == "" && op.Process != Nemesis {
		op.F = "txn"
	}
	return op, nil
}

// elleLineRef finds the references back to an op in openTimes's errors.
var elleLineRef = regexp.MustCompile(`(on )?line [0-9]+`)

// elleShow quotes the start of a JSON value for an error message.
func elleShow(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}
