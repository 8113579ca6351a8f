package histories

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestDBCopRead(t *testing.T) {
	f, err := os.Open("testdata/dbcop/valid.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := ReadDBCop(f, "valid.json")
	if err != nil {
		t.Fatal(err)
	}
	// The failed read of variable 1 = 9 did not happen: it is left out.
	want := []string{
		`0 ok [["w",0,1],["w",1,1]]`,
		`1 ok [["r",0,1],["r",1,1]]`,
		`1 ok [["w",0,2]]`,
	}
	if len(ops) != len(want) {
		t.Fatalf("got %d ops, want %d: %+v", len(ops), len(want), ops)
	}
	for i, w := range want {
		o := ops[i]
		if got := strings.Join([]string{itoa(o.Process), o.Type.String(), string(o.Value)}, " "); got != w || o.F != "txn" || o.Index != int64(i) {
			t.Errorf("op %d = %s (%+v), want %s", i, got, o, w)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestDBCopReadShapes: the list of sessions alone reads as the whole document does; a
// read of 0 is a read of the initial state; an aborted transaction is a fail
// completion of its session; one with no successful event is left out.
func TestDBCopReadShapes(t *testing.T) {
	in := `[[{"events":[{"write":false,"variable":4,"value":0,"success":true}],"success":true},
	        {"events":[{"write":true,"variable":4,"value":3,"success":false}],"success":true}],
	       [{"events":[{"write":true,"variable":4,"value":5,"success":true,"start_time":1,"end_time":2}],"success":false}]]`
	ops, err := ReadDBCop(strings.NewReader(in), "s.json")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ops {
		got = append(got, itoa(o.Process)+" "+o.Type.String()+" "+string(o.Value))
	}
	if s := strings.Join(got, "; "); s != `0 ok [["r",4,null]]; 1 fail [["w",4,5]]` {
		t.Errorf("got %s", s)
	}
}

func TestDBCopReadRefuses(t *testing.T) {
	ev := `{"write":true,"variable":1,"value":1,"success":true}`
	txn := `{"events":[` + ev + `],"success":true}`
	for _, c := range []struct{ in, want string }{
		{"", "no history in it"},
		{"  \n", "no history in it"},
		{`{"info":"x"}`, `h.json:1:1: no "data"`},
		{`{"data":[]}`, "no transaction"},
		{`{"data":[[` + txn + `]]} x`, "h.json:1:"},
		{`{"data":[[` + txn + `]], "data":[]}`, `"data" twice`},
		{`{"data":[` + txn + `]}`, "session 0 is not a JSON list"},
		{"{\"data\":[[\n" + txn + ",\n 7]]}", "h.json:3:2: session 0, transaction 1"},
		{`[[{"events":[{"write":true,"variable":1,"value":0,"success":true}],"success":true}]]`, "writes 0"},
		{`[[{"events":[{"write":true,"variable":1,"success":true}],"success":true}]]`, `event 0: want "write", "variable", "value" and "success"`},
		{`[[{"events":[{"write":true,"variable":-1,"value":2,"success":true}],"success":true}]]`, "event 0: variable is -1, want an integer, 0 or more"},
		{`[[{"events":[{"write":true,"variable":1.5,"value":2,"success":true}],"success":true}]]`, "h.json:1:3"},
		{`[[{"events":[],"success":"yes"}]]`, "success is a JSON string"},
		{`[[{"events":[]}]]`, `want an object with "events" and "success"`},
		{`[[` + txn + `]`, "h.json:1:"},
		{"[[\xff]]", "h.json:1:3: not valid UTF-8"},
		{`"data"`, "not dbcop's JSON"},
		{`w(1,1,0,0)`, "h.json:1:1"},
	} {
		_, err := ReadDBCop(strings.NewReader(c.in), "h.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of more than one line: %q", c.in, err)
		}
	}
}

// dbcopErr is what every error of ReadDBCop starts with: the file and a position, or
// the file and that nothing of the format is in it.
var dbcopErr = regexp.MustCompile(`^fuzz\.json(:[0-9]+:[0-9]+)?: `)

// FuzzDBCop: the dbcop reader never panics; its errors name the file and, but for an
// empty history, the position; what it accepts are committed and failed transactions
// of rw-register micro-ops.
func FuzzDBCop(f *testing.F) {
	jepsenFuzzSeeds(f, "testdata/dbcop/*.json")
	f.Add([]byte(`[[{"events":[{"write":false,"variable":4,"value":0,"success":true}],"success":false}]]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		ops, err := ReadDBCop(bytes.NewReader(in), "fuzz.json")
		if err != nil {
			if !dbcopErr.MatchString(err.Error()) {
				t.Fatalf("error without file and position: %v", err)
			}
			if !errors.Is(err, ErrEmpty) && !regexp.MustCompile(`^fuzz\.json:[0-9]+:[0-9]+: `).MatchString(err.Error()) {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		if len(ops) == 0 {
			t.Fatal("no ops and no error")
		}
		for i, op := range ops {
			var mops [][3]json.RawMessage
			if op.Index != int64(i) || op.Process < 0 || (op.Type != OK && op.Type != Fail) || op.F != "txn" {
				t.Fatalf("op %d: %+v", i, op)
			}
			if err := json.Unmarshal(op.Value, &mops); err != nil || len(mops) == 0 {
				t.Fatalf("op %d value %s: %v", i, op.Value, err)
			}
		}
	})
}
