package indoubttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// contract is recorders/testdata/contract.json: the event sequences every recorder
// (this package's, recorders/python, recorders/js) must turn into the same history.
type contract struct {
	Cases []struct {
		Name    string              `json:"name"`
		Steps   [][]json.RawMessage `json:"steps"`
		History []contractEvent     `json:"history"`
	} `json:"cases"`
}

// contractEvent is an event of a history as the contract compares it: times, indexes,
// op ids and invocations' connections left out.
type contractEvent struct {
	Process int             `json:"process"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Value   json.RawMessage `json:"value,omitempty"`
	Conn    string          `json:"conn,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	Error   string          `json:"error,omitempty"`
	Failed  []struct {
		Conn  string `json:"conn,omitempty"`
		Error string `json:"error"`
		Class string `json:"class"`
	} `json:"failed_attempts,omitempty"`
}

func contractOf(ops []histories.Op) string {
	var out []contractEvent
	for _, op := range ops {
		e := contractEvent{Process: op.Process, Type: op.Type.String(), F: op.F, Value: op.Value, Error: op.Error}
		if op.Type != histories.Invoke {
			e.Conn, e.Attempt = op.Conn, op.Attempt
		}
		for _, a := range op.Failed {
			e.Failed = append(e.Failed, struct {
				Conn  string `json:"conn,omitempty"`
				Error string `json:"error"`
				Class string `json:"class"`
			}{a.Conn, a.Error, a.Class})
		}
		out = append(out, e)
	}
	b, _ := json.MarshalIndent(out, "", " ")
	return string(b)
}

// TestRecorderContract runs the recorders' contract against this package's Recorder:
// the worst-of-attempts rule, and Retried then Done with the same error recording the
// attempt once.
func TestRecorderContract(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "recorders", "testdata", "contract.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c contract
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, tc := range c.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			rec := NewRecorder(t, nil)
			classes := map[string]string{}
			rec.SetClassifier(func(err error) error {
				switch classes[err.Error()] {
				case "unknown":
					return fmt.Errorf("%w: %w", workloads.ErrUnknown, err)
				case "conflict":
					return fmt.Errorf("%w: %w", workloads.ErrConflict, err)
				}
				return err
			})
			w := rec.Worker()
			var op *Op
			var last error
			for _, st := range tc.Steps {
				var verb string
				json.Unmarshal(st[0], &verb)
				arg := func(i int) string {
					var s string
					json.Unmarshal(st[i], &s)
					return s
				}
				switch verb {
				case "invoke":
					var v any
					if len(st) > 2 {
						v = st[2]
					}
					op = w.Invoke(arg(1), v)
				case "conn":
					op.Conn(arg(1))
				case "retried":
					classes[arg(1)] = arg(2)
					last = errors.New(arg(1))
					op.Retried(last)
				case "ok":
					var v any
					if len(st) > 1 {
						v = st[1]
					}
					op.Ok(v)
				case "done":
					classes[arg(1)] = arg(2)
					op.Done(nil, errors.New(arg(1)))
				case "done-same":
					op.Done(nil, last)
				case "fail-known":
					op.Fail(errors.New(arg(1)))
				default:
					t.Fatalf("unknown step %q", verb)
				}
			}
			want, _ := json.MarshalIndent(tc.History, "", " ")
			if got := contractOf(rec.ops); got != string(want) {
				t.Errorf("history:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
