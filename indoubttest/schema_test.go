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
	"github.com/indoubt/indoubt/internal/judge/judgetest"
)

func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	sch, err := jsonschema.NewCompiler().Compile(filepath.Join("..", "schemas", name))
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// The history Check writes is a history by the public schema, line by line, and its
// results.json a results.json by that schema, valid or not.
func TestRunDirectoryFollowsTheSchemas(t *testing.T) {
	hist, res := compileSchema(t, "history.schema.json"), compileSchema(t, "results.schema.json")
	for _, c := range []struct {
		name  string
		taken int64
	}{{"valid", 1}, {"invalid", 2}} {
		t.Run(c.name, func(t *testing.T) {
			cp := &capture{TB: t}
			rec := indoubttest.NewRecorder(cp, nil)
			w := rec.Worker()
			w.Invoke("decrement", nil).Ok(indoubttest.Applied(9))
			op := w.Invoke("decrement", nil)
			op.Retried(errors.New("conn closed"))
			op.Conn("127.0.0.1:5555")
			op.Done(nil, errors.New("conn closed"))
			rec.Read("read", indoubttest.Balance(10-c.taken-1))
			r := indoubttest.Check(cp, rec, indoubttest.Budget(10))
			defer os.RemoveAll(r.RunDir)
			f, err := os.Open(filepath.Join(r.RunDir, "history.jsonl"))
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
				if err := hist.Validate(v); err != nil {
					t.Errorf("history line %d: %s: %v", n, sc.Bytes(), err)
				}
			}
			if n != 7 {
				t.Errorf("%d lines, want the header and 6 events", n)
			}
			b, err := os.ReadFile(filepath.Join(r.RunDir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if err := res.Validate(v); err != nil {
				t.Errorf("results.json: %v\n%s", err, b)
			}
			// Judged again from its files alone, the directory gives its results.json.
			judgetest.Recheck(t, r.RunDir)
		})
	}
}
