package indoubttest_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/workloads"
)

// capture keeps the failures reported to it instead of failing the test.
type capture struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (c *capture) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *capture) Failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.errs) > 0
}

func (c *capture) Logf(string, ...any) {}

func TestDoneWithoutServer(t *testing.T) {
	rec := indoubttest.NewRecorder(t, nil)
	w := rec.Worker()
	w.Invoke("decrement", nil).Done(indoubttest.Applied(9), nil)
	w.Invoke("decrement", nil).Done(nil, workloads.Conflict(errors.New("serialization failure"), ""))
	before := w.Process()
	op := w.Invoke("decrement", nil)
	if op.ID() != fmt.Sprintf("%d-3", before) {
		t.Errorf("op id %q, want %d-3", op.ID(), before)
	}
	op.Done(nil, errors.New("conn closed"))
	if w.Process() == before {
		t.Errorf("process %d after info: want a fresh one", w.Process())
	}
	w.Invoke("decrement", nil).Ok(indoubttest.Rejected())
	rec.Read("read", indoubttest.Balance(0))
	res := indoubttest.Check(t, rec, indoubttest.Budget(2))
	if res.Verdict != checker.Valid {
		t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
	}
	_, ops, err := histories.ReadFile(filepath.Join(rec.RunDir(), "history.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range ops {
		if op.Type != histories.Invoke {
			got = append(got, op.Type.String())
		}
	}
	want := "ok fail info ok ok"
	if strings.Join(got, " ") != want {
		t.Errorf("completions %q, want %q", strings.Join(got, " "), want)
	}
}

func TestCheckFailsAndKeepsTheRunDirectory(t *testing.T) {
	c := &capture{TB: t}
	rec := indoubttest.NewRecorder(c, nil)
	w := rec.Worker()
	w.Invoke("decrement", nil).Ok(indoubttest.Applied(4))
	rec.Read("read", indoubttest.Balance(3)) // two taken, one acknowledged
	res := indoubttest.Check(c, rec, indoubttest.Budget(5).As("charge"))
	if res.Verdict != checker.Invalid || !c.Failed() {
		t.Fatalf("verdict %v, failed %v: want invalid and a failed test", res.Verdict, c.Failed())
	}
	msg := strings.Join(c.errs, "\n")
	for _, want := range []string{"budget check failed", "no commit fault fired", "run directory: " + rec.RunDir()} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	b, err := os.ReadFile(filepath.Join(rec.RunDir(), "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Verdict     string   `json:"verdict"`
		Explanation []string `json:"explanation"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Verdict != "invalid" || len(r.Explanation) == 0 {
		t.Errorf("results.json: %v %+v", err, r)
	}
	os.RemoveAll(rec.RunDir())
}

func TestSetClassifier(t *testing.T) {
	declined := errors.New("charge declined")
	rec := indoubttest.NewRecorder(t, nil)
	rec.SetClassifier(func(err error) error {
		if errors.Is(err, declined) {
			return err // definite: the service refused before writing
		}
		return workloads.Unknown(err, "")
	})
	w := rec.Worker()
	p := w.Process()
	w.Invoke("decrement", nil).Done(nil, declined)
	if w.Process() != p {
		t.Fatalf("a definite failure moved the worker to a fresh process")
	}
	w.Invoke("decrement", nil).Done(nil, errors.New("EOF"))
	if w.Process() == p {
		t.Fatalf("an unknown outcome left the worker on its process")
	}
}
