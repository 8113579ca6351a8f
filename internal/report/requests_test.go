package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
)

// The summary shows the first ConsoleExamples sentences of evidence.requests and how
// many more results.json lists; none without them.
func TestSummarySaysWhatBecameOfRequests(t *testing.T) {
	r := &results.Results{Store: "http", Workload: "app", Verdict: checker.Invalid, Evidence: &results.Evidence{}}
	var b bytes.Buffer
	WriteSummary(&b, r)
	if strings.Contains(b.String(), "API request") {
		t.Errorf("a summary without requests names some:\n%s", b.String())
	}
	for i := range ConsoleExamples + 2 {
		r.Evidence.Requests = append(r.Evidence.Requests, fmt.Sprintf("request k-%d was handled twice: its first response was cut after the service answered 201 (POST /p)", i))
	}
	b.Reset()
	WriteSummary(&b, r)
	out := b.String()
	for i, s := range r.Evidence.Requests {
		if got := strings.Contains(out, s); got != (i < ConsoleExamples) {
			t.Errorf("sentence %d shown %v:\n%s", i, got, out)
		}
	}
	if !strings.Contains(out, "ground truth: "+fmt.Sprint(ConsoleExamples+2)+" API requests whose cut response") || !strings.Contains(out, "... and 2 more in results.json") {
		t.Errorf("summary:\n%s", out)
	}
}

// Bounded by --max-anomalies, results.json keeps the first sentences and their count;
// the summary says how many it does not list.
func TestSummaryOfTrimmedRequests(t *testing.T) {
	r := &results.Results{Store: "http", Workload: "app", Verdict: checker.Invalid, Evidence: &results.Evidence{}}
	for i := range 5 {
		r.Evidence.Requests = append(r.Evidence.Requests, fmt.Sprintf("request k-%d: its first response was cut after the service answered 201; the retry was answered from the key's stored response (a replay)", i))
	}
	r.Trim(2)
	r.Trim(2) // a results.json read back and trimmed again keeps its count
	if e := r.Evidence; len(e.Requests) != 2 || e.RequestsCount != 5 || e.RequestsTotal() != 5 {
		t.Fatalf("trimmed to %d, count %d; want 2 of 5", len(e.Requests), e.RequestsCount)
	}
	var b bytes.Buffer
	WriteSummary(&b, r)
	if out := b.String(); !strings.Contains(out, "ground truth: 5 API requests") || !strings.Contains(out, "... and 3 more (results.json lists 2; --max-anomalies)") {
		t.Errorf("summary:\n%s", out)
	}
}
