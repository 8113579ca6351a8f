package indoubttest_test

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/indoubt/indoubt/indoubttest"
)

// The history Check writes is a history by the public schema, line by line.
func TestHistoryFollowsTheSchema(t *testing.T) {
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "schemas", "history.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	rec := indoubttest.NewRecorder(t, nil)
	w := rec.Worker()
	w.Invoke("decrement", nil).Ok(indoubttest.Applied(9))
	op := w.Invoke("decrement", nil)
	op.Retried(errors.New("conn closed"))
	op.Conn("127.0.0.1:5555")
	op.Done(nil, errors.New("conn closed"))
	rec.Read("read", indoubttest.Balance(8))
	indoubttest.Check(t, rec, indoubttest.Budget(10))
	f, err := os.Open(filepath.Join(rec.RunDir(), "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc.Bytes()))
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("line %d: %s: %v", n, sc.Bytes(), err)
		}
	}
	if n != 7 {
		t.Errorf("%d lines, want the header and 6 events", n)
	}
}
