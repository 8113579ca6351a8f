package recorders_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// contractCase is a case of testdata/contract.json: event sequences and the history
// every recorder must write for them (indoubttest's TestRecorderContract runs the same
// table against the Go helper).
type contractCase struct {
	Name    string          `json:"name"`
	History json.RawMessage `json:"history"`
}

// contractEvent is an event as the contract compares it: times, indexes, op ids and
// invocations' connections left out.
type contractEvent struct {
	Process int             `json:"process"`
	Type    string          `json:"type"`
	F       string          `json:"f"`
	Value   json.RawMessage `json:"value,omitempty"`
	Conn    string          `json:"conn,omitempty"`
	Attempt int             `json:"attempt,omitempty"`
	Error   string          `json:"error,omitempty"`
	Failed  []contractTry   `json:"failed_attempts,omitempty"`
}

type contractTry struct {
	Conn  string `json:"conn,omitempty"`
	Error string `json:"error"`
	Class string `json:"class"`
}

func contractOf(ops []histories.Op) string {
	var out []contractEvent
	for _, op := range ops {
		e := contractEvent{Process: op.Process, Type: op.Type.String(), F: op.F, Value: op.Value, Error: op.Error}
		if op.Type != histories.Invoke {
			e.Conn, e.Attempt = op.Conn, op.Attempt
		}
		for _, a := range op.Failed {
			e.Failed = append(e.Failed, contractTry{a.Conn, a.Error, a.Class})
		}
		out = append(out, e)
	}
	b, _ := json.MarshalIndent(out, "", " ")
	return string(b)
}

// TestRecordersHoldTheContract: the Python and Node recorders write, for each event
// sequence of testdata/contract.json, the history the table gives (and the Go helper
// writes): the worst of the attempts (a definite failure after an unknown attempt is
// info), giving up with the error just recorded adds no attempt, a failure the code
// knows of is a failure.
func TestRecordersHoldTheContract(t *testing.T) {
	table := filepath.Join("testdata", "contract.json")
	b, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Cases []contractCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for _, lang := range []struct {
		name string
		need func(*testing.T)
		cmd  []string
	}{
		{"python", needPython, []string{"python3", filepath.Join("testdata", "contract.py")}},
		{"node", needNode, []string{"node", filepath.Join("testdata", "contract.mjs")}},
	} {
		t.Run(lang.name, func(t *testing.T) {
			lang.need(t)
			dir := t.TempDir()
			if out, err := exec.Command(lang.cmd[0], append(lang.cmd[1:], table, dir)...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v: %s", lang.cmd, err, out)
			}
			for n, tc := range c.Cases {
				path := filepath.Join(dir, fmt.Sprintf("%d.jsonl", n))
				followsSchema(t, path)
				_, ops, err := histories.ReadFile(path, false)
				if err != nil {
					t.Fatalf("%s: %v", tc.Name, err)
				}
				var want []contractEvent
				if err := json.Unmarshal(tc.History, &want); err != nil {
					t.Fatal(err)
				}
				w, _ := json.MarshalIndent(want, "", " ")
				if got := contractOf(ops); got != string(w) {
					t.Errorf("%s: history:\n%s\nwant:\n%s", tc.Name, got, w)
				}
			}
		})
	}
}
