package report_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/workloads"
)

// skipOrFail skips a test that needs something missing here, and fails it under CI=true,
// where scripts/test installs it.
func skipOrFail(t *testing.T, format string, a ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format+" (required under CI=true)", a...)
	}
	t.Skipf(format, a...)
}

func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		skipOrFail(t, "chromium is missing: install Debian package chromium (scripts/test does as root)")
	}
	return p
}

// browse runs headless chromium on a file with time for the page's scripts to run.
func browse(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000", "--user-data-dir=" + t.TempDir()}
	out, err := exec.CommandContext(ctx, bin, append(base, args...)...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return string(out)
}

// faultedRun runs cfg on a server it launches, under the retry policy and the faults
// named, skipping when the store is not installed.
func faultedRun(t *testing.T, retry string, cfg runner.Config, specs ...string) *results.Results {
	t.Helper()
	if err := runner.Available(cfg.Store); err != nil {
		skipOrFail(t, "%s: %v", cfg.Store, err)
	}
	sched, err := faults.ParseSchedule(specs)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Retry, err = runner.ParsePolicy(retry); err != nil {
		t.Fatal(err)
	}
	cfg.Faults, cfg.Out = sched, t.TempDir()
	res, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// load opens page in the browser and returns its DOM and the page's own check
// (charts drawn, operations highlighted), failing on script errors.
func load(t *testing.T, bin, page string) (string, []string) {
	t.Helper()
	dom := browse(t, bin, "--dump-dom", "file://"+page)
	m := checkRE.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's check did not run:\n%.2000s", dom)
	}
	if m[3] != "" {
		t.Errorf("script errors in the browser: %s", m[3])
	}
	return dom, m
}

var checkRE = regexp.MustCompile(`<div id="render-check"[^>]*data-charts="([^"]*)"[^>]*data-highlighted="([^"]*)"[^>]*data-errors="([^"]*)"`)

// report.html of a faulted run, loaded in a real browser: no script errors, the rate,
// latency and timeline charts drawn, the operations the ground truth names highlighted
// on the timeline and listed, the page standing alone (no network). The screenshot is
// kept in the test's artifact directory (go test -artifacts).
func TestReportInBrowser(t *testing.T) {
	bin := chromium(t)
	res := faultedRun(t, "naive", runner.Config{
		Workload: workloads.Budget, Store: runner.Postgres, Workers: 8, Ops: 40, Seed: 1, Budget: 200,
	}, "commit-cut:0.2")
	if res.Evidence == nil || res.Evidence.AppliedTwiceTotal() == 0 {
		t.Fatalf("the faulted run proved no double application: %+v", res.Evidence)
	}
	page := filepath.Join(res.RunDir, "report.html")
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`<script[^>]+src=|https?://[^"' ]+\.js`).Match(b) {
		t.Errorf("report.html loads a script from elsewhere: it must open offline")
	}
	dom, m := load(t, bin, page)
	for _, id := range []string{"chart_rate", "chart_latency", "chart_timeline"} {
		if !strings.Contains(" "+m[1]+" ", " "+id+" ") {
			t.Errorf("chart %s not drawn (drawn: %q)", id, m[1])
		}
	}
	if n, _ := strconv.ParseFloat(m[2], 64); n < float64(len(res.Evidence.AppliedTwice)) {
		t.Errorf("%s operations highlighted on the timeline, want at least the %d proven applied twice", m[2], len(res.Evidence.AppliedTwice))
	}
	if !strings.Contains(dom, `data-timeline-series="ok|fail|info|named by the verdict|commit-cut"`) {
		t.Errorf("the timeline's series are not ok, fail, info, the named operations and the cuts: %s", regexp.MustCompile(`data-timeline-series="[^"]*"`).FindString(dom))
	}
	first := res.Evidence.AppliedTwice[0].OpID
	if !regexp.MustCompile(`id="named-ops"[^>]*>[^<]*\b` + regexp.QuoteMeta(first) + `\b`).MatchString(dom) {
		t.Errorf("operation %s, proven applied twice, is not among the highlighted operations", first)
	}
	// The checker's proven anomaly leads; the proxy's proof stands beside it, and under
	// the anomalies that name the operations it proves something of.
	if !regexp.MustCompile(`id="headline">invalid: [^<]*; the proxy proves \d+ operations? took effect more than once<`).MatchString(dom) {
		t.Errorf("the headline is not the checker's summary with the proxy's proof beside it: %s", regexp.MustCompile(`id="headline">[^<]*`).FindString(dom))
	}
	named := 0
	for _, a := range res.Anomalies {
		named += len(report.ClaimsAbout(res.Evidence, a))
	}
	if got := strings.Count(dom, "<i>the proxy:</i> operation "); got != named {
		t.Errorf("%d claims of the ground truth under the anomalies, want the %d about the operations they name", got, named)
	}
	shot := filepath.Join(t.ArtifactDir(), "report-faulted.png")
	browse(t, bin, "--window-size=1300,2600", "--screenshot="+shot, "file://"+page)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Errorf("no screenshot: %v", err)
	}
	t.Logf("screenshot of a faulted run's report: %s", shot)
}

// summary.html of several runs draws the stand's bar chart and, for a counter sweep,
// the three curves against workers.
func TestSummaryInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	var runs []*results.Results
	for i, w := range []int{1, 4, 16} {
		var r results.Results
		b := []byte(`{"verdict":"valid","workload":"counter","store":"postgres","mechanism":"read-write","retry":"conflict","duration_s":10,
			"throughput":` + strconv.Itoa(900-100*i) + `,"latency_ms":{"p99":` + strconv.Itoa(2+10*i) + `},
			"outcomes":{"succeeded":{"ops":` + strconv.Itoa(9000-1000*i) + `,"attempts":` + strconv.Itoa(9000+1000*i) + `}},
			"final":{"before":0,"after":8000,"acknowledged":8000}}`)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		r.Workers = w
		runs = append(runs, &r)
	}
	page := filepath.Join(dir, "summary.html")
	if err := report.WriteSummaryHTML(page, runs); err != nil {
		t.Fatal(err)
	}
	dom := browse(t, bin, "--dump-dom", "file://"+page)
	m := regexp.MustCompile(`<div id="render-check"[^>]*data-charts="([^"]*)"[^>]*data-errors="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's check did not run:\n%.2000s", dom)
	}
	if m[2] != "" {
		t.Errorf("script errors: %s", m[2])
	}
	if m[1] != "chart_stores chart_sweep_tps chart_sweep_p99 chart_sweep_rps" {
		t.Errorf("charts drawn: %q", m[1])
	}
	if strings.Count(dom, "<tr><td>") != 3 {
		t.Errorf("the stand's table does not have one row per run")
	}
}

// report.html of a run whose Redis (no persistence) was killed, in a real browser: the
// kill's window shaded on the rate chart apart from the proxy's (there was none), each
// worker's reconnect gap on the timeline, and the tables of the fault's timeline and of
// the lost writes, the first lost operation among them.
func TestReportOfProcessFaultsInBrowser(t *testing.T) {
	bin := chromium(t)
	res := faultedRun(t, "none", runner.Config{
		Workload: workloads.Register, Store: runner.Redis, Persistence: "none", Workers: 3, Duration: 4 * time.Second, Seed: 1,
	}, "kill@1s-2s")
	if len(res.ProcessFaults) != 1 || len(res.LostWrites) == 0 {
		t.Fatalf("the kill lost nothing or was not applied: %+v, lost %+v", res.ProcessFaults, res.LostWrites)
	}
	page := filepath.Join(res.RunDir, "report.html")
	dom, _ := load(t, bin, page)
	if got := regexp.MustCompile(`data-rate-areas="([^"]*)"`).FindStringSubmatch(dom); got == nil || got[1] != "kill@1s-2s: server down" {
		t.Errorf("the rate chart's shaded areas are %q, want the kill's window alone", got)
	}
	series := regexp.MustCompile(`data-timeline-series="([^"]*)"`).FindStringSubmatch(dom)
	if series == nil || !strings.Contains(series[1], "|reconnect gap") {
		t.Errorf("the timeline has no reconnect gaps: %q", series)
	}
	rows := func(id string) int {
		tb := regexp.MustCompile(`(?s)<table id="` + id + `">(.*?)</table>`).FindStringSubmatch(dom)
		if tb == nil {
			t.Errorf("no table %s on the page", id)
			return -1
		}
		return strings.Count(tb[1], "<tr") - 1
	}
	if n := rows("process-faults"); n != 1 {
		t.Errorf("the timeline table has %d rows, want the kill's", n)
	}
	if n := rows("lost-writes"); n != len(res.LostWrites) {
		t.Errorf("the lost-writes table has %d rows, want %d", n, len(res.LostWrites))
	}
	l := res.LostWrites[0]
	row := regexp.MustCompile(`<td class="named">` + regexp.QuoteMeta(l.OpID) + `</td><td>(\d+)</td><td>wrote ` + regexp.QuoteMeta(string(l.Value)) + ` to ` + l.Key + `</td><td>[0-9.]+ s</td><td><code>kill@1s-2s</code></td>`)
	if !row.MatchString(dom) {
		t.Errorf("lost write %s (%s to %s) is not in the table", l.OpID, l.Value, l.Key)
	}
	if strings.Contains(dom, "fired:") {
		t.Errorf("the page speaks of a proxy that was not there")
	}
	shot := filepath.Join(t.ArtifactDir(), "report-killed.png")
	browse(t, bin, "--window-size=1300,2600", "--screenshot="+shot, "file://"+page)
	t.Logf("screenshot of a killed run's report: %s", shot)
}
