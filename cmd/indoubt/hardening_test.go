package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNoArgumentsExit3: indoubt with no arguments prints its usage and exits 3 (a script
// that lost its arguments must not pass); --help stays 0.
func TestNoArgumentsExit3(t *testing.T) {
	code, out, errs := invoke(t)
	if code != 3 || !strings.Contains(out, "Usage: indoubt COMMAND") || strings.Count(errs, "\n") != 1 {
		t.Errorf("no arguments: exit %d, stdout %q, stderr %q; want the usage and exit 3 with one line", code, out, errs)
	}
	if code, out, _ := invoke(t, "--help"); code != 0 || !strings.Contains(out, "Usage: indoubt COMMAND") {
		t.Errorf("--help: exit %d", code)
	}
}

// fakeRun makes a directory that looks like a run directory: a results.json (of a real
// shape) and, when history is set, a history.jsonl.
func fakeRun(t *testing.T, parent, name string, history bool) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A real run's results.json, which report and compare hold to its schema.
	var res map[string]any
	readJSON(t, filepath.Join("..", "..", "internal", "shrink", "testdata", "naive-cut", "results.json"), &res)
	res["verdict"], res["summary"], res["anomalies"], res["anomaly_count"] = "valid", "valid", []any{}, 0
	delete(res, "anomaly_kinds")
	delete(res, "evidence")
	writeJSON(t, filepath.Join(dir, "results.json"), res)
	if history {
		h := `{"header":{"format":"indoubt-history/1","workload":"budget","model":"budget","params":{"budget":3}}}` + "\n" +
			`{"index":0,"time":1,"process":0,"type":"invoke","f":"decrement","op_id":"0-0"}` + "\n" +
			`{"index":1,"time":2,"process":0,"type":"ok","f":"decrement","op_id":"0-0","value":{"applied":true,"balance":2}}` + "\n"
		if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte(h), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestReportChecksEverythingFirst: report of a directory without a history exits 3, and
// so does an unwritable --summary, both before any page is rendered.
func TestReportChecksEverythingFirst(t *testing.T) {
	parent := t.TempDir()
	good := fakeRun(t, parent, "a", true)
	bare := fakeRun(t, parent, "b", false)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"report", bare}, "no history.jsonl"},
		{[]string{"report", good, bare}, "no history.jsonl"},
		{[]string{"report", "--summary", filepath.Join(parent, "nonexistent", "dir", "s.html"), good, fakeRun(t, parent, "c", true)}, "--summary"},
	} {
		code, out, errs := invoke(t, tc.args...)
		if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 3, one line with %q", tc.args, code, out, errs, tc.want)
		}
		if _, err := os.Stat(filepath.Join(good, "report.html")); err == nil {
			t.Fatalf("%v: report.html of %s was rendered before the refusal", tc.args, good)
		}
	}
}

// TestSuiteChecksEverythingFirst: an unwritable --junit, an --out that is a file, and a
// bad case after a good one are refused before any case launches a server.
func TestSuiteChecksEverythingFirst(t *testing.T) {
	good := "cases:\n  - name: a\n    store: postgres\n    ops: 5\n    workers: 1\n    expect: valid\n"
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, tc := range []struct {
		body  string
		flags []string
		want  string
	}{
		{good, []string{"--junit", "/nonexistent/dir/j.xml"}, "--junit"},
		{good, []string{"--out", filepath.Join(file, "runs")}, "--out"},
		{good + "  - name: b\n    store: postgres\n    mechanism: telepathy\n    expect: valid\n", nil, `case "b": mechanism: unknown mechanism "telepathy"`},
		{good + "  - name: b\n    store: postgres\n    servers: 3\n    expect: valid\n", nil, `case "b": servers: applies to the two-phase commit workloads`},
		{good + "  - name: b\n    store: postgres\n    workload: transfer\n    servers: 9\n    expect: valid\n", nil, `case "b": servers: must be 2 to 5`},
		{good + "  - name: b\n    store: postgres\n    faults: [commit-cut@9s-10s]\n    time: 2s\n    expect: valid\n", nil, `case "b": faults: "commit-cut@9s-10s" starts at 9s`},
	} {
		out := t.TempDir()
		args := append([]string{"suite", "--quiet", "--out", out}, tc.flags...)
		code, stdout, errs := invoke(t, append(args, writeSuite(t, tc.body))...)
		if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 3, one line with %q\n%s", tc.flags, code, errs, tc.want, stdout)
		}
		if left, _ := os.ReadDir(out); len(left) != 0 {
			t.Errorf("%v: --out holds %d entries: a case ran", tc.flags, len(left))
		}
	}
}

// TestCheckRefusesFlagsOfAnotherModel: --fail-means and --html are the register models',
// --budget the budget model's, --partial the indoubt format's: given for another, they
// are refused by name rather than ignored.
func TestCheckRefusesFlagsOfAnotherModel(t *testing.T) {
	budget := filepath.Join(fakeRun(t, t.TempDir(), "r", true), "history.jsonl")
	edn := filepath.Join("..", "..", "checker", "testdata", "jepsen-edn")
	ednFiles, _ := filepath.Glob(filepath.Join(edn, "*.edn"))
	if len(ednFiles) == 0 {
		t.Fatal("no EDN history to hand")
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"check", "--fail-means", "not-applied", budget}, "--fail-means"},
		{[]string{"check", "--html", filepath.Join(t.TempDir(), "x.html"), budget}, "--html"},
		{[]string{"check", "--initial", "0", budget}, "--initial"},
		{[]string{"check", "--model", "register", "--budget", "3", budget}, "--budget"},
		{[]string{"check", "--format", "jepsen-edn", "--model", "register", "--partial", ednFiles[0]}, "--partial"},
	} {
		code, out, errs := invoke(t, tc.args...)
		if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.flag) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 3, one line naming %s", tc.args, code, out, errs, tc.flag)
		}
	}
}

// TestSignalDuringLaunchExits2: SIGINT while the server is still launching stops the
// command as interrupted (exit 2, one line), not as a failure to run (3).
func TestSignalDuringLaunchExits2(t *testing.T) {
	out := t.TempDir()
	cmd, _, stderr := startBinary(t, "run", "--store", "postgres", "--workers", "1", "--time", "30s", "--out", out)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "launching a local postgres"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no launch line: %q", stderr)
		}
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 90s after SIGINT")
	}
	if got := cmd.ProcessState.ExitCode(); got != 2 {
		t.Errorf("exit %d, want 2; stderr %q", got, stderr)
	}
	if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); !strings.HasPrefix(lines[len(lines)-1], "indoubt: interrupted") &&
		!strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr %q does not say interrupted", stderr)
	}
}

// TestSuiteInterrupted: SIGINT during the first of two cases prints the table of what
// ran, writes the JUnit file with both cases skipped as interrupted, and exits 2.
func TestSuiteInterrupted(t *testing.T) {
	t.Parallel()
	suite := writeSuite(t, `name: cut
defaults: {store: postgres, workers: 2, time: 2m}
cases:
  - name: long one
    expect: valid
  - name: never run
    expect: valid
`)
	out := t.TempDir()
	junit := filepath.Join(out, "junit.xml")
	cmd, stdout, stderr := startBinary(t, "suite", "--out", out, "--junit", junit, suite)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if h, _ := filepath.Glob(filepath.Join(out, ".*.partial", "history.jsonl")); len(h) == 1 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the first case never started: %q", stderr)
		}
	}
	time.Sleep(500 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		t.Fatal("still running 90s after SIGINT")
	}
	if got := cmd.ProcessState.ExitCode(); got != 2 {
		t.Errorf("exit %d, want 2; stderr %q", got, stderr)
	}
	for _, want := range []string{"long one", "interrupted", "never run", "suite cut: 0 passed, 0 failed, 2 skipped"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatalf("no JUnit file: %v", err)
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil || len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 2 {
		t.Fatalf("junit.xml: %v\n%s", err, b)
	}
	for _, c := range doc.Suites[0].Cases {
		if c.Skipped == nil || !strings.Contains(c.Skipped.Message, "interrupted") {
			t.Errorf("case %q is not skipped as interrupted:\n%s", c.Name, b)
		}
	}
}

// TestSuiteTwoPhaseCase: a suite runs a transfer case on servers it launches (as indoubt run --store postgres --servers 2 --workload transfer does), with
// the two-phase commit figures to bound.
func TestSuiteTwoPhaseCase(t *testing.T) {
	t.Parallel()
	suite := writeSuite(t, `name: twopc
defaults: {store: postgres, workers: 2, ops: 10, rows_per_worker: 20}
cases:
  - name: local transfers
    workload: transfer
    placement: local
    servers: 2
    expect: valid
    figures: {anomalies: "== 0", applied: "> 0", abandoned: "== 0"}
`)
	out := t.TempDir()
	code, stdout, errs := invoke(t, "suite", "--quiet", "--out", out, suite)
	if strings.Contains(stdout, "cannot be launched") && os.Getenv("CI") != "true" {
		t.Skipf("postgres cannot be launched here:\n%s", stdout)
	}
	if code != 0 || !strings.Contains(stdout, "suite twopc: 1 passed") {
		t.Fatalf("exit %d\n%s%s", code, stdout, errs)
	}
	m, _ := filepath.Glob(filepath.Join(out, "*-transfer-postgres-*", "report.html"))
	if len(m) != 1 {
		t.Errorf("no report.html of the transfer case: %v", m)
	}
}
