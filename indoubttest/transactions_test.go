package indoubttest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
)

// A list-append check's results.json has the transactions section
// docs/run-directory.md documents (what the checker read, the models ruled out, each
// cycle as data), and report.html draws each cycle: a node per transaction, an arrow
// per step; the verdict says whether an acknowledged write was lost.
func TestTransactionsSectionAndCycles(t *testing.T) {
	rec := indoubttest.NewRecorder(t, nil)
	var ops []*indoubttest.Op
	var done []indoubttest.Txn
	for v := range int64(2) {
		tx := indoubttest.Txn{indoubttest.ReadList("x"), indoubttest.Append("x", v+1)}
		ops = append(ops, rec.Worker().Invoke("txn", tx))
		d := append(indoubttest.Txn(nil), tx...)
		d[0].SawList(nil) // both read the empty list, both appended
		done = append(done, d)
	}
	for i := range ops {
		ops[i].Ok(done[i])
	}
	last := indoubttest.Txn{indoubttest.ReadList("x")}
	op := rec.Worker().Invoke("txn", last)
	last = append(indoubttest.Txn(nil), last...)
	last[0].SawList([]int64{1, 2})
	op.Ok(last)
	r := indoubttest.Evaluate(quietTB{t}, rec, indoubttest.ListAppend("serializable"))
	if r.Verdict != checker.Invalid {
		t.Fatalf("verdict %v, want invalid:\n%s", r.Verdict, r.Text)
	}
	b, err := os.ReadFile(filepath.Join(r.RunDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Txn *struct {
			Transactions int      `json:"transactions"`
			Not          []string `json:"not"`
			Cycles       []struct {
				Type  string            `json:"type"`
				Steps []json.RawMessage `json:"steps"`
			} `json:"cycles"`
		} `json:"transactions"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Txn == nil || got.Txn.Transactions < 3 || len(got.Txn.Cycles) == 0 || len(got.Txn.Not) == 0 {
		t.Fatalf("results.json's transactions section %+v: want the transactions read, the models ruled out and the cycles", got.Txn)
	}
	page, err := os.ReadFile(filepath.Join(r.RunDir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	// A lost update whose two appends a later read holds: the verdict says no
	// acknowledged write was lost, on the console and the page.
	const notLost = "no acknowledged write was lost"
	if !strings.Contains(r.Text, notLost) || !strings.Contains(string(page), notLost) {
		t.Errorf("the verdict does not say %q:\n%s", notLost, r.Text)
	}
	c := got.Txn.Cycles[0]
	sec := regexp.MustCompile(`(?s)<section class="cycle" id="cycle-0"><h3>([^<]*)</h3>(.*?)</section>`).FindSubmatch(page)
	if sec == nil || string(sec[1]) != c.Type {
		t.Fatalf("report.html does not draw the first cycle (%s)", c.Type)
	}
	if n := strings.Count(string(sec[2]), `class="edge"`); n != len(c.Steps) {
		t.Errorf("%d arrows drawn for a cycle of %d steps", n, len(c.Steps))
	}
}

// quietTB lets a test expect the check it makes to fail.
type quietTB struct{ testing.TB }

func (quietTB) Errorf(string, ...any) {}
