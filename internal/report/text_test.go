package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

func TestTableRowsAndRatios(t *testing.T) {
	bal := int64(0)
	fast := &results.Results{Store: "redis", Mechanism: "Lua", Workload: "budget", Throughput: 2000, Verdict: checker.Valid,
		Final: decodeFinal(workloads.Budget, map[string]any{"applied": 1000, "rejected": 600, "balance": bal})}
	slow := &results.Results{Store: "cql", Mechanism: "LWT", Workload: "budget", Throughput: 100, Verdict: checker.Invalid, Conflicts: 1500,
		Final: decodeFinal(workloads.Budget, map[string]any{"applied": 1000, "rejected": 600, "balance": bal}), Interrupted: true}
	slow.Faults.ByKind = map[string]int64{"commit-cut": 3, "commit-drop": 2}
	slow.Ops.Info = 5
	var b bytes.Buffer
	WriteTable(&b, []*results.Results{fast, slow})
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
	r := &results.Results{Store: "postgres", Workload: "budget", Verdict: checker.Valid, Ops: results.OpCounts{Invoked: 1601, OK: 1601}}
	r.Faults = results.FaultCounts{Schedule: []string{"commit-cut:0.2"}, ByKind: map[string]int64{"commit-cut": 418}, ByTruth: map[string]int64{"applied": 418},
		Commits: &results.CommitCounts{Committed: 418, ChangedRows: 205, Unchanged: 213}}
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

// processFaulted is the results of a run with one kill and five lost writes, with no
// proxy: process faults were the whole schedule.
func processFaulted() *results.Results {
	first := 1.02
	r := &results.Results{Store: "redis", Workload: "register", Verdict: checker.Invalid, Summary: "not linearizable"}
	r.Faults = results.FaultCounts{Schedule: []string{"kill@1s-2s"}, ByKind: map[string]int64{}, ByTruth: map[string]int64{}}
	r.ProcessFaults = []results.ProcessFault{{Fault: "kill@1s-2s", Action: "kill", Pid: 4242, StartS: 1, EndS: 2.02, DowntimeS: 1.02,
		InFlight: 16, InFlightInfo: 15, InFlightOK: 1, FirstAckS: &first, LostWrites: 5}}
	for i := range 5 {
		r.LostWrites = append(r.LostWrites, results.LostWrite{OpID: fmt.Sprintf("%d-7", i+3), Index: int64(100 + i), Key: fmt.Sprintf("k%d", i),
			Value: []byte(fmt.Sprint(i)), Fault: "kill@1s-2s", AckBeforeFaultS: 0.25, Explanation: "lost"})
		r.Anomalies = append(r.Anomalies, checker.Anomaly{Kind: results.LostWriteKind, Explanation: "lost"})
	}
	return r
}

// With process faults alone the summary says nothing of a proxy that was not there,
// and prints the fault's timeline and the first lost writes.
func TestSummaryOfProcessFaults(t *testing.T) {
	var b bytes.Buffer
	WriteSummary(&b, processFaulted())
	out := b.String()
	for _, want := range []string{
		"process faults:\n  kill@1s-2s: kill of pid 4242 at 1.00s, down 1.02s, 16 in flight → 15 info, 1 ok, first ack 1.02s after, 5 acknowledged writes lost\n",
		"lost writes: 5 acknowledged writes missing from the final state\n  op 3-7 (worker 3): wrote 0 to k0, acknowledged at 0.75s, 0.250s before kill@1s-2s\n",
		"  ... and 2 more in results.json\n",
		"reconciliation: 5 lost-write (lost writes above)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"fired:", "truth:", "checker: 5 lost-write"} {
		if strings.Contains(out, not) {
			t.Errorf("summary has %q:\n%s", not, out)
		}
	}
	// With the proxy as well, its line stays, for its own faults only.
	r := processFaulted()
	r.Proxied = true
	r.Faults.Schedule = append(r.Faults.Schedule, "commit-cut:0.1")
	r.Faults.ByKind["commit-cut"] = 7
	b.Reset()
	WriteSummary(&b, r)
	if !strings.Contains(b.String(), "faults: commit-cut:0.1  fired: commit-cut=7") {
		t.Errorf("the proxy's line is missing or names the kill:\n%s", b.String())
	}
}

// The console shows every string of results.json with its control characters escaped:
// a store, an error, a fault, an anomaly's explanation, a ground-truth sentence, a lost
// write and a process fault that carry clear-screen, set-title and bidi sequences.
func TestConsoleEscapesControls(t *testing.T) {
	evil := "\x1b[2J\x1b]0;pwned\x07\u202e\u009b\tcol\nline"
	r := &results.Results{Verdict: checker.Invalid, Summary: "summary" + evil, Workload: workloads.Register,
		Store: "store" + evil, Mechanism: "mech" + evil, Retry: "retry" + evil, RunDir: "dir" + evil,
		Errors:    map[string]int64{"error" + evil: 2},
		Anomalies: []checker.Anomaly{{Kind: "kind" + evil, Ops: []int64{1}, Explanation: "explanation" + evil}},
		Evidence: &results.Evidence{
			AppliedTwice:      []results.AmbiguousOp{{OpID: "1-1" + evil, Invoke: 1, Sentence: "sentence" + evil}},
			AppliedTwiceCount: 1, Disagreements: []string{"disagreement" + evil},
		},
		ProcessFaults: []results.ProcessFault{{Fault: "fault" + evil, Action: "kill", Error: "pf" + evil}},
		LostWrites:    []results.LostWrite{{OpID: "2-1" + evil, Key: "key" + evil, Value: []byte(`1`), Fault: "fault" + evil}},
	}
	r.Faults.Schedule = []string{"commit-cut" + evil}
	r.Faults.ByKind = map[string]int64{"commit-cut" + evil: 1}
	r.Retries.Total, r.Retries.ByReason = 1, map[string]int64{"reason" + evil: 1}
	var b bytes.Buffer
	WriteSummary(&b, r)
	out := b.String()
	for i, c := range out {
		if c < 0x20 && c != '\n' || c == 0x7f || 0x80 <= c && c <= 0x9f || c == 0x202e {
			t.Fatalf("the console shows %U raw at %d:\n%q", c, i, out)
		}
	}
	for _, field := range []string{"store", "summary", "error", "sentence", "disagreement", "fault", "pf", "key", "reason", "dir"} {
		if !strings.Contains(out, field+`\x1b[2J\x1b]0;pwned\a\u202e\u009b\tcol\nline`) {
			t.Errorf("%s is not shown escaped:\n%q", field, out)
		}
	}
	// An explanation keeps its lines (a cycle's, one an edge), each escaped and
	// indented under the first, as indoubt check shows them.
	if want := "    explanation" + `\x1b[2J\x1b]0;pwned\a\u202e\u009b\tcol` + "\n      line\n"; !strings.Contains(out, want) {
		t.Errorf("the explanation is not shown escaped line by line (%q):\n%q", want, out)
	}
}
