package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
)

// A faulted run's results: 30 operations proven applied more than once, 40 anomalies.
func faulted() *results.Results {
	r := &results.Results{Verdict: checker.Invalid, Summary: "decrement 1-1 was rejected (and 39 more anomalies)", Evidence: &results.Evidence{}}
	for i := 0; i < 30; i++ {
		n := 2 + i%3
		r.Evidence.AppliedTwice = append(r.Evidence.AppliedTwice, results.AmbiguousOp{OpID: fmt.Sprintf("1-%d", i), Invoke: int64(i), Times: n, Proof: results.ProofProxy,
			Sentence: fmt.Sprintf("operation 1-%d (invoked at history event %d) took effect %d times: ...", i, i, n)})
		r.Evidence.Ambiguous = append(r.Evidence.Ambiguous, results.AmbiguousOp{OpID: fmt.Sprintf("1-%d", i)})
	}
	for i := 0; i < 40; i++ {
		kind := "premature-rejection"
		if i%4 == 0 {
			kind = "stale-read"
		}
		r.Anomalies = append(r.Anomalies, checker.Anomaly{Kind: kind, Ops: []int64{int64(i), 100 + int64(i)}, Explanation: fmt.Sprintf("anomaly %d", i)})
	}
	return r
}

// Trim bounds the lists and keeps the counts, the grouping and the figures exact; trimming
// results read back again changes nothing.
func TestTrimKeepsCountsExact(t *testing.T) {
	r := faulted()
	r.Trim(5)
	if len(r.Anomalies) != 5 || len(r.Evidence.AppliedTwice) != 5 || len(r.Evidence.Ambiguous) != 5 {
		t.Fatalf("lists not bounded: %d %d %d", len(r.Anomalies), len(r.Evidence.AppliedTwice), len(r.Evidence.Ambiguous))
	}
	r.Trim(3)
	for name, want := range map[string]float64{"anomalies": 40, "double_applied": 30} {
		if v, _ := results.Figure(r, name); v != want {
			t.Errorf("%s = %v after trimming, want %v", name, v, want)
		}
	}
	if g := r.Evidence.Grouped(); g != "2× 10, 3× 10, 4× 10" {
		t.Errorf("grouped %q", g)
	}
	if r.AnomalyKinds["premature-rejection"] != 30 || r.AnomalyKinds["stale-read"] != 10 {
		t.Errorf("kinds %v", r.AnomalyKinds)
	}
}

// The verdict's first line is the checker's proven anomaly, with what the proxy proves
// beside it; each example the checker gives is followed by the ground truth of the
// operations it names; what the ground truth proves of operations no example named
// comes after, grouped, a few each.
func TestVerdictLeadsWithTheChecker(t *testing.T) {
	r := faulted()
	r.Trim(20)
	var b bytes.Buffer
	WriteVerdict(&b, r)
	lines := strings.Split(b.String(), "\n")
	if want := "verdict: invalid: decrement 1-1 was rejected (and 39 more anomalies); the proxy proves 30 operations took effect more than once"; lines[0] != want {
		t.Errorf("first line\n%q, want\n%q", lines[0], want)
	}
	if lines[1] != "  checker: 30 premature-rejection" || lines[2] != "    anomaly 1" || !strings.HasPrefix(lines[3], "      the proxy: operation 1-1 (invoked at history event 1) took effect 3 times") {
		t.Errorf("the checker's anomaly and its ground truth do not come first:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "ground truth: 30 operations took effect more than once: 2× 10, 3× 10, 4× 10") {
		t.Errorf("no grouped ground truth:\n%s", b.String())
	}
	// The examples under the anomalies named 1-0 ... 1-6; the group shows others.
	i := strings.Index(b.String(), "ground truth: 30")
	if n := strings.Count(b.String()[i:], "    operation 1-"); n != ConsoleExamples || strings.Contains(b.String()[i:], "operation 1-1 ") {
		t.Errorf("%d examples of the ground truth (want %d, none shown above):\n%s", n, ConsoleExamples, b.String()[i:])
	}
	// 30 in all: 6 printed under the anomalies, 3 here, 21 more; each counted once.
	if !strings.Contains(b.String(), "(6 shown under the checker's anomalies above)\n    ... and 21 more (results.json lists 20; indoubt check --max-anomalies -1 RUNDIR lists them all)") {
		t.Errorf("the rest is not counted exactly:\n%s", b.String())
	}
	clean := &results.Results{Verdict: checker.Valid, Summary: "linearizable"}
	b.Reset()
	WriteVerdict(&b, clean)
	if b.String() != "verdict: valid: linearizable\n" {
		t.Errorf("valid verdict: %q", b.String())
	}
}

// A checker that lists fewer anomalies than it found: the count is its own, the kinds
// those of the listed ones.
func TestCheckerBoundedList(t *testing.T) {
	r := faulted()
	r.AnomalyCount = 806
	r.Trim(20)
	var b bytes.Buffer
	WriteVerdict(&b, r)
	for _, want := range []string{"checker: 806 anomalies; it lists the first 40, by kind:"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	if v, _ := results.Figure(r, "anomalies"); v != 806 {
		t.Errorf("anomalies figure %v", v)
	}
}
