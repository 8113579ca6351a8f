package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/runner"
)

// The register workload through the fault proxy: unknown writes and cas are info
// operations that porcupine must allow to have applied or not, and the visualization
// carries the faults.
func TestRegisterWithCommitFaultsIsLinearizable(t *testing.T) {
	cfg := budgetConfig(t)
	cfg.Workload, cfg.Workers, cfg.Ops = "register", 8, 40
	cfg.Faults = parseSchedule(t, "commit-mixed:0.2")
	res, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	if res.Verdict != checker.Valid {
		t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
	}
	if res.Ops.Info == 0 || res.Faults.ByKind["commit-cut"]+res.Faults.ByKind["commit-drop"] == 0 {
		t.Fatalf("no ambiguous operation: ops %+v faults %+v", res.Ops, res.Faults)
	}
	page, err := os.ReadFile(filepath.Join(res.RunDir, "linearizability.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "commit-") {
		t.Error("the visualization does not show the faults")
	}
}
