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

func TestElleJSONRead(t *testing.T) {
	f, err := os.Open("testdata/elle-json/list-append-valid.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ops, err := ReadElleJSON(f, "valid.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []Op{
		{Index: 0, Time: 10, Process: 0, Type: Invoke, F: "txn", Value: json.RawMessage(`[["append","x",1],["append","y",1]]`)},
		{Index: 1, Time: 20, Process: 0, Type: OK, F: "txn", Value: json.RawMessage(`[["append","x",1],["append","y",1]]`)},
		{Index: 2, Time: 30, Process: 1, Type: Invoke, F: "txn", Value: json.RawMessage(`[["r","x",null],["r","y",null]]`)},
		{Index: 3, Time: 40, Process: 1, Type: OK, F: "txn", Value: json.RawMessage(`[["r","x",[1]],["r","y",[1]]]`)},
		{Index: 4, Time: 45, Process: Nemesis, Type: Info, F: "kill"},
		{Index: 5, Time: 50, Process: 0, Type: Invoke, F: "txn", Value: json.RawMessage(`[["append","x",2]]`)},
		{Index: 6, Time: 60, Process: 0, Type: Info, F: "txn", Value: json.RawMessage(`[["append","x",2]]`), Error: "timeout"},
	}
	if len(ops) != len(want) {
		t.Fatalf("got %d ops, want %d: %+v", len(ops), len(want), ops)
	}
	for i := range want {
		g, w := ops[i], want[i]
		if g.Index != w.Index || g.Time != w.Time || g.Process != w.Process || g.Type != w.Type || g.F != w.F || string(g.Value) != string(w.Value) || g.Error != w.Error {
			t.Errorf("op %d = %+v, want %+v", i, g, w)
		}
	}
}

// TestElleJSONReadShapes: JSON Lines read as a list does; without "index" and "time"
// the ops are numbered by position; without "f", an op is a transaction.
func TestElleJSONReadShapes(t *testing.T) {
	in := "{\"process\":3,\"type\":\"ok\",\"value\":[[\"r\",1,[2]]]}\n{\"process\":4,\"type\":\"fail\",\"f\":null,\"value\":null,\"error\":{\"code\":40001}}\n"
	ops, err := ReadElleJSON(strings.NewReader(in), "h.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != 2 || ops[0].Index != 0 || ops[1].Index != 1 || ops[1].Time != 1 || ops[0].F != "txn" || ops[1].F != "txn" ||
		len(ops[1].Value) != 0 || ops[1].Error != `{"code":40001}` || string(ops[0].Value) != `[["r",1,[2]]]` {
		t.Errorf("got %+v", ops)
	}
}

func TestElleJSONReadRefuses(t *testing.T) {
	inv := `{"process":0,"type":"invoke","f":"txn","value":[]}`
	for _, c := range []struct{ in, want string }{
		{"", "no history in it"},
		{"[]", "no history in it"},
		{"[\n" + inv + ",\n 7]", "h.json:3:2: not an op"},
		{`[{"process":0,"type":"done"}]`, `h.json:1:2: "type" is "done"`},
		{`[{"process":0}]`, `no "type"`},
		{`[{"type":"ok"}]`, `no "process"`},
		{`[{"type":"ok","process":-1}]`, "a process is a worker's number"},
		{`[{"type":"ok","process":"n1"}]`, "a process is a worker's number"},
		{`[{"type":"ok","process":0,"type":"fail"}]`, `key "type" twice`},
		{`[{"type":"ok","process":0,"index":1.5}]`, `"index" is 1.5, want an integer`},
		{`[{"type":"ok","process":0,"index":1},{"type":"ok","process":1}]`, `h.json:1:38: an "index" on some ops`},
		{`[{"type":"ok","process":0,"time":1},{"type":"ok","process":1}]`, `a "time" on some ops`},
		{`[{"type":"ok","process":0,"index":2},{"type":"ok","process":1,"index":2}]`, "index 2 does not increase on index 2 at h.json:1:2"},
		{`[{"type":"ok","process":0,"index":-1}]`, "index -1 is negative"},
		{`[{"type":"invoke","process":0,"time":5},{"type":"ok","process":0,"time":4}]`, "earlier than its invocation"},
		{`[{"type":"invoke","process":0},{"type":"info","process":0},{"type":"invoke","process":0}]`, "after its operation ended in info at h.json:1:"},
		{`[{"type":"invoke","process":0},{"type":"ok","process":1}]`, "without an open invocation"},
		{inv + "]", "h.json:1:"},
		{"[" + inv, "h.json:1:"},
		{"[" + inv + "] {}", "data after"},
		{"[{\"type\":\"ok\",\"process\":0,\"f\":\"\xff\"}]", "h.json:1:32: not valid UTF-8"},
		{`{:type :ok}`, "h.json:1:1"},
	} {
		_, err := ReadElleJSON(strings.NewReader(c.in), "h.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error of more than one line: %q", c.in, err)
		}
	}
}

// FuzzElleJSON: the elle-cli JSON reader never panics; its errors name the file and,
// but for an empty history, the position; what it accepts has valid types, JSON
// values, and indexes that increase.
func FuzzElleJSON(f *testing.F) {
	jepsenFuzzSeeds(f, "testdata/elle-json/*.json")
	f.Add([]byte(`{"process":"nemesis","type":"info","f":"kill","value":{"a":[1,2]}}` + "\n" + `{"process":0,"type":"ok","value":[["r",1,null]],"error":"x"}`))
	positioned := regexp.MustCompile(`^fuzz\.json:[0-9]+:[0-9]+: `)
	f.Fuzz(func(t *testing.T, in []byte) {
		ops, err := ReadElleJSON(bytes.NewReader(in), "fuzz.json")
		if err != nil {
			if !positioned.MatchString(err.Error()) && !(errors.Is(err, ErrEmpty) && strings.HasPrefix(err.Error(), "fuzz.json: ")) {
				t.Fatalf("error without file and position: %v", err)
			}
			return
		}
		for i, op := range ops {
			if op.Type < Invoke || op.Type > Info || op.Process < Nemesis {
				t.Fatalf("op %d: %+v", i, op)
			}
			if len(op.Value) > 0 && !json.Valid(op.Value) {
				t.Fatalf("op %d: value %q is not JSON", i, op.Value)
			}
			if i > 0 && op.Index <= ops[i-1].Index {
				t.Fatalf("op %d: index %d after %d", i, op.Index, ops[i-1].Index)
			}
		}
	})
}
