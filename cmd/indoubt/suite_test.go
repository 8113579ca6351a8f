package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// needTool returns the path of a tool a test needs; without it the test skips, or fails
// under CI=true, where scripts/test installs it.
func needTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing under CI=true (scripts/test installs Debian package %s)", name, pkg)
	}
	t.Skipf("%s is missing: install Debian package %s (scripts/test does as root)", name, pkg)
	return ""
}

func writeSuite(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A suite whose expectation does not hold exits 1, and its JUnit file is valid against
// the JUnit schema (checked by xmllint, a real schema validator) and names the failing
// case with the verdict's explanation as the failure message.
func TestSuiteFailingExpectation(t *testing.T) {
	t.Parallel()
	xmllint := needTool(t, "xmllint", "libxml2-utils")
	suite := writeSuite(t, `name: failing
defaults: {store: postgres, workers: 4, ops: 25, budget: 50}
cases:
  - name: clean run passes
    expect: valid
    figures: {anomalies: "== 0", applied: "== 50"}
  - name: naive retry expected valid
    faults: [commit-cut:0.3]
    retry: naive
    expect: valid
`)
	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	code, out, errs := invoke(t, "suite", "--quiet", "--out", dir, "--junit", junit, "--github", suite)
	if strings.Contains(errs, "cannot be launched") || strings.Contains(out, "skipped clean run") {
		if os.Getenv("CI") == "true" {
			t.Fatalf("postgres missing under CI:\n%s%s", out, errs)
		}
		t.Skipf("postgres cannot be launched here:\n%s", out)
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errs)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "summary-failing-*.html")); len(m) != 1 || !strings.Contains(out, "summary: "+m[0]) {
		t.Errorf("no summary.html of the suite's runs in %s:\n%s", dir, out)
	}
	if !strings.Contains(out, "FAIL naive retry expected valid: verdict invalid, expected valid") {
		t.Errorf("the table does not name the failed expectation:\n%s", out)
	}
	if !strings.Contains(out, "::error file="+strings.ReplaceAll(suite, ":", "%3A")+",line=7,title=indoubt suite failing%3A naive retry expected valid::") {
		t.Errorf("no GitHub annotation on the case's line:\n%s", out)
	}
	cmd := exec.Command(xmllint, "--noout", "--schema", "testdata/junit.xsd", junit)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("junit.xml is not valid against the JUnit schema: %v\n%s", err, b)
	}
	b, _ := os.ReadFile(junit)
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Out string `xml:"system-out"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Suites) != 1 || len(doc.Suites[0].Cases) != 2 {
		t.Fatalf("want one suite of two cases:\n%s", b)
	}
	c0, c1 := doc.Suites[0].Cases[0], doc.Suites[0].Cases[1]
	if c0.Failure != nil {
		t.Errorf("the passing case has a failure: %+v", c0.Failure)
	}
	if c1.Name != "naive retry expected valid" || c1.Failure == nil {
		t.Fatalf("the failing case is not named with a failure:\n%s", b)
	}
	if !strings.HasPrefix(c1.Failure.Message, "invalid: ") || !strings.Contains(c1.Failure.Message, "; the proxy proves ") {
		t.Errorf("failure message is not the verdict's first explanation: %q", c1.Failure.Message)
	}
	if !strings.Contains(c1.Out, "run directory: "+dir) {
		t.Errorf("system-out does not name the run directory: %q", c1.Out)
	}
}

// A bad suite file is one line naming the file and the line, and exit 3; nothing runs.
func TestSuiteBadFile(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"cases:\n  - name: a\n    store: postgres\n    expect: maybe\n", `:2: case "a": expect "maybe"`},
		{"cases:\n  - name: a\n    store: postgres\n    expect: valid\n    figures: {doubles: \"> 0\"}\n", `:2: case "a": unknown figure "doubles"`},
		{"cases:\n  - name: a\n    store: postgres\n    expect: valid\n    figures: {lost: \"about 3\"}\n", `:2: case "a": figure lost: bound "about 3"`},
		{"cases:\n  - name: a\n    store: postgres\n    expect: valid\n    wrokers: 3\n", `:5: field wrokers not found`},
		{"cases:\n  - name: a\n    store: dynamodb\n    expect: valid\n", `:2: case "a": unknown store "dynamodb"`},
		{"cases:\n  - name: a\n    store: postgres\n    expect: valid\n    faults: [wobble]\n", `:2: case "a":`},
		{"cases:\n  - name: a\n    store: postgres\n    expect: valid\n  - name: a\n    store: redis\n    expect: valid\n", `:5: case "a": the name is used already on line 2`},
		{"name: x\ncases: [\n", `suite.yaml:`},
		{"name: x\n", `no cases`},
		{"", `empty suite file`},
	} {
		p := writeSuite(t, tc.body)
		code, out, errs := invoke(t, "suite", "--out", t.TempDir(), p)
		if code != 3 {
			t.Errorf("%q: exit %d, want 3\n%s%s", tc.body, code, out, errs)
			continue
		}
		if strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, p) || !strings.Contains(errs, tc.want) {
			t.Errorf("%q: stderr %q, want one line naming %s and %q", tc.body, errs, p, tc.want)
		}
	}
}

// The smoke suite CI runs: every store launchable here, under three retry policies.
func TestSmokeSuite(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the smoke suite runs servers for about two minutes")
	}
	dir := t.TempDir()
	junit := filepath.Join(dir, "junit.xml")
	code, out, errs := invoke(t, "suite", "--quiet", "--out", dir, "--junit", junit, "../../suites/smoke.yaml")
	t.Logf("\n%s", out)
	if code != 0 {
		t.Fatalf("smoke suite: exit %d\n%s", code, errs)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "<testcase "); n < 10 {
		t.Errorf("junit.xml has %d testcases, want every case of suites/smoke.yaml", n)
	}
}

// seeds.yaml, the articles' experiments, is a valid suite file.
func TestSeedsSuiteParses(t *testing.T) {
	name, runs, err := loadSuite("../../suites/seeds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if name != "seeds" || len(runs) < 8 {
		t.Errorf("seeds: name %q, %d cases", name, len(runs))
	}
}

// A case whose server cannot be launched here is skipped with a note, never passed; under
// CI=true it fails unless it is optional. Nothing launches CockroachDB here.
func TestSuiteMissingServer(t *testing.T) {
	suite := writeSuite(t, `cases:
  - name: optional cockroach
    store: cockroach
    workload: counter
    optional: true
    expect: valid
  - name: required cockroach
    store: cockroach
    workload: counter
    expect: valid
`)
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		junit := filepath.Join(t.TempDir(), "junit.xml")
		code, out, errs := invoke(t, "suite", "--quiet", "--junit", junit, "--github", "--out", t.TempDir(), suite)
		b, _ := os.ReadFile(junit)
		if !strings.Contains(out, "skipped optional cockroach: cockroach cannot be launched here") || strings.Count(string(b), "<skipped ") < 1 {
			t.Errorf("CI=%q: the optional case is not skipped with a note:\n%s\n%s", ci, out, b)
		}
		if !strings.Contains(out, "::notice file=") {
			t.Errorf("CI=%q: no notice for the skipped case:\n%s", ci, out)
		}
		switch ci {
		case "true":
			if code != 1 || !strings.Contains(out, "FAIL required cockroach: cockroach cannot be launched here") {
				t.Errorf("CI=true: exit %d, want 1 with the required case failed:\n%s%s", code, out, errs)
			}
		default:
			if code != 0 || strings.Count(string(b), "<skipped ") != 2 || !strings.Contains(out, "0 passed, 0 failed, 2 skipped") {
				t.Errorf("outside CI: exit %d, want 0 with both cases skipped:\n%s%s", code, out, errs)
			}
		}
	}
}

// A runaway suite file is refused in one line before it costs time or memory: past
// 1 MiB before YAML reads it, past 1000 cases before the first is decoded, a name
// past 200 bytes without echoing it. Run as a process of its own, for its peak memory.
func TestSuiteFileBounds(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, parts ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(parts, "")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var many strings.Builder
	for i := 0; many.Len() < 1<<20-200; i++ {
		fmt.Fprintf(&many, "  - {name: c%d, store: postgres, expect: valid}\n", i)
	}
	long := strings.Repeat("A", 900_000)
	big := make([]byte, 5<<20)
	for i := range big {
		big[i] = 'x'
	}
	for _, tc := range []struct {
		file, want string
	}{
		{write("big.yaml", "name: ", string(big), "\ncases: []\n"), ": more than 1048576 bytes (1 MiB), the most a suite file may hold"},
		{write("many.yaml", "cases:\n", many.String(), "  - {name: bad, store: postgres, workers: -3, expect: valid}\n"), "cases, more than the 1000 a suite may hold"},
		{write("name.yaml", "name: ", long, "\ncases:\n  - {name: x, store: postgres, expect: valid}\n"), "name.yaml:1: the suite's name is 900000 bytes long, at most 200"},
		{write("case.yaml", "cases:\n  - {name: x, store: postgres, expect: valid}\n  - {name: ", long, ", store: postgres, expect: valid}\n"), "case.yaml:3: the case's name is 900000 bytes long, at most 200"},
	} {
		cmd, out, errb := startBinary(t, "suite", "--out", filepath.Join(dir, "runs"), tc.file)
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatal(err)
		}
		errs := errb.String()
		if code != 3 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%s: exit %d, stderr %.300q; want exit 3 and one line holding %q\n%.300s", tc.file, code, errs, tc.want, out)
		}
		if strings.Contains(errs, "AAAAAAAA") || strings.Contains(errs, "xxxxxxxx") {
			t.Errorf("%s: the refusal echoes the name (%d bytes)", tc.file, len(errs))
		}
		// Before the bounds a 4.6 MB suite took 1.26 GB; a refusal now stays small.
		if kb := peakKB(t, cmd); kb < 0 || kb > 400<<10 {
			t.Errorf("%s: peak memory %d MB, want under 400 MB", tc.file, kb>>10)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		t.Errorf("a refused suite created its --out directory")
	}
}
