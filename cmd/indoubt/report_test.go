package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHelpOfSuiteReportCompare(t *testing.T) {
	for _, c := range []string{"suite", "report", "compare"} {
		code, out, _ := invoke(t, c, "--help")
		if code != 0 || !strings.Contains(out, "Example") {
			t.Errorf("%s --help: exit %d\n%s", c, code, out)
		}
	}
	for _, args := range [][]string{{"report"}, {"report", t.TempDir()}, {"compare", "a"}, {"compare", t.TempDir(), t.TempDir()}, {"suite"}, {"suite", "a.yaml", "b.yaml"}} {
		if code, _, errs := invoke(t, args...); code != 3 || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 3 and one line", args, code, errs)
		}
	}
}

// Two recorded runs: report re-renders both pages and a summary of them, compare puts
// their figures side by side, and the run directories say what they ran.
func TestReportAndCompareRecordedRuns(t *testing.T) {
	out := t.TempDir()
	var dirs []string
	for _, retry := range []string{"naive", "idempotent"} {
		// On the package's shared server: what is tested is the report of recorded runs,
		// not a launch.
		code, stdout, errs := invoke(t, "run", "--quiet", "--dsn", startPostgres(t).DSN, "--workers", "4", "--ops", "20", "--budget", "50",
			"--fault", "commit-cut:0.3", "--retry", retry, "--out", out)
		if code == 3 && strings.Contains(errs, "not installed") && os.Getenv("CI") != "true" {
			t.Skipf("postgres: %s", errs)
		}
		if code == 3 {
			t.Fatalf("run: %s", errs)
		}
		m, _ := filepath.Glob(filepath.Join(out, "*-budget-postgres-commit-cut-"+retry))
		if len(m) != 1 {
			t.Fatalf("no run directory named by workload, store, fault and retry %s:\n%s", retry, stdout)
		}
		dirs = append(dirs, m[0])
		os.Remove(filepath.Join(m[0], "report.html"))
	}
	code, stdout, errs := invoke(t, "report", dirs[0], dirs[1])
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	for _, p := range []string{filepath.Join(dirs[0], "report.html"), filepath.Join(dirs[1], "report.html"), filepath.Join(out, "summary.html")} {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), "echarts") {
			t.Errorf("%s not rendered: %v", p, err)
		}
		if !strings.Contains(stdout, p) {
			t.Errorf("report did not print %s", p)
		}
	}
	code, stdout, errs = invoke(t, "compare", dirs[0], dirs[1])
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errs)
	}
	for _, want := range []string{"retry", "naive", "idempotent", "B/A", "throughput", "double_applied", "A verdict: invalid: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare lacks %q:\n%s", want, stdout)
		}
	}
}
