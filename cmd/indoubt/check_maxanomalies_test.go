package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// manyAnomaliesRunDir makes a run directory with the test helper whose verdict has
// more anomalies than the console lists by default: 30 acknowledged effects, of which the final
// state holds 5 twice and 25 not at all.
func manyAnomaliesRunDir(t *testing.T) string {
	t.Helper()
	t.Setenv("INDOUBT_OUT", t.TempDir())
	q := quiet{t}
	rec := indoubttest.NewRecorder(q, nil)
	w := rec.Worker()
	final := checker.ExactlyOnceState{}
	for i := range 30 {
		op := w.Invoke("apply", nil)
		if i < 5 {
			final[op.ID()] = 2
		}
		op.Ok(nil)
	}
	rec.Read("read", final)
	return indoubttest.Evaluate(q, rec, indoubttest.ExactlyOnce()).RunDir
}

// The hint printed where anomalies are left unlisted names a flag that exists, and
// following it lists them all: `indoubt check --max-anomalies -1 RUNDIR` prints every
// anomaly and every kind with its count; --max-anomalies N lists N; a bad value is
// refused in one line, exit 3.
func TestCheckMaxAnomaliesListsThemAll(t *testing.T) {
	dir := manyAnomaliesRunDir(t)
	b, err := os.ReadFile(filepath.Join(dir, rundir.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var run results.Results
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	total := run.AnomalyTotal()
	listed := func(out string) int {
		n := 0
		for k := range run.AnomalyKinds {
			n += strings.Count(out, "\n  "+k+": ")
		}
		return n
	}
	if total <= results.DefaultMaxAnomalies {
		t.Fatalf("%d anomalies: want more than %d", total, results.DefaultMaxAnomalies)
	}
	// By default the console lists as many as results.json would, and says how to see
	// the rest.
	code, out, errs := invoke(t, "check", dir)
	if n := listed(out); code != 1 || n != results.DefaultMaxAnomalies ||
		!strings.Contains(out, "--max-anomalies -1 lists them all") {
		t.Errorf("check RUNDIR: exit %d, %d listed, want %d and the way to all:\n%s%s", code, n, results.DefaultMaxAnomalies, out, errs)
	}
	hint := report.ListAllHint(&run)
	args := strings.Fields(strings.TrimSuffix(hint, " lists them all"))
	if args[0] != "indoubt" || args[len(args)-1] != dir {
		t.Fatalf("hint %q: want indoubt check ... %s", hint, dir)
	}
	code, out, errs = invoke(t, args[1:]...)
	if code != 1 {
		t.Fatalf("%s: exit %d\n%s%s", hint, code, out, errs)
	}
	if n := listed(out); n != total {
		t.Errorf("%s lists %d anomalies, want all %d:\n%s", hint, n, total, out)
	}
	m := regexp.MustCompile(`anomalies by kind: (.*)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no kinds with their counts:\n%s", out)
	}
	for k, n := range run.AnomalyKinds {
		if !strings.Contains(m[1], strconv.Itoa(n)+" "+k) {
			t.Errorf("kinds %q: want %d %s", m[1], n, k)
		}
	}
	code, out, _ = invoke(t, "check", "--json", "--max-anomalies", "-1", dir)
	var all results.Results
	if err := json.Unmarshal([]byte(out), &all); err != nil || code != 1 || len(all.Anomalies) != total {
		t.Errorf("check --json --max-anomalies -1: exit %d, %d anomalies listed (%v), want %d", code, len(all.Anomalies), err, total)
	}
	code, out, _ = invoke(t, "check", "--max-anomalies", "3", dir)
	if n := listed(out); code != 1 || n != 3 || !strings.Contains(out, "--max-anomalies -1 lists them all") {
		t.Errorf("check --max-anomalies 3: exit %d, %d listed, want 3 and the way to all:\n%s", code, n, out)
	}
	code, _, errs = invoke(t, "check", "--max-anomalies", "-2", dir)
	if code != 3 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, "--max-anomalies") {
		t.Errorf("check --max-anomalies -2: exit %d, %q: want one line, exit 3", code, errs)
	}
}

// `indoubt check RUNDIR` of a list-append run says whether an acknowledged write was
// lost beside the lost-update it reports: here none, a later read holds both appends.
func TestCheckRunDirSaysNoWriteLost(t *testing.T) {
	t.Setenv("INDOUBT_OUT", t.TempDir())
	q := quiet{t}
	rec := indoubttest.NewRecorder(q, nil)
	txn := func(read []int64, appendV int64) {
		tx := indoubttest.Txn{indoubttest.ReadList("x")}
		if appendV > 0 {
			tx = append(tx, indoubttest.Append("x", appendV))
		}
		op := rec.Worker().Invoke("txn", tx)
		done := append(indoubttest.Txn(nil), tx...)
		done[0].SawList(read)
		op.Ok(done)
	}
	txn(nil, 1)
	txn(nil, 2)
	txn([]int64{1, 2}, 0)
	dir := indoubttest.Evaluate(q, rec, indoubttest.ListAppend("serializable")).RunDir
	code, out, errs := invoke(t, "check", dir)
	if code != 1 || !strings.Contains(out, "lost-update") || !strings.Contains(out, "no acknowledged write was lost") {
		t.Errorf("check RUNDIR: exit %d, want the lost-update and that no acknowledged write was lost:\n%s%s", code, out, errs)
	}
}
