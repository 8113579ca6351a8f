package histories

import (
	"bytes"
	"strings"
	"testing"
)

func TestPlumeRead(t *testing.T) {
	in := "w(1,5,0,0)\nw(2,6,0,0)\n\nr(1,5,3,1)\nw(1,7,7,-1)\nr(2,0,3,1)\nr(1,9,3,2)\n"
	ops, err := ReadPlume(strings.NewReader(in), "h.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		process int
		typ     Type
		value   string
	}{
		{0, OK, `[["w",1,5],["w",2,6]]`},
		{3, OK, `[["r",1,5],["r",2,null]]`},
		{3, OK, `[["r",1,9]]`},
		{8, Fail, `[["w",1,7]]`}, // a process no session uses
	}
	if len(ops) != len(want) {
		t.Fatalf("got %d ops, want %d: %+v", len(ops), len(want), ops)
	}
	for i, w := range want {
		o := ops[i]
		if o.Process != w.process || o.Type != w.typ || string(o.Value) != w.value || o.F != "txn" || o.Index != int64(i) {
			t.Errorf("op %d = %+v, want process %d %s %s", i, o, w.process, w.typ, w.value)
		}
	}
}

func TestPlumeReadRefuses(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "no Plume micro-op"},
		{"\n\n", "no Plume micro-op"},
		{"w(1,5,0,0)\nx(1,2,3,4)\n", "h.txt:2"},
		{"w(1,5,0,0)\nw(1,5,0)\n", "want 4 fields"},
		{"w(-1,5,0,0)\n", "field 1"},
		{"w(1,5,0,-2)\n", "field 4"},
		{"w(1,5,0,0)\nr(1,5,1,0)\n", "transaction 0 in session 1"},
		{`{"index":0}`, "h.txt:1"},
	} {
		_, err := ReadPlume(strings.NewReader(c.in), "h.txt")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.in, err, c.want)
		}
	}
}

// TestPlumeRoundTrip writes a history in Plume's format and reads it back: the same
// transactions, keys and values renumbered, the unknown transaction that a read proves
// committed kept as committed (its reads left out), the one nobody read left out, the
// failed one's writes aborted.
func TestPlumeRoundTrip(t *testing.T) {
	ops := []Op{
		{Index: 0, Process: 0, Type: Invoke, F: "txn", Value: []byte(`[["w","a",10],["r","b",null]]`)},
		{Index: 1, Process: 0, Type: OK, F: "txn", Value: []byte(`[["w","a",10],["r","b",null]]`)},
		{Index: 2, Process: 1, Type: Invoke, F: "txn", Value: []byte(`[["r","a",null],["w","b",20]]`)},
		{Index: 3, Process: 1, Type: Info, F: "txn"},
		{Index: 4, Process: 2, Type: Invoke, F: "txn", Value: []byte(`[["w","b",30]]`)},
		{Index: 5, Process: 2, Type: Fail, F: "txn"},
		{Index: 6, Process: 3, Type: Invoke, F: "txn", Value: []byte(`[["w","a",40]]`)},
		{Index: 7, Process: 3, Type: Info, F: "txn"},
		{Index: 8, Process: 4, Type: Invoke, F: "txn", Value: []byte(`[["r","b",null]]`)},
		{Index: 9, Process: 4, Type: OK, F: "txn", Value: []byte(`[["r","b",20]]`)},
		{Index: 10, Process: -1, Type: Info, F: "kill"},
	}
	var buf bytes.Buffer
	n, err := WritePlume(&buf, ops)
	if err != nil {
		t.Fatal(err)
	}
	want := "w(0,1,0,0)\nr(1,0,0,0)\nw(1,2,1,1)\nw(1,3,2,-1)\nr(1,2,4,2)\n"
	if n != 3 || buf.String() != want {
		t.Fatalf("wrote %d committed:\n%s\nwant 3:\n%s", n, buf.String(), want)
	}
	back, err := ReadPlume(&buf, "rt")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range back {
		got = append(got, o.Type.String()+" "+string(o.Value))
	}
	if s := strings.Join(got, "; "); s != `ok [["w",0,1],["r",1,null]]; ok [["w",1,2]]; ok [["r",1,2]]; fail [["w",1,3]]` {
		t.Errorf("read back %s", s)
	}
}
