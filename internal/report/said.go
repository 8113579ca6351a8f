package report

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// What report.html says beside the verdict: what was tested (the title), every kind of
// anomaly with its count, the final reads the verdict used, the cycles drawn, and the
// files that are there.

// Workloads of runs of a user's code: a test through indoubttest, a program through
// indoubt exec (results.json's workload).
const (
	appWorkload  = "app"
	execWorkload = "exec"
)

// Subject names what the run tested, for a title: the test (indoubttest writes
// "test NAME (indoubttest), ..." as its mechanism), the program (indoubt exec writes
// its command line), or the workload.
func Subject(r *results.Results) string {
	switch string(r.Workload) {
	case appWorkload:
		if rest, ok := strings.CutPrefix(r.Mechanism, "test "); ok {
			if name, _, ok := strings.Cut(rest, " (indoubttest)"); ok && name != "" {
				return "test " + name
			}
		}
		return "a test's code"
	case execWorkload:
		if f := strings.Fields(r.Mechanism); len(f) > 0 {
			return "program " + f[0]
		}
		return "a program"
	}
	return string(r.Workload)
}

// kindRows is every kind of anomaly with its count, most first: counts of all the
// checker found, listed in results.json or not.
func kindRows(r *results.Results) [][2]string {
	kinds := r.AnomalyKinds
	if len(kinds) == 0 {
		kinds = map[string]int{}
		for _, a := range r.Anomalies {
			kinds[a.Kind]++
		}
	}
	ks := sortedKeysOf(kinds)
	sort.SliceStable(ks, func(i, j int) bool { return kinds[ks[i]] > kinds[ks[j]] })
	rows := make([][2]string, 0, len(ks))
	for _, k := range ks {
		rows = append(rows, [2]string{k, fmt.Sprint(kinds[k])})
	}
	return rows
}

// runFiles are the files a run directory may hold, in the order the page lists them,
// each with what it holds.
var runFiles = [][2]string{
	{rundir.HistoryFile, "every operation"},
	{rundir.FaultsFile, "the proxy's events"},
	{rundir.ResultsFile, "the figures and the verdict"},
	{rundir.ConfigFile, "the run's settings"},
	{rundir.CheckFile, "how to check it again"},
	{"linearizability.html", "porcupine's visualization"},
}

// filesIn lists the files of runFiles that dir holds.
func filesIn(dir string) [][2]string {
	var out [][2]string
	for _, f := range runFiles {
		if fi, err := os.Stat(filepath.Join(dir, f[0])); err == nil && fi.Mode().IsRegular() {
			out = append(out, f)
		}
	}
	return out
}

// cycleView is one dependency cycle as report.html draws it: its transactions on a
// circle, its edges as curved arrows labelled by dependency and key, and the steps as
// a list below.
type cycleView struct {
	ID    string
	Type  string
	Nodes []cycleNode
	Edges []cycleEdge
	Steps []string
}

type cycleNode struct {
	X, Y  float64
	Label string
}

type cycleEdge struct {
	Path, Label string
	LX, LY      float64
}

// maxCyclesDrawn bounds the cycles the page draws; the rest are counted.
const maxCyclesDrawn = 20

// cycleViews lays out results.json's cycles (transactions), the first maxCyclesDrawn.
func cycleViews(t *results.TxnCheck) []cycleView {
	if t == nil {
		return nil
	}
	var out []cycleView
	for i, c := range t.Cycles[:min(len(t.Cycles), maxCyclesDrawn)] {
		out = append(out, drawTxnCycle(c, fmt.Sprintf("cycle-%d", i)))
	}
	return out
}

// drawTxnCycle places a cycle's transactions (by history index) evenly on a circle
// and each step as an arrow bent to its left, so that the two edges between the same
// pair of a two-transaction cycle stay apart.
func drawTxnCycle(c results.Cycle, id string) cycleView {
	v := cycleView{ID: id, Type: c.Type}
	var order []int64
	seen := map[int64]bool{}
	for _, s := range c.Steps {
		for _, n := range []int64{s.From, s.To} {
			if !seen[n] {
				seen[n] = true
				order = append(order, n)
			}
		}
	}
	const cx, cy, rad, node = 160.0, 110.0, 70.0, 20.0
	at := map[int64][2]float64{}
	for i, n := range order {
		a := 2*math.Pi*float64(i)/float64(len(order)) - math.Pi
		p := [2]float64{cx + rad*math.Cos(a), cy + rad*math.Sin(a)}
		at[n] = p
		v.Nodes = append(v.Nodes, cycleNode{p[0], p[1], fmt.Sprintf("T%d", n)})
	}
	toward := func(from, to [2]float64, d float64) (float64, float64) {
		l := math.Hypot(to[0]-from[0], to[1]-from[1])
		if l == 0 {
			return from[0], from[1]
		}
		return from[0] + (to[0]-from[0])/l*d, from[1] + (to[1]-from[1])/l*d
	}
	for _, s := range c.Steps {
		a, b := at[s.From], at[s.To]
		dx, dy := b[0]-a[0], b[1]-a[1]
		l := math.Max(math.Hypot(dx, dy), 1)
		q := [2]float64{(a[0]+b[0])/2 - dy/l*35, (a[1]+b[1])/2 + dx/l*35}
		sx, sy := toward(a, q, node)
		ex, ey := toward(b, q, node)
		label := s.Type
		if s.Key != "" {
			label += " " + s.Key
		}
		v.Edges = append(v.Edges, cycleEdge{fmt.Sprintf("M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f", sx, sy, q[0], q[1], ex, ey), label, q[0], q[1]})
		v.Steps = append(v.Steps, stepText(s))
	}
	return v
}

// stepText says one edge of a cycle in words; a version the checker did not give is
// left out.
func stepText(s results.CycleStep) string {
	ver := func(v string) string {
		if v == "" {
			return ""
		}
		return " " + v
	}
	var why string
	switch s.Type {
	case "ww":
		why = fmt.Sprintf("wrote %s%s, then T%d wrote it%s", s.Key, ver(s.Value), s.To, ver(s.Value2))
	case "wr":
		why = fmt.Sprintf("wrote %s%s, which T%d read", s.Key, ver(s.Value), s.To)
	case "rw":
		why = fmt.Sprintf("read %s%s, which T%d then wrote%s", s.Key, ver(s.Value), s.To, ver(s.Value2))
	case "process":
		why = fmt.Sprintf("ran before T%d in the same process", s.To)
	case "realtime":
		why = fmt.Sprintf("completed before T%d was invoked", s.To)
	default:
		why = fmt.Sprintf("precedes T%d", s.To)
	}
	return fmt.Sprintf("T%d %s (%s)", s.From, why, s.Type)
}

// maxFinalReads bounds the final reads the page lists.
const maxFinalReads = 50

// ListAllHint says how to list every anomaly and ground-truth item of r's run beyond
// those results.json lists: indoubt check's --max-anomalies, on its run directory.
func ListAllHint(r *results.Results) string {
	dir := r.RunDir
	switch {
	case dir == "":
		dir = "RUNDIR"
	case strings.ContainsAny(dir, " \t'\"$\\`"):
		dir = strconv.Quote(dir)
	}
	return "indoubt check --max-anomalies -1 " + dir + " lists them all"
}
