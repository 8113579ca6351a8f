package report

import (
	"bytes"
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
