package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/workloads"
)

func TestTableRowsAndRatios(t *testing.T) {
	bal := int64(0)
	fast := &Results{Store: "redis", Mechanism: "Lua", Workload: "budget", Throughput: 2000, Verdict: checker.Valid,
		Final: decodeFinal(workloads.Budget, map[string]any{"applied": 1000, "rejected": 600, "balance": bal})}
	slow := &Results{Store: "cql", Mechanism: "LWT", Workload: "budget", Throughput: 100, Verdict: checker.Invalid, Conflicts: 1500,
		Final: decodeFinal(workloads.Budget, map[string]any{"applied": 1000, "rejected": 600, "balance": bal}), Interrupted: true}
	slow.Faults.ByKind = map[string]int64{"commit-cut": 3, "commit-drop": 2}
	slow.Ops.Info = 5
	var b bytes.Buffer
	WriteTable(&b, []*Results{fast, slow})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table:\n%s", b.String())
	}
	for _, want := range []string{"1.00x", "2000", "1000", "600", "valid"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("redis row %q lacks %q", lines[1], want)
		}
	}
	for _, want := range []string{"0.05x", "0/1500 (1.5/applied)", "5 (3/2)", "invalid (interrupted)"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("cql row %q lacks %q", lines[2], want)
		}
	}
}

// TestSummarySaysWhatCutsChanged: the summary names committed and changed rows apart,
// and the table's column says that its first figure is operations that ended unknown.
func TestSummarySaysWhatCutsChanged(t *testing.T) {
	r := &Results{Store: "postgres", Workload: "budget", Verdict: checker.Valid, Ops: OpCounts{Invoked: 1601, OK: 1601}}
	r.Faults = FaultCounts{Schedule: []string{"commit-cut:0.2"}, ByKind: map[string]int64{"commit-cut": 418}, ByTruth: map[string]int64{"applied": 418},
		Commits: &CommitCounts{Committed: 418, ChangedRows: 205, Unchanged: 213}}
	var b bytes.Buffer
	WriteSummary(&b, r)
	out := b.String()
	for _, want := range []string{
		"ended unknown (cuts/drops fired)",
		"0 (418/0)",
		"commit faults: 418 cut after the server committed (205 changed rows, 213 changed nothing, 0 whose reply does not say), 0 dropped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "truth: applied=418") {
		t.Errorf("summary still counts every cut as applied:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := WriteHTML(path, r); err != nil {
		t.Fatal(err)
	}
	if html, _ := os.ReadFile(path); !strings.Contains(string(html), "commit faults: 418 cut after the server committed (205 changed rows, 213 changed nothing") {
		t.Errorf("report.html does not split the cuts")
	}
	// A results.json written before commits existed still prints its truth counts.
	r.Faults.Commits = nil
	b.Reset()
	WriteSummary(&b, r)
	if !strings.Contains(b.String(), "truth: applied=418") {
		t.Errorf("old results lost their truth counts:\n%s", b.String())
	}
}
