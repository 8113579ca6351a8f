package histories_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/indoubt/indoubt/histories"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// historySchema compiles schemas/history.schema.json, the published description of
// history.jsonl.
func historySchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "schemas", "history.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// validateLines validates every line of a history file against the schema.
func validateLines(t *testing.T, sch *jsonschema.Schema, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), histories.MaxLine)
	n := 0
	for sc.Scan() {
		n++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc.Bytes()))
		if err != nil {
			t.Fatalf("%s line %d: %v", path, n, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s line %d does not follow the schema: %v", path, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSchemaValidatesRecordedHistories holds the schema to the golden histories of the
// checkers (recorded runs of every workload among them) and to what the Writer writes.
func TestSchemaValidatesRecordedHistories(t *testing.T) {
	sch := historySchema(t)
	paths, err := filepath.Glob(filepath.Join("..", "checker", "testdata", "*", "*.jsonl"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("golden histories: %d found, %v", len(paths), err)
	}
	lines := 0
	for _, p := range paths {
		lines += validateLines(t, sch, p)
	}
	t.Logf("%d histories, %d lines", len(paths), lines)

	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := histories.Create(path, histories.Header{Workload: "register", Model: "cas-register", Store: "postgres", Seed: 7,
		Params: map[string]json.RawMessage{"initial": histories.Value(0)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range []histories.Op{
		{Process: 0, Type: histories.Invoke, F: "cas", Key: "k1", Value: histories.Value([]int{0, 1}), OpID: "0-1", Conn: "127.0.0.1:5000"},
		{Process: 0, Type: histories.Fail, F: "cas", Key: "k1", Value: histories.Value([]int{0, 1}), Attempt: 1, Ended: histories.EndedNoEffect, Conflicts: 2},
		{Process: histories.Nemesis, Type: histories.Info, F: "cut-after-commit", Value: histories.Value(map[string]string{"truth": "committed"})},
		{Process: 1, Type: histories.Invoke, F: "decrement", OpID: "1-1"},
		{Process: 1, Type: histories.OK, F: "decrement", Value: histories.Value(map[string]any{"applied": true, "balance": 2}), Attempt: 2},
		{Process: 2, Type: histories.Invoke, F: "read"},
		{Process: 2, Type: histories.OK, F: "read", Value: histories.Value(nil)},
		{Process: 3, Type: histories.Invoke, F: "increment"},
		{Process: 3, Type: histories.Info, F: "increment", Error: "conn closed", Attempt: 1, Ended: histories.EndedDeadline,
			Failed: []histories.FailedAttempt{{Error: "conn closed", Class: "unknown", Reason: "conn-closed"}}},
	} {
		if _, err := w.Write(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	validateLines(t, sch, path)
}

// TestSchemaRefusesMalformedLines: the schema is not a rubber stamp.
func TestSchemaRefusesMalformedLines(t *testing.T) {
	sch := historySchema(t)
	for _, line := range []string{
		`{"header":{"format":"indoubt-history/2","workload":"budget","model":"budget","seed":1}}`,
		`{"header":{"workload":"budget","model":"budget","seed":1}}`,
		`{"index":0,"time":0,"process":0,"type":"maybe","f":"read"}`,
		`{"index":-1,"time":0,"process":0,"type":"invoke","f":"read"}`,
		`{"index":0,"time":0,"process":-2,"type":"invoke","f":"read"}`,
		`{"index":0,"time":0,"process":0,"type":"invoke"}`,
		`{"index":0,"time":0,"process":0,"type":"invoke","f":"read","surprise":1}`,
		`{"index":0,"time":0,"process":0,"type":"ok","f":"decrement","value":{"balance":3}}`,
		`{"index":0,"time":0,"process":0,"type":"ok","f":"increment","value":{"read":3}}`,
		`{"index":0,"time":0,"process":0,"type":"invoke","f":"cas","value":[1]}`,
		`{"index":0,"time":0,"process":0,"type":"invoke","f":"write","value":"x"}`,
		`{"index":0,"time":0,"process":0,"type":"ok","f":"read","value":"x"}`,
		`{"index":0,"time":0,"process":0,"type":"ok","f":"read","value":{"a":"x"}}`,
		`{"index":0,"time":0,"process":0,"type":"invoke","f":"apply"}`,
		`{"index":0,"time":0,"process":0,"type":"invoke","f":"transfer","value":{"from":"a","to":"b"}}`,
		`{"index":0,"time":0,"process":0,"type":"invoke","f":"transfer"}`,
	} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(line)))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err == nil {
			t.Errorf("the schema accepts %s", line)
		}
	}
}
