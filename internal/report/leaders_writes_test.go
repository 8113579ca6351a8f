package report_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// A run whose nodes were also asked whether their databases take writes (Patroni's):
// report.html names what each timeline asked and lists the spans by writes taken in a
// table of their own; the console says both.
func TestReportOfLeadersByWrites(t *testing.T) {
	dir := t.TempDir()
	res := &results.Results{SchemaVersion: results.SchemaVersion, Verdict: checker.Valid, Workload: workloads.Budget, Store: "postgres", RunDir: dir,
		Leaders: &results.Leaders{FromS: 0, ToS: 3, SplitBrainS: 1, Signal: "the REST API <role>",
			Timeline: []results.LeaderSpan{{StartS: 0, EndS: 2, Leaders: []string{"n1"}}, {StartS: 2, EndS: 3, Leaders: []string{"n1", "n2"}}},
			Writes: &results.Leaders{FromS: 0, ToS: 3, NoLeaderS: 1, Changes: 1, Signal: "pg_is_in_recovery()",
				Timeline: []results.LeaderSpan{{StartS: 0, EndS: 1, Leaders: []string{"n1"}}, {StartS: 1, EndS: 2, Leaders: []string{}, Down: []string{"n1"}},
					{StartS: 2, EndS: 3, Leaders: []string{"n2"}}}}}}
	page := filepath.Join(dir, "report.html")
	if err := report.WriteHTML(page, res); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	html := string(b)
	if !strings.Contains(html, "Asked: the REST API &lt;role&gt;.") {
		t.Errorf("the page does not name the role reports' signal (escaped)")
	}
	for _, want := range []string{`<table id="leaders-writes">`, "(pg_is_in_recovery()): 1.00 s with none taking writes, 0.00 s with two or more, 1 leader change",
		"<td>1.00 s</td><td>2.00 s</td><td>1.00 s</td><td>none</td><td>n1</td>", "<td>2.00 s</td><td>3.00 s</td><td>1.00 s</td><td>n2</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	var text strings.Builder
	report.WriteSummary(&text, res)
	if !strings.Contains(text.String(), "1.00s with two or more (n1 0.00-2.00s, n1 and n2 2.00-3.00s); by writes taken: leaders from 0.00s to 3.00s: 1 change, 1.00s without a leader") {
		t.Errorf("the console does not say both timelines:\n%s", text.String())
	}
}
