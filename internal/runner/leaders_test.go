package runner_test

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

// leadersHold checks results.json's leader timeline of a run whose nodes reported
// their roles against the history's role reports themselves: it covers the run from
// the first report to the end without a gap, each span's leaders are the nodes the
// reports name primary inside it (leaderAt), the partition's target led when it
// opened, and the seconds without a leader and with several add up from the spans; and
// the run's report.html draws it in a browser. It returns the timeline, which
// partitionRun has re-checked from the run directory.
func leadersHold(t *testing.T, res *results.Results) *results.Leaders {
	t.Helper()
	l := res.Leaders
	if l == nil || len(l.Timeline) == 0 {
		t.Fatalf("no leader timeline in a run whose nodes report their roles")
	}
	ops := historyOps(t, res)
	near := func(a, b float64) bool { return math.Abs(a-b) < 0.0015 }
	var none, split float64
	at := l.FromS
	for i, s := range l.Timeline {
		if !near(s.StartS, at) || s.EndS < s.StartS {
			t.Errorf("span %d (%+v) does not follow the one before, which ended at %.3f s", i, s, at)
		}
		at = s.EndS
		switch len(s.Leaders) {
		case 0:
			none += s.EndS - s.StartS
		case 1:
			// Inside the span (a millisecond past its start, the reports' rounding).
			mid := int64((s.StartS + s.EndS) / 2 * 1e9)
			if got := leaderAt(ops, mid); got != s.Leaders[0] {
				t.Errorf("span %+v names %s; the reports name %q leader at %.3f s", s, s.Leaders[0], got, float64(mid)/1e9)
			}
		default:
			split += s.EndS - s.StartS
		}
	}
	if !near(at, l.ToS) {
		t.Errorf("the timeline ends at %.3f s, not at its to_s %.3f s", at, l.ToS)
	}
	if math.Abs(none-l.NoLeaderS) > 0.01 || math.Abs(split-l.SplitBrainS) > 0.01 {
		t.Errorf("no leader %.3f s and split brain %.3f s, the spans add up to %.3f s and %.3f s", l.NoLeaderS, l.SplitBrainS, none, split)
	}
	for _, op := range ops {
		if op.Process != histories.Nemesis || op.F != "partition" {
			continue
		}
		var target string
		for _, p := range res.Partitions {
			for _, c := range p.Components {
				if len(c) == 1 {
					target = c[0]
				}
			}
		}
		t0 := float64(op.Time) / 1e9
		for _, s := range l.Timeline {
			if s.StartS <= t0 && t0 < s.EndS && len(s.Leaders) == 1 && s.Leaders[0] != target {
				t.Errorf("the partition isolated %s at %.3f s; the timeline names %s leader then", target, t0, s.Leaders[0])
			}
		}
	}
	t.Logf("%s", l)
	stripInBrowser(t, res)
	return l
}

// stripInBrowser loads the run's report.html in headless chromium and checks that the
// leader strip was laid out with a segment per span of the timeline, in its order.
// Skipped without chromium (required under CI=true).
func stripInBrowser(t *testing.T, res *results.Results) {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is missing (CI=true): install Debian package chromium")
		}
		t.Logf("no chromium: report.html not loaded")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+filepath.Join(res.RunDir, "report.html")).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`<div id="leader-strip" data-spans="([^"]*)"[^>]*data-widths="([^"]*)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no leader strip laid out on the run's report.html")
	}
	var want []string
	for _, s := range res.Leaders.Timeline {
		want = append(want, s.Leader())
	}
	if got := string(m[1]); got != strings.Join(want, "|") {
		t.Errorf("the strip's segments %q, the timeline's %q", got, strings.Join(want, "|"))
	}
	if n := len(strings.Fields(string(m[2]))); n != len(want) {
		t.Errorf("%d segments laid out, %d spans", n, len(want))
	}
}
