package report_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
)

// TestModelsReported: a history held to several models shows each part's verdict on
// the console, under the verdict line, and in report.html's table of models.
func TestModelsReported(t *testing.T) {
	r := &results.Results{Verdict: checker.Invalid, Summary: "reservations (exactly-once) invalid: not exactly once; stock (budget) valid",
		Workload: "app", Store: "postgres", Anomalies: []checker.Anomaly{{Kind: "duplicate", Ops: []int64{1, 2}, Explanation: "reservations: op id 0-1 is present twice"}},
		AnomalyCount: 1, Models: []results.ModelVerdict{
			{Name: "stock", Model: "budget", Verdict: checker.Valid, Summary: "linearizable: 3 units"},
			{Name: "reservations", Model: "exactly-once", Verdict: checker.Invalid, Summary: "not exactly once (1 duplicate)", AnomalyCount: 1},
		}}
	var b strings.Builder
	report.WriteVerdict(&b, r)
	for _, want := range []string{"\n  stock (budget): valid: linearizable: 3 units\n", "\n  reservations (exactly-once): invalid: not exactly once (1 duplicate)\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the console lacks %q:\n%s", want, b.String())
		}
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if err := report.WriteHTML(page, r); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(html), `<table id="models">`)
	if i < 0 {
		t.Fatalf("report.html has no table of models")
	}
	table := string(html[i:])
	table = table[:strings.Index(table, "</table>")]
	for _, want := range []string{`<td>stock (budget)</td><td class="valid">valid</td><td>0</td>`, `<td>reservations (exactly-once)</td><td class="invalid">invalid</td><td>1</td>`} {
		if !strings.Contains(table, want) {
			t.Errorf("the table of models lacks %s:\n%s", want, table)
		}
	}
	// A history of one model has no such table.
	r.Models = nil
	if err := report.WriteHTML(page, r); err != nil {
		t.Fatal(err)
	}
	if html, _ := os.ReadFile(page); strings.Contains(string(html), `id="models"`) {
		t.Errorf("a table of models for a history of one model")
	}
}
