package histories_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// A history is written as the run goes, one event per operation attempt, and read
// back whole for checking. The second decrement's connection was cut at commit: its
// completion is info, and the worker goes on under a fresh process.
func Example() {
	dir, err := os.MkdirTemp("", "history")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "history.jsonl")

	w, err := histories.Create(path, histories.Header{Workload: "budget", Model: "budget", Seed: 1,
		Params: map[string]json.RawMessage{"budget": histories.Value(2)}})
	if err != nil {
		log.Fatal(err)
	}
	for _, op := range []histories.Op{
		{Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-1"},
		{Process: 0, Type: histories.OK, F: "decrement", OpID: "0-1", Value: histories.Value(map[string]any{"applied": true, "balance": 1})},
		{Process: 0, Type: histories.Invoke, F: "decrement", OpID: "0-2"},
		{Process: 0, Type: histories.Info, F: "decrement", OpID: "0-2", Error: "conn closed"},
	} {
		if _, err := w.Write(op); err != nil {
			log.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}

	h, ops, err := histories.ReadFile(path, false)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Format, h.Model, string(h.Params["budget"]))
	for _, op := range ops {
		desc := op.Type.String() + " " + op.F
		if len(op.Value) > 0 {
			desc += " " + string(op.Value)
		}
		if op.Error != "" {
			desc += " (" + op.Error + ")"
		}
		fmt.Println(op.Index, op.Process, desc)
	}
	// Output:
	// indoubt-history/1 budget 2
	// 0 0 invoke decrement
	// 1 0 ok decrement {"applied":true,"balance":1}
	// 2 0 invoke decrement
	// 3 0 info decrement (conn closed)
}

// Pair turns a history's events into operations: each invocation with the completion
// of the same process that follows it. The write ended unknown (info) and the read never
// completed at all, which a checker treats the same way.
func ExamplePair() {
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "write", Value: []byte("1")},
		{Index: 1, Process: 1, Type: histories.Invoke, F: "read"},
		{Index: 2, Process: 0, Type: histories.Info, F: "write", Error: "conn closed"},
		{Index: 3, Process: 2, Type: histories.Invoke, F: "read"},
		{Index: 4, Process: 2, Type: histories.OK, F: "read", Value: []byte("1")},
	}
	all, err := histories.Pair(ops)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range all {
		fmt.Printf("%s by process %d: %s", o.Invoke.F, o.Invoke.Process, o.Type())
		if v := o.Value(); v != nil {
			fmt.Printf(" %s", v)
		}
		fmt.Println()
	}
	// Output:
	// write by process 0: info
	// read by process 1: info
	// read by process 2: ok 1
}

// A JepsenEDNReader hands over a Jepsen history one op at a time, however long the
// file: nemesis ops come as events of the Nemesis process, and an independent
// [key value] tuple sets Key.
func ExampleJepsenEDNReader() {
	edn := `[{:type :invoke, :f :write, :value [:x 3], :process 0, :time 10, :index 0}
 {:type :info, :f :start, :process :nemesis, :time 15, :index 1}
 {:type :ok, :f :write, :value [:x 3], :process 0, :time 20, :index 2}]`
	r := histories.NewJepsenEDNReader(strings.NewReader(edn), "history.edn", histories.JepsenOptions{})
	for {
		op, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%d at %d: process %d %s %s key %q value %q\n", op.Index, op.Time, op.Process, op.Type, op.F, op.Key, op.Value)
	}
	// Output:
	// 0 at 10: process 0 invoke write key "x" value "3"
	// 1 at 15: process -1 info start key "" value ""
	// 2 at 20: process 0 ok write key "x" value "3"
}

// NextInto reads each event into the same Op, for a reader of long histories that
// keeps nothing of an event once it has looked at it; io.EOF ends the history.
func ExampleReader_NextInto() {
	const file = `{"header":{"format":"indoubt-history/1","workload":"counter","model":"counter"}}
{"index":0,"time":1,"process":0,"type":"invoke","f":"increment"}
{"index":1,"time":2,"process":0,"type":"ok","f":"increment","value":{"wrote":1}}
{"index":2,"time":3,"process":1,"type":"invoke","f":"increment"}
{"index":3,"time":4,"process":1,"type":"info","f":"increment","error":"conn closed"}
`
	rd, err := histories.NewReader(strings.NewReader(file), "history.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	var op histories.Op
	completed := map[histories.Type]int{}
	for {
		if err := rd.NextInto(&op); err == io.EOF {
			break
		} else if err != nil {
			log.Fatal(err)
		}
		if op.Type != histories.Invoke {
			completed[op.Type]++
		}
	}
	fmt.Println(rd.Header().Model, "ok:", completed[histories.OK], "info:", completed[histories.Info])
	// Output:
	// counter ok: 1 info: 1
}
