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

// capture keeps the failures reported to it instead of failing the test: a test of the
// helper observes a failing check through it.
type capture struct {
	testing.TB
	mu   sync.Mutex
	errs []string
	logs []string
}

func (c *capture) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, fmt.Sprintf(format, args...))
}

func (c *capture) Fatalf(format string, args ...any) {
	c.Errorf(format, args...)
	c.TB.FailNow() // as testing.T's: the goroutine ends here
}

func (c *capture) Failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.errs) > 0
}

func (c *capture) Logf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.logs = append(c.logs, fmt.Sprintf(format, args...))
}

func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.errs, "\n")
}

// readHistory reads the run directory's history.
func readHistory(t *testing.T, dir string) []histories.Op {
	t.Helper()
	_, ops, err := histories.ReadFile(filepath.Join(dir, "history.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func TestDoneWithoutServer(t *testing.T) {
	rec := indoubttest.NewRecorder(t, nil)
	w := rec.Worker()
	w.Invoke("decrement", nil).Done(indoubttest.Applied(9), nil)
	w.Invoke("decrement", nil).Done(nil, workloads.Conflict(errors.New("serialization failure"), ""))
	op := w.Invoke("decrement", nil)
	op.Done(nil, errors.New("conn closed")) // unknown: the worker moves to a fresh process
	next := w.Invoke("decrement", nil)
	next.Ok(indoubttest.Rejected())
	if op.ID() != "0-3" || next.ID() != "0-4" {
		t.Errorf("op ids %s %s: want 0-3 0-4 (a worker keeps its number)", op.ID(), next.ID())
	}
	rec.Read("read", indoubttest.Balance(0))
	r := indoubttest.Check(t, rec, indoubttest.Budget(2))
	if r.Verdict != checker.Valid {
		t.Fatalf("verdict %v: %s", r.Verdict, r.Text)
	}
	var got []string
	procs := map[string]int{}
	for _, op := range readHistory(t, r.RunDir) {
		if op.Type != histories.Invoke {
			got = append(got, op.Type.String()+" "+op.OpID)
		} else {
			procs[op.OpID] = op.Process
		}
	}
	if want := "ok 0-1 fail 0-2 info 0-3 ok 0-4 ok final-0"; strings.Join(got, " ") != want {
		t.Errorf("completions %q, want %q", strings.Join(got, " "), want)
	}
	if procs["0-3"] == procs["0-4"] {
		t.Errorf("0-4 invoked by process %d, the one whose operation ended unknown", procs["0-4"])
	}
}

// Every attempt the code reports is in the history, with its connection, times, error
// and class, and the last attempt's error too: the run directory is the evidence.
func TestAttemptsInTheHistory(t *testing.T) {
	rec := indoubttest.NewRecorder(t, nil)
	w := rec.Worker()
	op := w.Invoke("decrement", nil)
	op.Conn("127.0.0.1:5001")
	op.Retried(errors.New("conn closed"))
	op.Conn("127.0.0.1:5002")
	op.Retried(workloads.Conflict(errors.New("could not serialize access"), ""))
	op.Conn("127.0.0.1:5003")
	op.Done(indoubttest.Applied(8), nil)
	op = w.Invoke("decrement", nil)
	op.Done(nil, errors.New("unexpected EOF"))
	rec.Read("read", indoubttest.Balance(8))
	r := indoubttest.Check(t, rec, indoubttest.Budget(10))
	var comps []histories.Op
	for _, op := range readHistory(t, r.RunDir) {
		if op.IsClient() && op.Type != histories.Invoke && op.F == "decrement" {
			comps = append(comps, op)
		}
	}
	if len(comps) != 2 {
		t.Fatalf("%d completions", len(comps))
	}
	ok, info := comps[0], comps[1]
	if ok.Attempt != 3 || ok.Conn != "127.0.0.1:5003" || len(ok.Failed) != 2 {
		t.Fatalf("ok completion %+v: want attempt 3 on :5003 after two failed attempts", ok)
	}
	a, b := ok.Failed[0], ok.Failed[1]
	if a.Conn != "127.0.0.1:5001" || a.Error != "conn closed" || a.Class != "unknown" || b.Conn != "127.0.0.1:5002" || b.Class != "conflict" {
		t.Errorf("failed attempts %+v", ok.Failed)
	}
	if !(a.Start <= a.End && a.End <= b.Start && b.Start <= b.End && b.End <= ok.Time) {
		t.Errorf("attempt times out of order: %+v, completion at %d", ok.Failed, ok.Time)
	}
	if info.Type != histories.Info || len(info.Failed) != 1 || info.Failed[0].Error != "unexpected EOF" || info.Failed[0].Conn != "" {
		t.Errorf("info completion %+v: want its one attempt's error, and no connection named", info)
	}
}

// An operation's outcome is the worst of its attempts: an attempt that ended unknown,
// then a definite failure, is unknown, and the message says why; Fail says the code
// knows better.
func TestWorstOfAttempts(t *testing.T) {
	declined := errors.New("charge declined")
	rec := indoubttest.NewRecorder(t, nil)
	rec.SetClassifier(func(err error) error {
		if errors.Is(err, declined) {
			return err
		}
		return workloads.Unknown(err, "")
	})
	w := rec.Worker()
	a := w.Invoke("decrement", nil)
	a.Retried(errors.New("conn closed"))
	a.Done(nil, declined)
	b := w.Invoke("decrement", nil)
	b.Retried(errors.New("conn closed"))
	b.Fail(declined) // the code read its idempotency record: nothing was applied
	c := w.Invoke("decrement", nil)
	c.Done(nil, declined)
	rec.Read("read", indoubttest.Balance(10))
	r := indoubttest.Check(t, rec, indoubttest.Budget(10))
	got := map[string]histories.Type{}
	for _, op := range readHistory(t, r.RunDir) {
		if op.IsClient() && op.Type != histories.Invoke {
			got[op.OpID] = op.Type
		}
	}
	if got[a.ID()] != histories.Info || got[b.ID()] != histories.Fail || got[c.ID()] != histories.Fail {
		t.Errorf("completions %v: want %s info (an attempt ended unknown), %s fail (Fail), %s fail", got, a.ID(), b.ID(), c.ID())
	}
	if want := "unknown, not failed: 1 operation (" + a.ID() + ")"; !strings.Contains(r.Text, want) {
		t.Errorf("report lacks %q:\n%s", want, r.Text)
	}
}

// Nothing checked is not valid: a test that completed no operation fails.
func TestNothingChecked(t *testing.T) {
	c := &capture{TB: t}
	rec := indoubttest.NewRecorder(c, nil)
	w := rec.Worker()
	w.Invoke("decrement", nil) // never completed
	r := indoubttest.Check(c, rec, indoubttest.Budget(10))
	if r.Verdict != checker.Unknown || !c.Failed() {
		t.Fatalf("verdict %v, failed %v: want unknown and a failed test", r.Verdict, c.Failed())
	}
	if msg := c.text(); !strings.Contains(msg, "nothing was checked: 0 operations completed") {
		t.Errorf("message:\n%s", msg)
	}
	os.RemoveAll(r.RunDir)
}

// Misuse gets one clear message in the helper's terms: the constructor to use, the
// final read to record; and nothing spurious before it.
func TestMisuse(t *testing.T) {
	for _, c := range []struct {
		name   string
		model  indoubttest.Model
		record func(rec *indoubttest.Recorder)
		want   []string
	}{
		{"a budget decrement completed with a number", indoubttest.Budget(10), func(rec *indoubttest.Recorder) {
			rec.Worker().Invoke("decrement", nil).Ok(41)
			rec.Read("read", indoubttest.Balance(9))
		}, []string{"Ok(41) is not a value the budget model reads", "indoubttest.Applied(balance)"}},
		{"a budget read of a bare number", indoubttest.Budget(10), func(rec *indoubttest.Recorder) {
			rec.Worker().Invoke("decrement", nil).Ok(indoubttest.Applied(9))
			rec.Read("read", 9)
		}, []string{"final read final-0 (read): Ok(9)", `rec.Read("read", indoubttest.Balance(n))`}},
		{"a function the model does not know", indoubttest.Budget(10), func(rec *indoubttest.Recorder) {
			rec.Worker().Invoke("charge", nil).Ok(indoubttest.Applied(9))
		}, []string{`the budget model reads decrement and read, not Invoke("charge")`}},
		{"exactly-once without its final state", indoubttest.ExactlyOnce(), func(rec *indoubttest.Recorder) {
			rec.Worker().Invoke("apply", nil).Ok(nil)
		}, []string{"record the final state with rec.Read(\"read\", checker.ExactlyOnceState{"}},
		{"exactly-once read before an operation ended", indoubttest.ExactlyOnce(), func(rec *indoubttest.Recorder) {
			w := rec.Worker()
			w.Invoke("apply", nil).Ok(nil)
			rec.Read("read", checker.ExactlyOnceState{"0-1": 1})
			w.Invoke("apply", nil).Ok(nil) // after the read
		}, []string{"no final read begins after every operation ended", `rec.Read("read", checker.ExactlyOnceState{`}},
		{"a key the budgets do not have", indoubttest.Budgets(map[string]int64{"sku-1": 3}), func(rec *indoubttest.Recorder) {
			rec.Worker().InvokeOn("sku-2", "decrement", nil).Ok(indoubttest.Applied(2))
		}, []string{`key "sku-2" is not one of the model's (sku-1)`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := &capture{TB: t}
			rec := indoubttest.NewRecorder(cp, nil)
			c.record(rec)
			r := indoubttest.Check(cp, rec, c.model)
			msg := cp.text()
			if r.Verdict != 0 || len(cp.errs) != 1 {
				t.Fatalf("verdict %v, %d errors: want no verdict and one message:\n%s", r.Verdict, len(cp.errs), msg)
			}
			if !strings.HasPrefix(msg, "indoubttest: the ") || !strings.Contains(msg, " model cannot read this history") && !strings.Contains(msg, "cannot be checked as") {
				t.Errorf("message does not lead with what cannot be read:\n%s", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message lacks %q:\n%s", w, msg)
				}
			}
			for _, cli := range []string{"--final", "Options.Final", "--model", "--budget"} {
				if strings.Contains(msg, cli) {
					t.Errorf("message speaks of %s, which a test does not have:\n%s", cli, msg)
				}
			}
			if _, err := os.Stat(filepath.Join(r.RunDir, "results.json")); err == nil {
				t.Errorf("results.json written for a history that was not checked")
			}
			os.RemoveAll(r.RunDir)
		})
	}
}

// Evaluate returns the verdict without failing the test: the way to pin that a
// known-bad version stays caught. The run directory of a passing test is removed.
func TestEvaluateKnownBad(t *testing.T) {
	var dir string
	t.Run("pinned", func(t *testing.T) {
		rec := indoubttest.NewRecorder(t, nil)
		w := rec.Worker()
		w.Invoke("decrement", nil).Ok(indoubttest.Applied(4))
		rec.Read("read", indoubttest.Balance(3)) // two taken, one acknowledged
		r := indoubttest.Evaluate(t, rec, indoubttest.Budget(5))
		if r.Verdict != checker.Invalid || !r.Found("impossible-read") || r.Found("duplicate") {
			t.Fatalf("verdict %v, anomalies %+v: want invalid with an impossible-read", r.Verdict, r.Anomalies)
		}
		if !strings.Contains(r.Text, "checker: 1 impossible-read") {
			t.Errorf("text:\n%s", r.Text)
		}
		dir = r.RunDir
		if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
			t.Errorf("report.html: %v", err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the passing test left %s behind (%v)", dir, err)
	}
}

// INDOUBT_OUT keeps every run directory, and names it, also of a passing test.
func TestOutKeepsEveryDirectory(t *testing.T) {
	out := t.TempDir()
	t.Setenv("INDOUBT_OUT", out)
	var dir string
	var logs []string
	t.Run("passing", func(t *testing.T) {
		c := &capture{TB: t}
		rec := indoubttest.NewRecorder(c, nil)
		rec.Worker().Invoke("decrement", nil).Ok(indoubttest.Applied(1))
		rec.Read("read", indoubttest.Balance(1))
		r := indoubttest.Check(c, rec, indoubttest.Budget(2))
		dir, logs = r.RunDir, c.logs
	})
	if filepath.Dir(dir) != out {
		t.Fatalf("run directory %s, want one under INDOUBT_OUT %s", dir, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "results.json")); err != nil {
		t.Errorf("the directory of a passing test is gone: %v", err)
	}
	if !strings.Contains(strings.Join(logs, "\n"), dir) {
		t.Errorf("the log does not name %s:\n%s", dir, strings.Join(logs, "\n"))
	}
}

// results.json is results.Results, schema_version 1.
func TestResultsJSON(t *testing.T) {
	rec := indoubttest.NewRecorder(t, nil)
	w := rec.Worker()
	op := w.Invoke("decrement", nil)
	op.Retried(errors.New("conn closed"))
	op.Done(indoubttest.Applied(9), nil)
	rec.Read("read", indoubttest.Balance(9))
	r := indoubttest.Check(t, rec, indoubttest.Budget(10))
	b, err := os.ReadFile(filepath.Join(r.RunDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		SchemaVersion int    `json:"schema_version"`
		Verdict       string `json:"verdict"`
		Workload      string `json:"workload"`
		Retries       struct {
			Total int `json:"total"`
		} `json:"retries"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.SchemaVersion != 1 || got.Verdict != "valid" || got.Workload != "app" || got.Retries.Total != 1 {
		t.Errorf("results.json %+v", got)
	}
	// report.html is titled by the test, and lists no config.json: the helper writes none.
	page, err := os.ReadFile(filepath.Join(r.RunDir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "<title>indoubt: test TestResultsJSON "; !strings.Contains(string(page), want) {
		t.Errorf("report.html's title is not %q...:\n%.300s", want, page)
	}
	if strings.Contains(string(page), "config.json") {
		t.Error("report.html lists config.json, which the helper does not write")
	}
}

// A budget per SKU: each account is checked on its own, and an anomaly names its
// account.
func TestBudgets(t *testing.T) {
	for _, c := range []struct {
		name string
		sku2 int64 // sku-2's final balance
		want checker.Verdict
	}{{"each SKU within its budget", 4, checker.Valid}, {"one SKU taken twice", 3, checker.Invalid}} {
		t.Run(c.name, func(t *testing.T) {
			rec := indoubttest.NewRecorder(t, nil)
			w := rec.Worker()
			w.InvokeOn("sku-1", "decrement", nil).Ok(indoubttest.Applied(9))
			w.InvokeOn("sku-2", "decrement", nil).Ok(indoubttest.Applied(4))
			rec.ReadOn("sku-1", "read", indoubttest.Balance(9))
			rec.ReadOn("sku-2", "read", indoubttest.Balance(c.sku2))
			r := indoubttest.Evaluate(t, rec, indoubttest.Budgets(map[string]int64{"sku-1": 10, "sku-2": 5}))
			if r.Verdict != c.want {
				t.Fatalf("verdict %v: %s", r.Verdict, r.Text)
			}
			if c.want == checker.Invalid && (len(r.Anomalies) != 1 || !strings.HasPrefix(r.Anomalies[0].Explanation, "account sku-2: ")) {
				t.Errorf("anomalies %+v: want one, naming sku-2", r.Anomalies)
			}
		})
	}
}
