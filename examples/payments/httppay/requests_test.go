package httppay_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/judge/judgetest"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// cutKeys counts the cut responses per Idempotency-Key among events, and fails the test
// on a cut that is not a 201 to a keyed request: the only responses these tests cut.
func cutKeys(t *testing.T, events []toxics.Event) map[string]int {
	t.Helper()
	cuts := map[string]int{}
	for _, e := range events {
		r := e.Request
		if e.Kind != toxics.CommitCut || r == nil || r.IdempotencyKey == "" || r.Status != 201 {
			t.Fatalf("event %+v: want a cut 201 of a keyed request", e)
		}
		cuts[r.IdempotencyKey]++
	}
	if len(cuts) == 0 {
		t.Fatalf("no response was cut")
	}
	return cuts
}

// runDirCuts is cutKeys of the proxy's events in the run directory dir (faults.jsonl).
func runDirCuts(t *testing.T, dir string) map[string]int {
	t.Helper()
	lines, err := rundir.ReadFaultsFile(filepath.Join(dir, rundir.FaultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var evs []toxics.Event
	for _, l := range lines {
		if l.Event != nil {
			evs = append(evs, l.Event.Event)
		}
	}
	return cutKeys(t, evs)
}

// cutWords is how a sentence says a key's cuts: the first, or n of them.
func cutWords(n int) string {
	if n == 1 {
		return "its first response was cut after the service answered 201"
	}
	return fmt.Sprintf("%d of its responses were cut, the first after the service answered 201", n)
}

// duplicated is what the judge must say of the naive API: each payment the database
// holds more than once (paid) named handled that many times, with its cuts; and each
// cut key was paid once more per cut (the client retried each cut response).
func duplicated(t *testing.T, paid map[string]int64, cuts map[string]int) []string {
	t.Helper()
	var want []string
	for k, n := range paid {
		if n < 2 {
			continue
		}
		times := "twice"
		if n > 2 {
			times = fmt.Sprintf("%d times", n)
		}
		want = append(want, fmt.Sprintf("request %s was handled %s: %s (POST /payments)", k, times, cutWords(cuts[k])))
	}
	for k, c := range cuts {
		if paid[k] != int64(c)+1 {
			t.Errorf("key %s: %d responses cut, paid %d times; want paid once more per cut", k, c, paid[k])
		}
	}
	if len(want) == 0 {
		t.Fatalf("no payment was made twice")
	}
	slices.Sort(want)
	return want
}

// replays is what the judge must say of the idempotent API: each cut key's retry
// answered from its stored response.
func replays(cuts map[string]int) []string {
	var want []string
	for k, c := range cuts {
		want = append(want, fmt.Sprintf("request %s: %s; the retry was answered from the key's stored response (a replay)", k, cutWords(c)))
	}
	slices.Sort(want)
	return want
}

// holdRequests holds results.json's evidence.requests of the run directory dir to want,
// and the judgement of dir again from its files alone (judgetest.Recheck) to the same.
func holdRequests(t *testing.T, dir string, want []string) {
	t.Helper()
	run, err := rundir.ReadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	if run.Evidence == nil || !slices.Equal(run.Evidence.Requests, want) {
		t.Errorf("results.json of %s: evidence.requests\n %q\nwant\n %q", dir, requestsOf(run.Evidence), want)
	}
	j := judgetest.Recheck(t, dir)
	if got := requestsOf(j.Results.Evidence); !slices.Equal(got, want) {
		t.Errorf("the recheck of %s: evidence.requests\n %q\nwant\n %q", dir, got, want)
	}
}

// requestsOf is e's requests, nil without evidence.
func requestsOf(e *results.Evidence) []string {
	if e == nil {
		return nil
	}
	return e.Requests
}
