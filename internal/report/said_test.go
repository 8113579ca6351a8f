package report_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/workloads"
)

// A test's run directory as indoubttest writes it (no config.json), with a final read
// in its history, more kinds of anomaly than results.json lists, and a dependency
// cycle: report.html, in a real browser, is titled by the test, lists every kind with
// its count, shows the final read instead of saying there is no final state, draws the
// cycle with one arrow per step, and lists only the files that are there.
func TestReportSaysWhatHappenedInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	history := `{"header":{"format":"indoubt-history/1","workload":"app","model":"counter","store":"postgres","seed":1}}
{"index":0,"time":1000000,"process":0,"type":"invoke","f":"add","value":1,"op_id":"0-0"}
{"index":1,"time":2000000,"process":0,"type":"ok","f":"add","value":1,"op_id":"0-0"}
{"index":2,"time":3000000,"process":0,"type":"invoke","f":"read","op_id":"final-0"}
{"index":3,"time":4000000,"process":0,"type":"ok","f":"read","value":417,"op_id":"final-0"}
`
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte(history), 0o644); err != nil {
		t.Fatal(err)
	}
	r := &results.Results{
		SchemaVersion: results.SchemaVersion, Verdict: checker.Invalid, Workload: "app", Store: "postgres",
		Mechanism: "test TestReserveStock (indoubttest), checked as counter", RunDir: dir,
		AnomalyKinds: map[string]int{}, Anomalies: []checker.Anomaly{},
		Txn: &results.TxnCheck{Cycles: []results.Cycle{{Type: "G2-item", Ops: []int64{1, 3}, Steps: []results.CycleStep{
			{From: 1, To: 3, Type: "rw", Key: "7", Value: "[1]", Value2: "[1 2]"},
			{From: 3, To: 1, Type: "rw", Key: "8", Value: "[4]", Value2: "[4 5]"},
		}}}},
	}
	for k := range 25 {
		kind := fmt.Sprintf("kind-%02d", k)
		r.AnomalyKinds[kind] = k + 1
		r.AnomalyCount += k + 1
		if len(r.Anomalies) < results.DefaultMaxAnomalies {
			r.Anomalies = append(r.Anomalies, checker.Anomaly{Kind: kind, Ops: []int64{1}, Explanation: "seen"})
		}
	}
	stepWithoutVersion := results.Cycle{Type: "G0", Steps: []results.CycleStep{{From: 1, To: 3, Type: "ww", Key: "9"}, {From: 3, To: 1, Type: "ww", Key: "9", Value: "[2]"}}}
	r.Txn.Cycles = append(r.Txn.Cycles, stepWithoutVersion)
	if err := rundir.WriteJSON(filepath.Join(dir, "results.json"), r); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "report.html")
	if err := report.WriteHTML(page, r); err != nil {
		t.Fatal(err)
	}
	dom, _ := load(t, bin, page)

	if m := regexp.MustCompile(`<title>([^<]*)</title>`).FindStringSubmatch(dom); m == nil || !strings.Contains(m[1], "test TestReserveStock on postgres") || strings.Contains(m[1], "app on") {
		t.Errorf("title %q: want it to name the test", m)
	}
	kinds := map[string]string{}
	for _, row := range tableRows(t, dom, "anomaly-kinds") {
		if len(row) == 2 {
			kinds[row[0]] = row[1]
		}
	}
	for k, n := range r.AnomalyKinds {
		if kinds[k] != fmt.Sprint(n) {
			t.Errorf("kind %s: %q on the page, %d found", k, kinds[k], n)
		}
	}
	if strings.Contains(dom, "no final state") {
		t.Error("the page says there is no final state; the history has a final read")
	}
	reads := tableRows(t, dom, "final-reads")
	if len(reads) < 2 || reads[1][0] != "final-0" || reads[1][1] != "417" {
		t.Errorf("final reads on the page: %q, want final-0 read 417", reads)
	}
	cycle := regexp.MustCompile(`(?s)<section class="cycle" id="cycle-0">(.*?)</section>`).FindStringSubmatch(dom)
	if cycle == nil {
		t.Fatalf("no cycle drawn:\n%.3000s", dom)
	}
	if n := strings.Count(cycle[1], `class="edge"`); n != 2 {
		t.Errorf("%d arrows drawn, the cycle has 2 steps", n)
	}
	if n := strings.Count(cycle[1], `class="node"`); n != 2 {
		t.Errorf("%d transactions drawn, the cycle has 2", n)
	}
	for _, want := range []string{"T1 read 7 [1], which T3 then wrote [1 2] (rw)", "T3 read 8 [4], which T1 then wrote [4 5] (rw)"} {
		if !strings.Contains(cycle[1], want) {
			t.Errorf("the cycle's steps do not say %q", want)
		}
	}
	second := regexp.MustCompile(`(?s)<section class="cycle" id="cycle-1">(.*?)</section>`).FindStringSubmatch(dom)
	if second == nil || !strings.Contains(second[1], "T1 wrote 9, then T3 wrote it (ww)") || !strings.Contains(second[1], "T3 wrote 9 [2], then T1 wrote it (ww)") {
		t.Errorf("a step without a version is not said without one: %q", second)
	}
	files := regexp.MustCompile(`<p id="files">([^<]*)</p>`).FindStringSubmatch(dom)
	if files == nil {
		t.Fatal("no list of files")
	}
	for _, f := range []string{"history.jsonl", "results.json"} {
		if !strings.Contains(files[1], f) {
			t.Errorf("files %q: %s is there", files[1], f)
		}
	}
	for _, f := range []string{"config.json", "faults.jsonl", "check.json"} {
		if strings.Contains(files[1], f) {
			t.Errorf("files %q: %s is not there", files[1], f)
		}
	}
}

// The title names what was tested: the test, the program (exec's argv[0]), or the
// workload of indoubt run.
func TestSubject(t *testing.T) {
	for _, c := range []struct {
		workload, mechanism, want string
	}{
		{"app", "test TestReserve/rr (indoubttest), checked as budget", "test TestReserve/rr"},
		{"exec", "node transfer.js --accounts 4", "program node"},
		{"exec", "", "a program"},
		{"counter", "UPDATE ... SET n = n + 1", "counter"},
	} {
		if got := report.Subject(&results.Results{Workload: workloads.Name(c.workload), Mechanism: c.mechanism}); got != c.want {
			t.Errorf("Subject(%s, %q) = %q, want %q", c.workload, c.mechanism, got, c.want)
		}
	}
}
