package report_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/workloads"
)

// leaderHistory writes a run directory's history of one worker and three nodes' role
// reports over 6 s: n1 leads until it is down at 1 s, n2 leads from 2.5 s, n1 answers
// again at 4 s still reporting primary until 4.5 s, and n2 leads to the end. It
// returns the history's ops.
func leaderHistory(t *testing.T, dir string) []histories.Op {
	t.Helper()
	s := int64(time.Second)
	var ops []histories.Op
	roles := []struct {
		at         int64
		node, role string
	}{
		{0, "n1", results.RolePrimary}, {0, "n2", results.RoleReplica}, {0, "n3", results.RoleReplica},
		{s, "n1", results.RoleDown}, {25 * s / 10, "n2", results.RolePrimary},
		{4 * s, "n1", results.RolePrimary}, {45 * s / 10, "n1", results.RoleReplica},
	}
	next := 0
	for i := 0; i <= 60; i++ {
		at := int64(i) * s / 10
		for ; next < len(roles) && roles[next].at <= at; next++ {
			ops = append(ops, histories.Op{Time: roles[next].at, Process: histories.Nemesis, Type: histories.Info, F: results.RoleEvent,
				Value: histories.Value(rundir.RoleReport{Node: roles[next].node, Role: roles[next].role})})
		}
		id := fmt.Sprintf("0-%d", i)
		ops = append(ops,
			histories.Op{Time: at, Process: 0, Type: histories.Invoke, F: "decrement", OpID: id},
			histories.Op{Time: at + 1000, Process: 0, Type: histories.OK, F: "decrement", OpID: id, Value: histories.Value(map[string]any{"applied": true})})
	}
	if err := rundir.WriteHistory(dir, histories.Header{Workload: "budget", Model: "budget", Store: "etcd"}, ops); err != nil {
		t.Fatal(err)
	}
	return ops
}

// The leader over time on report.html, in a real browser: the strip's segments in
// order, each laid out as wide as its span lasted (the widths the page measured), the
// table of spans with the nodes not answering, and the figures; and on the console.
func TestReportOfLeadersInBrowser(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	ops := leaderHistory(t, dir)
	res := &results.Results{SchemaVersion: results.SchemaVersion, Verdict: checker.Valid, Workload: workloads.Budget, Store: "etcd", RunDir: dir,
		Faults: results.FaultCounts{Schedule: []string{"kill@1s-4s"}}}
	res.Partitions, res.SplitBrain = results.PartitionTimeline(ops, nil)
	res.Leaders = judge.LeaderTimeline(ops)
	if l := res.Leaders; l == nil || l.NoLeaderS != 1.5 || l.SplitBrainS != 0.5 || l.Changes != 1 || len(l.Timeline) != 5 {
		t.Fatalf("leaders %+v", l)
	}
	page := filepath.Join(dir, "report.html")
	if err := report.WriteHTML(page, res); err != nil {
		t.Fatal(err)
	}
	dom, _ := load(t, bin, page)
	strip := regexp.MustCompile(`<div id="leader-strip" data-spans="([^"]*)"[^>]*data-widths="([^"]*)"`).FindStringSubmatch(dom)
	if strip == nil {
		t.Fatalf("no leader strip drawn on the page")
	}
	if want := "n1|none|n2|n1 and n2|n2"; strip[1] != want {
		t.Errorf("the strip's segments are %q, want %q", strip[1], want)
	}
	var widths []float64
	for _, w := range strings.Fields(strip[2]) {
		f, err := strconv.ParseFloat(w, 64)
		if err != nil {
			t.Fatalf("width %q: %v", w, err)
		}
		widths = append(widths, f)
	}
	// Spans of 1, 1.5, 1.5, 0.5 and 1.5 s: the second as wide as the third, three times
	// the fourth, one and a half times the first (to a pixel's rounding).
	if len(widths) != 5 || widths[3] < 10 {
		t.Fatalf("laid-out widths %v", widths)
	}
	near := func(a, b float64) bool { return a-b <= 2 && b-a <= 2 }
	if !near(widths[1], widths[2]) || !near(widths[1], 3*widths[3]) || !near(2*widths[1], 3*widths[0]) || !near(widths[4], widths[1]) {
		t.Errorf("laid-out widths %v are not in proportion to the spans' 1, 1.5, 1.5, 0.5, 1.5 s", widths)
	}
	if !strings.Contains(dom, `<table id="leaders">`) || !strings.Contains(dom, "<td>n1 and n2 (split brain)</td>") ||
		!strings.Contains(dom, "<td>1.00 s</td><td>2.50 s</td><td>1.50 s</td><td>none</td><td>n1</td>") {
		t.Errorf("the leaders table does not list the spans with the node not answering")
	}
	if !strings.Contains(dom, "1.50 s with no node reporting itself leader, 0.50 s with two or more") {
		t.Errorf("the figures are not on the page")
	}
	var text bytes.Buffer
	report.WriteSummary(&text, res)
	if !strings.Contains(text.String(), "1 change, 1.50s without a leader, 0.50s with two or more (n1 0.00-1.00s, none 1.00-2.50s (n1 down)") {
		t.Errorf("the console does not say the leader timeline:\n%s", text.String())
	}
}
