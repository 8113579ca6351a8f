package report_test

import (
	"cmp"
	"context"
	"encoding/json"
	"html"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
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
	sched, err := schedule.Parse(specs)
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

// report.html of a transfer run whose coordinator crashed, in a real browser: the
// two-phase commit section shows results.json's two_phase_commit, figure for figure at
// the precision it prints: the servers, placement, coordinator and transactions by
// outcome, the crash's stops per protocol point, every branch in doubt, every lock probe
// and every resolution of recovery. The run is the runner's TestTwoPhaseCrashLogged's.
func TestReportOfTwoPhaseCrashInBrowser(t *testing.T) {
	bin := chromium(t)
	res := faultedRun(t, "none", runner.Config{
		Workload: workloads.Transfer, Store: runner.Postgres, Placement: transfer.Distributed,
		Workers: 12, Duration: 5 * time.Second, RecoverAfter: 500 * time.Millisecond, Seed: 3,
	}, "coordinator-crash@1s")
	b, err := os.ReadFile(filepath.Join(res.RunDir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		TwoPhase *results.TwoPhase `json:"two_phase_commit"`
	}
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	tp := file.TwoPhase
	if tp == nil || tp.Crash == nil || len(tp.Crash.InDoubt) == 0 || len(tp.Crash.Probes) == 0 || len(tp.Recovery) == 0 {
		t.Fatalf("results.json's two_phase_commit %+v: want a crash with branches in doubt, lock probes and recovery", tp)
	}
	dom, _ := load(t, bin, filepath.Join(res.RunDir, "report.html"))

	kv := func(id string) map[string]string {
		m := map[string]string{}
		for _, r := range tableRows(t, dom, id) {
			if len(r) == 2 {
				m[r[0]] = r[1]
			}
		}
		return m
	}
	s := kv("two-phase")
	for _, c := range []struct{ name, want string }{
		{"servers", strconv.Itoa(tp.Servers)}, {"placement", tp.Placement}, {"coordinator", tp.Coordinator},
		{"committed", strconv.FormatInt(tp.Transactions.Committed, 10)},
		{"aborted", strconv.FormatInt(tp.Transactions.Aborted, 10)},
		{"abandoned", strconv.FormatInt(tp.Transactions.Abandoned, 10)},
	} {
		if s[c.name] != c.want {
			t.Errorf("two-phase table: %s %q, results.json %q", c.name, s[c.name], c.want)
		}
	}
	shows(t, "committed per second", s["committed per second"], tp.CommittedPerSecond)
	shows(t, "latency of the committed", s["latency of the committed"], tp.LatencyMs.Mean, tp.LatencyMs.P99)

	c := tp.Crash
	if h := regexp.MustCompile(`<h3>Coordinator crash at ([^<]*)</h3>`).FindStringSubmatch(dom); h == nil {
		t.Error("no heading of the coordinator crash")
	} else {
		shows(t, "crash time", h[1], c.AtS)
	}
	cr := kv("two-phase-crash")
	var stopped int64
	for _, p := range []string{"before-prepare", "mid-prepare", "before-decision", "after-decision"} {
		if got, want := cr["abandoned "+p], strconv.FormatInt(c.Stops[p], 10); got != want {
			t.Errorf("abandoned %s: %q on the page, %s in results.json", p, got, want)
		}
		stopped += c.Stops[p]
	}
	if stopped != tp.Transactions.Abandoned || stopped == 0 {
		t.Errorf("the crash's stops add to %d, %d transactions abandoned", stopped, tp.Transactions.Abandoned)
	}
	if got := cr["branches in doubt"]; got != strconv.Itoa(len(c.InDoubt)) {
		t.Errorf("branches in doubt: %q on the page, %d in results.json", got, len(c.InDoubt))
	}
	shows(t, "recovery took", cr["recovery took"], c.RecoveryMs)
	shows(t, "all resolved", cr["all resolved, from the crash"], c.ResolvedMs)

	list := func(id string, n int) [][]string {
		rows := tableRows(t, dom, id)
		if len(rows) < 1 || len(rows)-1 != n {
			t.Fatalf("table %s has %d rows beside its header, results.json %d", id, len(rows)-1, n)
		}
		return rows[1:]
	}
	cell := func(what, got, want string) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %q on the page, %q in results.json", what, got, want)
		}
	}
	for i, r := range list("in-doubt", len(c.InDoubt)) {
		d := c.InDoubt[i]
		cell("in doubt gid", r[0], d.GID)
		cell(d.GID+" server", r[1], strconv.Itoa(d.Server))
		shows(t, d.GID+" age", r[2], d.AgeMs)
		cell(d.GID+" locks", r[3], strconv.Itoa(d.Locks))
	}
	for i, r := range list("lock-probes", len(c.Probes)) {
		p := c.Probes[i]
		cell("probe gid", r[0], p.GID)
		cell(p.GID+" probe server", r[1], strconv.Itoa(p.Server))
		cell(p.GID+" probe row", r[2], strconv.Itoa(p.Row))
		shows(t, p.GID+" blocked", r[3], p.BlockedMs)
		cell(p.GID+" timeouts", r[4], strconv.Itoa(p.Timeouts))
		shows(t, p.GID+" locked for", r[5], p.LockedForMs)
		cell(p.GID+" probe error", r[6], cmp.Or(p.Error, "—"))
	}
	for i, r := range list("recovery", len(tp.Recovery)) {
		x := tp.Recovery[i]
		cell("resolution gid", r[0], x.GID)
		cell(x.GID+" resolution server", r[1], strconv.Itoa(x.Server))
		cell(x.GID+" decision", r[2], x.Decision)
		cell(x.GID+" from the log", r[3], map[bool]string{true: "yes", false: "no"}[x.Logged])
		cell(x.GID+" resolution error", r[4], cmp.Or(x.Error, "—"))
	}
	shot := filepath.Join(t.ArtifactDir(), "report-2pc-crash.png")
	browse(t, bin, "--window-size=1300,2600", "--screenshot="+shot, "file://"+filepath.Join(res.RunDir, "report.html"))
	t.Logf("screenshot of a crashed coordinator's report: %s", shot)
}

// tableRows reads the table with the id from a DOM: each row's cells (th or td) as text.
func tableRows(t *testing.T, dom, id string) [][]string {
	t.Helper()
	tb := regexp.MustCompile(`(?s)<table id="` + regexp.QuoteMeta(id) + `">(.*?)</table>`).FindStringSubmatch(dom)
	if tb == nil {
		t.Errorf("no table %s on the page", id)
		return nil
	}
	var rows [][]string
	for _, tr := range regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`).FindAllStringSubmatch(tb[1], -1) {
		var cells []string
		for _, td := range cellRE.FindAllStringSubmatch(tr[1], -1) {
			cells = append(cells, html.UnescapeString(tagRE.ReplaceAllString(td[1], "")))
		}
		rows = append(rows, cells)
	}
	return rows
}

var (
	cellRE = regexp.MustCompile(`(?s)<t[hd][^>]*>(.*?)</t[hd]>`)
	tagRE  = regexp.MustCompile(`<[^>]*>`)
	// numRE is a figure: a number not part of a word ("p99" names one).
	numRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9.])(-?[0-9]+(?:\.([0-9]+))?)`)
)

// shows checks that text shows the values, in order, each to the precision printed: a
// figure written with d decimals is within half a unit of its last digit.
func shows(t *testing.T, what, text string, want ...float64) {
	t.Helper()
	nums := numRE.FindAllStringSubmatch(text, -1)
	if len(nums) != len(want) {
		t.Errorf("%s: %q on the page, want the %d figures %v", what, text, len(want), want)
		return
	}
	for i, m := range nums {
		got, _ := strconv.ParseFloat(m[1], 64)
		if tol := 0.5*math.Pow(10, -float64(len(m[2]))) + 1e-9; math.Abs(got-want[i]) > tol {
			t.Errorf("%s: %s on the page, %v in results.json", what, m[1], want[i])
		}
	}
}
