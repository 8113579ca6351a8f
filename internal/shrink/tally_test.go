package shrink

import "testing"

// A candidate is kept on half of K runs failing, rounded up, and its runs stop as soon
// as the outcome is settled: the half reached (kept), or out of reach (refused). One
// failing run in K does not keep it.
func TestTallyKeepsOnHalfOfK(t *testing.T) {
	for _, tc := range []struct {
		k        int
		outcomes string // f: a run failed with the fingerprint, p: it passed
		runs     int    // runs made before the outcome settled
		kept     bool
	}{
		{3, "ff", 2, true},
		{3, "fpf", 3, true},
		{3, "pff", 3, true},
		{3, "fpp", 3, false},
		{3, "pp", 2, false},
		{3, "pfp", 3, false},
		{1, "f", 1, true},
		{1, "p", 1, false},
		{2, "f", 1, true},
		{2, "pp", 2, false},
		{10, "fffff", 5, true},
		{10, "pppppp", 6, false},
		{10, "fpfpfpfpf", 9, true},
		{10, "fpfpfpfppp", 10, false},
	} {
		tl := tally{k: tc.k}
		for tl.more() {
			if tl.runs >= len(tc.outcomes) {
				t.Fatalf("k=%d %s: wants run %d, beyond the outcomes given", tc.k, tc.outcomes, tl.runs+1)
			}
			if tc.outcomes[tl.runs] == 'f' {
				tl.fails++
			}
			tl.runs++
		}
		if tl.runs != tc.runs || tl.kept() != tc.kept {
			t.Errorf("k=%d %s: stopped after %d runs, kept %v; want %d runs, kept %v", tc.k, tc.outcomes, tl.runs, tl.kept(), tc.runs, tc.kept)
		}
	}
}

// The confirmation runs on after the half is reached, to say how often the reproducer
// fails, and stops once the half is out of reach.
func TestTallyOpenRunsOnPastTheHalf(t *testing.T) {
	tl := tally{k: 3, runs: 2, fails: 2}
	if !tl.kept() || tl.more() || !tl.open() {
		t.Fatalf("2 of 2 failed with k=3: kept %v, more %v, open %v; want kept, no more, open", tl.kept(), tl.more(), tl.open())
	}
	tl = tally{k: 3, runs: 2, fails: 0}
	if tl.open() {
		t.Fatal("0 of 2 failed with k=3: the half is out of reach, yet open")
	}
}
