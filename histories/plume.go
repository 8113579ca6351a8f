package histories

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Plume's text format (Liu et al., "Plume: Efficient and Complete Black-Box Checking
// of Weak Isolation Levels", OOPSLA 2024), which AWDIT reads too: one micro-op a line,
//
//	r(key,value,session,txn)
//	w(key,value,session,txn)
//
// all four non-negative integers but txn, which is -1 for the writes of aborted
// transactions. A transaction is its lines with one txn id, in the order they come;
// a session's transactions are in the order of their first lines. Value 0 is every
// key's initial value: a read of 0 saw no write.

// ReadPlume reads a history in Plume's text format as the events of an rw-register
// history (model "rw-register"): each committed transaction an ok completion of its
// session's process, without an invocation (nothing in the format says when a
// transaction ran, so none is ordered after another by real time), ["r", key, value]
// and ["w", key, value] micro-ops with keys and values as integers, a read of 0 as a
// read of null; each aborted write a failed transaction of its own, of a process no
// session uses. Blank lines are skipped; any other line that is not a micro-op is an
// error naming its line, and so is a file with no micro-op. name names the input in
// errors.
func ReadPlume(r io.Reader, name string) ([]Op, error) {
	type txn struct {
		session uint64
		mops    []json.RawMessage
	}
	var order []int64 // committed transaction ids, by first line
	txns := map[int64]*txn{}
	var aborted []json.RawMessage
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	var maxSession uint64
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		f, key, val, session, id, err := parsePlumeLine(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a Plume micro-op (%v): %.60q", name, line, err, text)
		}
		var mop json.RawMessage
		switch {
		case f == 'w':
			mop = json.RawMessage(fmt.Sprintf(`["w",%d,%d]`, key, val))
		case val == 0:
			mop = json.RawMessage(fmt.Sprintf(`["r",%d,null]`, key))
		default:
			mop = json.RawMessage(fmt.Sprintf(`["r",%d,%d]`, key, val))
		}
		maxSession = max(maxSession, session)
		if id == -1 {
			if f == 'w' {
				aborted = append(aborted, mop)
			}
			continue
		}
		t := txns[id]
		if t == nil {
			t = &txn{session: session}
			txns[id] = t
			order = append(order, id)
		} else if t.session != session {
			return nil, fmt.Errorf("%s:%d: transaction %d in session %d, after lines of it in session %d", name, line, id, session, t.session)
		}
		t.mops = append(t.mops, mop)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(order) == 0 && len(aborted) == 0 {
		return nil, fmt.Errorf("%s: no Plume micro-op in it (r(key,value,session,txn) or w(...))", name)
	}
	if maxSession >= 1<<31-1 {
		return nil, fmt.Errorf("%s: session %d out of range", name, maxSession)
	}
	var ops []Op
	add := func(process int, typ Type, value json.RawMessage) {
		op := Op{Index: int64(len(ops)), Time: int64(len(ops)), Process: process, Type: typ, F: "txn", Value: value}
		if typ == Fail {
			op.Error = "aborted"
		}
		ops = append(ops, op)
	}
	for _, id := range order {
		t := txns[id]
		add(int(t.session), OK, json.RawMessage("["+string(bytes.Join(rawSlices(t.mops), []byte(",")))+"]"))
	}
	for i, m := range aborted {
		add(int(maxSession)+1+i, Fail, json.RawMessage("["+string(m)+"]"))
	}
	return ops, nil
}

func rawSlices(ms []json.RawMessage) [][]byte {
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// parsePlumeLine reads "r(k,v,s,t)" or "w(k,v,s,t)".
func parsePlumeLine(s string) (f byte, key, val, session uint64, id int64, err error) {
	if len(s) < 2 || (s[0] != 'r' && s[0] != 'w') || s[1] != '(' || !strings.HasSuffix(s, ")") {
		return 0, 0, 0, 0, 0, fmt.Errorf("want r(...) or w(...)")
	}
	parts := strings.Split(s[2:len(s)-1], ",")
	if len(parts) != 4 {
		return 0, 0, 0, 0, 0, fmt.Errorf("want 4 fields, got %d", len(parts))
	}
	var nums [3]uint64
	for i := range nums {
		if nums[i], err = strconv.ParseUint(strings.TrimSpace(parts[i]), 10, 63); err != nil {
			return 0, 0, 0, 0, 0, fmt.Errorf("field %d: %v", i+1, err)
		}
	}
	if id, err = strconv.ParseInt(strings.TrimSpace(parts[3]), 10, 64); err != nil || id < -1 {
		return 0, 0, 0, 0, 0, fmt.Errorf("field 4: want a transaction id or -1")
	}
	return s[0], nums[0], nums[1], nums[2], id, nil
}

// WritePlume writes the transactions of an rw-register history (ops, as ReadFile or
// ReadJepsenEDN return them) in Plume's text format, so that the same history can be
// given to the checkers that read it (Plume, AWDIT). Sessions are processes; keys
// are numbered from 0 and each key's values from 1, in the order they first appear
// (a read of null is a read of 0, the initial value). An ok transaction is written
// as committed; a failed one's writes as aborted (txn -1); one whose outcome is
// unknown as committed when an ok transaction read one of its writes (which proves it
// committed), else left out. A failed or unknown transaction's micro-ops are its
// completion's value, or its invocation's when the completion has none. It returns
// the number of transactions written as committed.
func WritePlume(w io.Writer, ops []Op) (int, error) {
	type mop struct {
		write    bool
		key, val string // canonical JSON
	}
	type txn struct {
		process int
		status  Type
		mops    []mop
	}
	decode := func(op *Op, v json.RawMessage) ([]mop, error) {
		var raw [][]json.RawMessage
		if err := json.Unmarshal(v, &raw); err != nil {
			return nil, fmt.Errorf("index %d: value is not a list of micro-ops: %v", op.Index, err)
		}
		out := make([]mop, 0, len(raw))
		for _, m := range raw {
			if len(m) != 3 {
				return nil, fmt.Errorf("index %d: micro-op %s: want [f, key, value]", op.Index, m)
			}
			var f string
			if err := json.Unmarshal(m[0], &f); err != nil || f != "r" && f != "w" {
				return nil, fmt.Errorf("index %d: micro-op %s: not an rw-register read or write", op.Index, m)
			}
			out = append(out, mop{write: f == "w", key: canonicalJSON(m[1]), val: canonicalJSON(m[2])})
		}
		return out, nil
	}
	var txns []txn
	open := map[int][]json.RawMessage{} // each process's open invocations' values
	for i := range ops {
		op := &ops[i]
		if !op.IsClient() || op.F != "txn" {
			continue
		}
		if op.Type == Invoke {
			open[op.Process] = append(open[op.Process], op.Value)
			continue
		}
		var inv json.RawMessage
		if q := open[op.Process]; len(q) > 0 {
			inv, open[op.Process] = q[0], q[1:]
		}
		v := op.Value
		if op.Type != OK && (len(v) == 0 || string(v) == "null") {
			v = inv
		}
		if len(v) == 0 {
			if op.Type == OK {
				return 0, fmt.Errorf("index %d: ok transaction without a value", op.Index)
			}
			continue
		}
		mops, err := decode(op, v)
		if err != nil {
			return 0, err
		}
		txns = append(txns, txn{process: op.Process, status: op.Type, mops: mops})
	}
	// The unknown transactions an ok read proves committed.
	read := map[[2]string]bool{}
	for _, t := range txns {
		if t.status == OK {
			for _, m := range t.mops {
				if !m.write {
					read[[2]string{m.key, m.val}] = true
				}
			}
		}
	}
	keys := map[string]int{}
	vals := map[[2]string]int{}
	num := func(m mop) (int, int) {
		k, ok := keys[m.key]
		if !ok {
			k = len(keys)
			keys[m.key] = k
		}
		if m.val == "null" {
			return k, 0
		}
		v, ok := vals[[2]string{m.key, m.val}]
		if !ok {
			v = len(vals) + 1
			vals[[2]string{m.key, m.val}] = v
		}
		return k, v
	}
	bw := bufio.NewWriter(w)
	committed := 0
	for _, t := range txns {
		id := -1
		switch t.status {
		case OK:
			id = committed
		case Info:
			seen := false
			for _, m := range t.mops {
				seen = seen || m.write && read[[2]string{m.key, m.val}]
			}
			if !seen {
				continue
			}
			id = committed
		}
		if id >= 0 {
			committed++
		}
		for _, m := range t.mops {
			if id < 0 && !m.write {
				continue
			}
			if id >= 0 && t.status == Info && !m.write {
				continue // what an unknown transaction read is not known
			}
			f := 'r'
			if m.write {
				f = 'w'
			}
			k, v := num(m)
			fmt.Fprintf(bw, "%c(%d,%d,%d,%d)\n", f, k, v, t.process, id)
		}
	}
	return committed, bw.Flush()
}

// canonicalJSON returns the compact text of a JSON value, the same for equal values
// written differently.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
