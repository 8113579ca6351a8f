package report

import (
	"bufio"
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/atomicfile"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// echartsJS is Apache ECharts 5.6.0 (assets/README): embedded in every page so that a
// report opens offline. The charts' options are built in echarts.go.
//
//go:embed assets/echarts.min.js
var echartsJS string

// TimelineLimit is how many operations the timeline draws at most; the operations the
// verdict names are drawn whatever their number. Charts over time cover every operation.
const TimelineLimit = 20000

// span is one logical operation of the history: its worker, when it was invoked and
// completed (seconds since the run started) and how it ended.
type span struct {
	worker     int
	opID       string
	from, to   float64
	completion histories.Type
	index      int64 // history index of the invocation
}

// window is a fault window; mark is one fault the proxy fired, on a worker when its
// connection could be told.
type window struct {
	fault    string
	from, to float64
}

type mark struct {
	t      float64
	kind   string
	worker int
}

// runData is what the charts need from a run directory beside results.json.
type runData struct {
	spans   []span
	windows []window
	marks   []mark
	end     float64
	// procs is results.json's process-fault timeline.
	procs []results.ProcessFault
	// parts are results.json's partitions between nodes, splits its split-brain
	// windows.
	parts  []results.Partition
	splits []results.SplitBrain
	// finals are the history's final reads that completed: op id and value, what a
	// verdict reads the final state from when results.json holds none.
	finals [][2]string
	// appends tallies a list-append history's acknowledged appends and reads.
	appends appendTally
}

// WriteHTML writes report.html for one run, whole or not at all (atomicfile): on error
// the file at path is as it was. It reads history.jsonl and faults.jsonl from the
// directory it writes into, when they are there, for the charts and the timeline.
func WriteHTML(path string, r *results.Results) error {
	data, err := loadRunData(filepath.Dir(path))
	if err != nil {
		return err
	}
	b, err := renderReport(r, data, filepath.Dir(path))
	if err != nil {
		return err
	}
	return atomicfile.Replace(path, b, 0o644)
}

// workerOf reads the worker from an op id ("3-41": worker 3): a worker keeps its number
// when its process id changes after an unknown outcome.
func workerOf(opID string, process int) int {
	if w, _, ok := strings.Cut(opID, "-"); ok {
		if n, err := strconv.Atoi(w); err == nil {
			return n
		}
	}
	return process
}

// loadRunData streams the history: a run of a million operations keeps only its spans.
func loadRunData(dir string) (runData, error) {
	var d runData
	f, err := os.Open(filepath.Join(dir, "history.jsonl"))
	if errors.Is(err, fs.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return d, fmt.Errorf("report: %v", err)
	}
	defer f.Close()
	hr, err := histories.NewReader(bufio.NewReaderSize(f, 1<<20), f.Name())
	if err != nil {
		return d, fmt.Errorf("report: %v", err)
	}
	hr.Partial = true
	next := func() (histories.Op, bool, error) {
		op, err := hr.Next()
		if err == io.EOF {
			return op, false, nil
		}
		return op, err == nil, err
	}
	var pairs histories.Pairer[int]    // an open operation's index in d.spans
	finalInvoked := map[string]int64{} // a final read's invocation time, by op id
	// invs are the invocations of d.spans, without their values: the attempts fault
	// events join (evidence.SpansOf) are made of them and their completions.
	var invs []histories.Op
	var attempts []evidence.Span
	addAttempts := func(o histories.Operation) {
		spans, second := evidence.SpansOf(o)
		for _, s := range append(spans, second...) {
			if s.OpID != "" && s.Conn != "" {
				attempts = append(attempts, s)
			}
		}
	}
	for {
		op, ok, err := next()
		if err != nil {
			return d, fmt.Errorf("report: %v", err)
		}
		if !ok {
			break
		}
		t := float64(op.Time) / 1e9
		if t > d.end {
			d.end = t
		}
		if op.IsFinalRead() {
			if op.Type == histories.Invoke {
				finalInvoked[op.OpID] = op.Time
			} else if t, ok := finalInvoked[op.OpID]; ok {
				d.appends.add(t, op)
				if op.Type == histories.OK && len(d.finals) < maxFinalReads {
					d.finals = append(d.finals, [2]string{op.OpID, string(op.Value)})
				}
			}
		}
		if !op.IsClient() || histories.IsFinalReadID(op.OpID) {
			continue
		}
		if op.Type == histories.Invoke {
			w := workerOf(op.OpID, op.Process)
			if err := pairs.Invoke(op, len(d.spans)); err != nil {
				return d, fmt.Errorf("report: %v", err)
			}
			d.spans = append(d.spans, span{worker: w, opID: op.OpID, from: t, to: -1, index: op.Index})
			invs = append(invs, histories.Op{Index: op.Index, Time: op.Time, Process: op.Process, Type: op.Type, OpID: op.OpID, Conn: op.Conn})
			continue
		}
		i, err := pairs.Complete(op)
		if err != nil {
			return d, fmt.Errorf("report: %v", err)
		}
		d.spans[i].to, d.spans[i].completion = t, op.Type
		d.appends.add(invs[i].Time, op)
		comp := op
		addAttempts(histories.Operation{Invoke: invs[i], Complete: &comp})
	}
	for _, i := range pairs.Open() {
		d.spans[i].to, d.spans[i].completion = d.end, histories.Info
		addAttempts(histories.Operation{Invoke: invs[i]})
	}
	d.end = float64(int64(d.end*100)+1) / 100
	if err := d.loadFaults(filepath.Join(dir, rundir.FaultsFile), evidence.NewAttempts(attempts)); err != nil {
		return d, err
	}
	return d, nil
}

// loadFaults reads the proxy's fault windows and events. An event's worker is the one
// whose attempt it hit, by the evidence's one rule (evidence.Attempts.Hit): the attempt
// on its connection whose span holds its time; -1 when none did. A torn last line (an
// interrupted run) ends what is read.
func (d *runData) loadFaults(path string, attempts evidence.Attempts) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("report: %v", err)
	}
	defer f.Close()
	lines, _ := rundir.ReadFaults(f, path) // a bad line ends what is read
	opened := map[string]float64{}
	for _, l := range lines {
		t := float64(l.RunTime()) / 1e9
		switch {
		case l.Window != nil && l.Window.Window == "start":
			opened[l.Window.Fault] = t
		case l.Window != nil:
			d.windows = append(d.windows, window{l.Window.Fault, opened[l.Window.Fault], t})
			delete(opened, l.Window.Fault)
		case l.Event != nil && l.Event.RunTime != nil:
			w := -1
			e := evidence.EventOfLine(l.Event, *l.Event.RunTime)
			if s, ok := attempts.Hit(e); ok {
				w = workerOf(s.OpID, s.Process)
			}
			d.marks = append(d.marks, mark{t, e.Kind, w})
		}
	}
	for fault, from := range opened {
		d.windows = append(d.windows, window{fault, from, d.end})
	}
	sort.Slice(d.windows, func(i, j int) bool { return d.windows[i].from < d.windows[j].from })
	return nil
}

// named returns the op ids the verdict names, in the order they are named: those of
// the listed anomalies' events, then the operations the ground truth proves applied
// more than once, then those committed by a cut and retried.
func named(r *results.Results, d runData) (map[string]bool, []string) {
	set := map[string]bool{}
	var order []string
	add := func(id string) {
		if !set[id] {
			set[id] = true
			order = append(order, id)
		}
	}
	byIndex := map[int64]string{}
	for _, s := range d.spans {
		byIndex[s.index] = s.opID
	}
	for _, a := range r.Anomalies {
		for _, i := range a.Ops {
			if id, ok := byIndex[i]; ok {
				add(id)
			}
		}
	}
	if e := r.Evidence; e != nil {
		for _, l := range [][]results.AmbiguousOp{e.AppliedTwice, e.CommittedTwice} {
			for _, a := range l {
				add(a.OpID)
			}
		}
	}
	return set, order
}

// overTime holds series over the run in bins of bin seconds: a second, or less for a
// short run so that a run of one second still has a curve of 20 points. Rates are per
// second.
type overTime struct {
	bin            float64
	secs           []int
	ok, fail, info []int
	p50, p99, pmax []float64
}

// at returns the middle of bin k in seconds.
func (o overTime) at(k int) float64 { return round2((float64(k) + 0.5) * o.bin) }

// rate turns a bin's count into a rate per second.
func (o overTime) rate(n int) float64 { return round2(float64(n) / o.bin) }

func perSecond(d runData) overTime {
	var o overTime
	o.bin = 1
	for _, b := range []float64{1, 0.5, 0.25, 0.1, 0.05, 0.025, 0.01} {
		o.bin = b
		if d.end/b >= 20 {
			break
		}
	}
	o.bin = widerBin(o.bin, d.end)
	n := int(d.end/o.bin) + 1
	lat := make([][]float64, n)
	o.secs = make([]int, n)
	o.ok, o.fail, o.info = make([]int, n), make([]int, n), make([]int, n)
	for i := range o.secs {
		o.secs[i] = i
	}
	for _, s := range d.spans {
		sec := int(s.to / o.bin)
		if sec < 0 || sec >= n {
			continue
		}
		switch s.completion {
		case histories.OK:
			o.ok[sec]++
		case histories.Fail:
			o.fail[sec]++
		default:
			o.info[sec]++
		}
		lat[sec] = append(lat[sec], (s.to-s.from)*1000)
	}
	o.p50, o.p99, o.pmax = make([]float64, n), make([]float64, n), make([]float64, n)
	for i, l := range lat {
		if len(l) == 0 {
			continue
		}
		sort.Float64s(l)
		q := func(p float64) float64 { return round2(l[min(len(l)-1, int(p*float64(len(l))))]) }
		o.p50[i], o.p99[i], o.pmax[i] = q(0.5), q(0.99), round2(l[len(l)-1])
	}
	return o
}

func round2(v float64) float64 { return float64(int64(v*100+0.5)) / 100 }

var outcomeColor = map[histories.Type]string{histories.OK: "#2e7d32", histories.Fail: "#c62828", histories.Info: "#ef8f00"}

const namedColor = "#6a1b9a"

// Shades of the fault windows: the proxy's in orange, the process faults' (the server
// down or paused) in blue-grey, so that the two read apart where both are scheduled.
const (
	proxyWindowColor   = "rgba(255,152,0,0.12)"
	processWindowColor = "rgba(55,71,79,0.22)"
	// A partition between nodes in blue, and a split brain (two nodes reporting
	// primary) in red over it: neither is a fault of the proxy's or of a process.
	partitionWindowColor  = "rgba(21,101,192,0.16)"
	splitBrainWindowColor = "rgba(198,40,40,0.18)"
)

// windowAreas shades the fault windows on a chart whose x axis is seconds: the proxy's,
// then the process faults' from the start of each to the server answering again.
func windowAreas(d runData) *markArea {
	var a markArea
	shade := func(name string, from, to float64, color string) {
		a.Data = append(a.Data, [2]areaCorner{
			{Name: name, Coord: [2]any{from, "min"}, ItemStyle: &itemStyle{Color: color}},
			{Coord: [2]any{to, "max"}},
		})
	}
	for _, w := range d.windows {
		shade(w.fault, w.from, w.to, proxyWindowColor)
	}
	for _, f := range d.procs {
		shade(fmt.Sprintf("%s: server %s", f.Fault, f.Verb()), f.StartS, f.EndS, processWindowColor)
	}
	for _, p := range d.parts {
		shade(fmt.Sprintf("%s: nodes partitioned", p.Fault), p.StartS, p.EndS, partitionWindowColor)
	}
	for _, sb := range d.splits {
		shade(fmt.Sprintf("split brain: %s each primary", strings.Join(sb.Primaries, ", ")), sb.StartS, sb.EndS, splitBrainWindowColor)
	}
	return &a
}

// reconnectGaps returns, per process fault and worker, the gap from the fault's start to
// the worker's first operation acknowledged after the server answered again: how long
// that worker could not get work done. A worker with no acknowledgement after the fault
// has none.
func reconnectGaps(d runData) []gap {
	var out []gap
	for _, f := range d.procs {
		first := map[int]float64{}
		for _, s := range d.spans {
			if s.completion != histories.OK || s.to < f.EndS {
				continue
			}
			if t, ok := first[s.worker]; !ok || s.to < t {
				first[s.worker] = s.to
			}
		}
		for _, w := range sortedKeysOf(first) {
			out = append(out, gap{fault: f.Fault, worker: w, from: f.StartS, to: first[w]})
		}
	}
	return out
}

// gap is one worker's reconnect gap after a process fault.
type gap struct {
	fault    string
	worker   int
	from, to float64
}

// secondsChart is a line chart over the run's seconds with its legend below, the frame
// the rate and latency charts share so that they line up one above the other.
func secondsChart(d runData, id string, t title, y axis) chart {
	o := newOption(t, bounded("s", 0, d.end), y)
	o.Tooltip = tooltip{Show: true, Trigger: "axis"}
	o.Legend = legend{Show: true, Top: "bottom"}
	return chart{id: id, height: "300px", option: o}
}

// rateChart is completions per second by outcome, with the fault windows shaded and the
// faults the proxy fired per second on a second axis.
func rateChart(d runData, o overTime) chart {
	c := secondsChart(d, "chart_rate", title{Text: "Operations completed per second", Subtext: "shaded: the proxy's fault windows (orange), the server down or paused by a process fault (grey), nodes partitioned (blue), split brain (red); faults fired per second on the right axis"},
		axis{Type: "value", Name: "ops/s"})
	c.option.YAxis = append(c.option.YAxis, axis{Type: "value", Name: "faults/s", Position: "right"})
	for i, s := range []struct {
		name   string
		counts []int
		t      histories.Type
	}{{"ok", o.ok, histories.OK}, {"fail", o.fail, histories.Fail}, {"info", o.info, histories.Info}} {
		pts := make([]datum, len(o.secs))
		for k := range o.secs {
			pts[k] = xy(o.at(k), o.rate(s.counts[k]))
		}
		l := line(s.name, pts)
		l.LineStyle, l.ItemStyle = &lineStyle{Color: outcomeColor[s.t]}, &itemStyle{Color: outcomeColor[s.t]}
		if i == 0 {
			l.MarkArea = windowAreas(d)
		}
		c.option.Series = append(c.option.Series, l)
	}
	byKind := map[string][]int{}
	for _, m := range d.marks {
		if byKind[m.kind] == nil {
			byKind[m.kind] = make([]int, len(o.secs))
		}
		if s := int(m.t / o.bin); s >= 0 && s < len(o.secs) {
			byKind[m.kind][s]++
		}
	}
	for _, k := range sortedKeysOf(byKind) {
		pts := make([]datum, len(o.secs))
		for s, v := range byKind[k] {
			pts[s] = xy(o.at(s), o.rate(v))
		}
		l := line(k, pts)
		l.YAxisIndex, l.Step, l.LineStyle = 1, "middle", &lineStyle{Type: "dashed"}
		c.option.Series = append(c.option.Series, l)
	}
	return c
}

func latencyChart(d runData, o overTime) chart {
	c := secondsChart(d, "chart_latency", title{Text: "Latency by time of completion (ms, retries included)", Subtext: "shaded: the proxy's fault windows (orange), process faults (grey), partitions (blue), split brain (red)"},
		axis{Type: "log", Name: "ms"})
	for i, s := range []struct {
		name string
		v    []float64
	}{{"p50", o.p50}, {"p99", o.p99}, {"max", o.pmax}} {
		var pts []datum
		for k, v := range s.v {
			if v > 0 {
				pts = append(pts, xy(o.at(k), v))
			}
		}
		l := line(s.name, pts)
		if i == 0 {
			l.MarkArea = windowAreas(d)
		}
		c.option.Series = append(c.option.Series, l)
	}
	return c
}

// timelineChart draws each operation as a segment on its worker's row, from invocation
// to completion, coloured by outcome; the operations the verdict names are drawn thick
// on top, and the proxy's cuts and drops are marked where they hit.
func timelineChart(d runData, namedOps map[string]bool) (chart, int, int) {
	workers := 0
	for _, s := range d.spans {
		workers = max(workers, s.worker+1)
	}
	y := bounded("worker", -1, float64(workers))
	y.Inverse = true
	o := newOption(title{Text: "Operations per worker", Subtext: timelineSubtitle(d)}, bounded("s", 0, d.end), y)
	o.Tooltip = tooltip{Show: true, Trigger: "item"}
	o.Legend = legend{Show: true, Top: "top", Right: "2%"}
	o.DataZoom = []dataZoom{{Type: "inside", XAxisIndex: []int{0}}, {Type: "slider", XAxisIndex: []int{0}}}
	o.Grid = []grid{{Top: "70", Bottom: "80"}}
	// segments is a line series of segments, each two points and a break.
	segments := func(name string, pts []datum, color string, width float64) series {
		l := line(name, pts)
		l.ConnectNulls, l.ShowSymbol = explicit(false), explicit(false)
		l.LineStyle, l.ItemStyle = &lineStyle{Color: color, Width: width}, &itemStyle{Color: color}
		return l
	}
	segment := func(name string, from, to, y float64) []datum {
		return []datum{{Name: name, Value: []float64{from, y}}, {Name: name, Value: []float64{to, y}}, lineBreak}
	}
	seg := map[histories.Type][]datum{}
	var hl []datum
	drawn, highlighted := 0, 0
	for _, s := range d.spans {
		isNamed := namedOps[s.opID]
		if drawn >= TimelineLimit && !isNamed {
			continue
		}
		pts := segment(s.opID, s.from, s.to, float64(s.worker))
		seg[s.completion] = append(seg[s.completion], pts...)
		drawn++
		if isNamed {
			hl = append(hl, pts...)
			highlighted++
		}
	}
	for _, t := range []histories.Type{histories.OK, histories.Fail, histories.Info} {
		o.Series = append(o.Series, segments(t.String(), seg[t], outcomeColor[t], 4))
	}
	named := segments("named by the verdict", hl, namedColor, 9)
	named.LineStyle.Opacity = opacity(0.75)
	o.Series = append(o.Series, named)
	if gaps := reconnectGaps(d); len(gaps) > 0 {
		var pts []datum
		for _, g := range gaps {
			pts = append(pts, segment(fmt.Sprintf("%s: worker %d back after %.2fs", g.fault, g.worker, g.to-g.from), g.from, g.to, float64(g.worker))...)
		}
		l := segments("reconnect gap", pts, "#37474f", 2)
		l.LineStyle.Type, l.MarkArea = "dashed", windowAreas(runData{procs: d.procs, parts: d.parts, splits: d.splits})
		o.Series = append(o.Series, l)
	}
	byKind := map[string][]datum{}
	for _, m := range d.marks {
		if m.worker < 0 {
			continue
		}
		byKind[m.kind] = append(byKind[m.kind], xy(m.t, float64(m.worker)))
	}
	symbols := map[string]string{"commit-cut": "triangle", "commit-drop": "diamond"}
	for _, k := range sortedKeysOf(byKind) {
		l := line(k, byKind[k])
		l.Symbol, l.SymbolSize, l.ShowSymbol = cmp.Or(symbols[k], "pin"), 10, explicit(true)
		// Markers only: no line between them.
		l.LineStyle, l.ItemStyle = &lineStyle{Opacity: opacity(0)}, &itemStyle{Color: "#000"}
		o.Series = append(o.Series, l)
	}
	return chart{id: "chart_timeline", height: fmt.Sprintf("%dpx", min(900, 160+workers*18)), option: o}, drawn, highlighted
}

// timelineSubtitle says what the timeline draws; the reconnect gaps only when there
// were process faults.
func timelineSubtitle(d runData) string {
	s := "invocation to completion, by outcome; thick: named by the verdict; markers: faults the proxy fired"
	if len(d.procs) > 0 {
		s += "; grey: server down or paused; dashed: reconnect gap (fault to the worker's first ack after)"
	}
	return s
}

func sortedKeysOf[K cmp.Ordered, V any](m map[K]V) []K {
	return slices.Sorted(maps.Keys(m))
}

// Escaping. Every string report.html and summary.html show comes from a run directory
// (op ids, keys, fault names and kinds, statements, tags, errors, the store, mechanism,
// workload and server, the checker's explanations and the ground truth's sentences), and
// a run directory is a file anyone can edit: none of it may become markup or code. So:
//
//   - text and attributes go through html/template's contextual escaping, and nothing
//     from a run directory is ever converted to template.HTML, template.JS or
//     template.URL (only the embedded ECharts and the charts' JSON, echarts.go, are);
//   - a chart's options are JSON written by encoding/json with its HTML escaping on: <,
//     > and & inside strings become \u003c, \u003e and \u0026, and U+2028 and U+2029
//     \u2028 and \u2029, so neither "</script" nor "<!--" can occur inside the script
//     element, and the script parses as the JSON it was given whatever a string holds;
//   - the options are plain data (echarts.go): no string in them is ever turned into
//     code (go-echarts, used before, turned one holding its "__f__" marker into a
//     function and wrote its JSON unescaped);
//   - what ECharts shows on the canvas (titles, legends, axis labels, mark areas) is
//     drawn, not parsed, and its tooltips escape names and values as HTML themselves.
//
// cmd/indoubt's TestHostileRunDirectoryInBrowser holds this in a real browser with every
// string field of a run directory carrying a script.

// finalRows shows the final state as a table: its JSON's fields, in order.
func finalRows(r *results.Results) [][2]string {
	if r.Final == nil {
		return nil
	}
	b, err := json.Marshal(r.Final)
	if err != nil {
		return [][2]string{{"error", err.Error()}}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var rows [][2]string
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return [][2]string{{"final", string(b)}}
	}
	for dec.More() {
		k, _ := dec.Token()
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			break
		}
		rows = append(rows, [2]string{fmt.Sprint(k), strings.Trim(string(v), `"`)})
	}
	return rows
}

// pageData is what report.html's template shows.
type pageData struct {
	R               *results.Results
	Subject         string
	ListAll         string
	Headline        string
	FinalReads      [][2]string
	Kinds           [][2]string
	Files           [][2]string
	Cycles          []cycleView
	IsolationNotes  []string
	Grouped         string
	Charts          []template.HTML
	Drawn, Total    int
	Highlighted     int
	Named           []string
	Final           [][2]string
	Porcupine       bool
	ShownFirst      []results.AmbiguousOp
	Folded          []results.AmbiguousOp
	CommittedShown  []results.AmbiguousOp
	CommittedFolded []results.AmbiguousOp
	ReplaysShown    []results.AmbiguousOp
	ReplaysFolded   []results.AmbiguousOp
	Anomalies       []anomalyView
	AnomaliesShown  []anomalyView
	AnomaliesFolded []anomalyView
	JS              template.JS
	WindowsDesc     []string
	Leaders         *leaderView
	Lost            []lostRow
	LostTotal       int64
}

const shownFirst = 5

// anomalyView is one of the checker's anomalies as the page shows it: with the ground
// truth's claims about the operations it names.
type anomalyView struct {
	checker.Anomaly
	Claims []string
}

func renderReport(r *results.Results, d runData, dir string) ([]byte, error) {
	d.procs = r.ProcessFaults
	d.parts, d.splits = r.Partitions, r.SplitBrain
	namedOps, order := named(r, d)
	o := perSecond(d)
	tl, drawn, hl := timelineChart(d, namedOps)
	p := pageData{
		R: r, Subject: Subject(r), ListAll: ListAllHint(r), Headline: Headline(r), Final: finalRows(r), FinalReads: d.finals, Kinds: kindRows(r),
		Files: filesIn(dir), Cycles: cycleViews(r.Txn), Drawn: drawn, Total: len(d.spans), Highlighted: hl,
		JS: template.JS(echartsJS), Leaders: leadersOf(r.Leaders),
	}
	if len(d.spans) > 0 {
		var err error
		if p.Charts, err = renderCharts(rateChart(d, o), latencyChart(d, o), tl); err != nil {
			return nil, err
		}
	}
	if r.Txn != nil {
		if pr := levelPromise(r); pr != "" {
			p.IsolationNotes = append(p.IsolationNotes, pr)
		}
		p.IsolationNotes = append(p.IsolationNotes, d.appends.sentences()...)
	}
	p.Named = order[:min(len(order), 50)]
	if _, err := os.Stat(filepath.Join(dir, "linearizability.html")); err == nil || r.Workload == "register" {
		p.Porcupine = true
	}
	for _, w := range d.windows {
		p.WindowsDesc = append(p.WindowsDesc, fmt.Sprintf("%s from %.1f s to %.1f s", w.fault, w.from, w.to))
	}
	p.Lost, p.LostTotal = lostRows(r), r.LostTotal()
	for _, a := range r.Anomalies {
		v := anomalyView{Anomaly: a}
		for _, c := range ClaimsAbout(r.Evidence, a) {
			v.Claims = append(v.Claims, c.Sentence)
		}
		p.Anomalies = append(p.Anomalies, v)
	}
	p.AnomaliesShown, p.AnomaliesFolded = p.Anomalies[:min(len(p.Anomalies), shownFirst)], p.Anomalies[min(len(p.Anomalies), shownFirst):]
	if e := r.Evidence; e != nil {
		p.Grouped = e.Grouped()
		p.ShownFirst, p.Folded = split(e.AppliedTwice, shownFirst)
		p.CommittedShown, p.CommittedFolded = split(e.CommittedTwice, shownFirst)
		p.ReplaysShown, p.ReplaysFolded = split(e.Replays, shownFirst)
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func split(l []results.AmbiguousOp, n int) ([]results.AmbiguousOp, []results.AmbiguousOp) {
	if len(l) <= n {
		return l, nil
	}
	return l[:n], l[n:]
}

// orNone shows a time in seconds that may be missing, to the millisecond.
func orNone(v *float64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%.3f s", *v)
}

// crashPoints are the points of the two-phase protocol where a crash abandons a
// transaction, in protocol order (twopc.Point's names): the crash table lists its stops
// in this order, then any other point results.json names, by name.
var crashPoints = []string{"before-prepare", "mid-prepare", "before-decision", "after-decision"}

// stopRows lists a crash's stops per protocol point: every point of the protocol, with
// its count or 0, then the points results.json names beyond them.
func stopRows(stops map[string]int64) [][2]string {
	var rows [][2]string
	for _, p := range crashPoints {
		rows = append(rows, [2]string{p, strconv.FormatInt(stops[p], 10)})
	}
	for _, p := range sortedKeysOf(stops) {
		if !slices.Contains(crashPoints, p) {
			rows = append(rows, [2]string{p, strconv.FormatInt(stops[p], 10)})
		}
	}
	return rows
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{"orNone": orNone, "stops": stopRows}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>indoubt: {{.Subject}}{{with .R.Store}} on {{.}}{{end}} — {{.R.Verdict}}</title>
<script>window.__errors=[];window.addEventListener("error",function(e){window.__errors.push(String(e.message))});</script>
<script>{{.JS}}</script>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:80em;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left;vertical-align:top}
.valid{color:#2e7d32}.invalid{color:#c62828}.unknown{color:#8a6d00}
.headline{font-size:1.25em;font-weight:600;border-left:6px solid #888;padding:.3em .8em;background:#f6f6f6}
.headline.invalid{border-color:#c62828}.headline.valid{border-color:#2e7d32}.headline.unknown{border-color:#8a6d00}
.container{margin:1em 0}.named{color:#6a1b9a;font-weight:600}
details{margin:.4em 0}summary{cursor:pointer}
code{background:#f3f3f3;padding:0 .2em}
</style></head><body>
<h1>{{.Subject}}{{with .R.Store}} on {{.}}{{end}}: <span class="{{.R.Verdict}}">{{.R.Verdict}}</span>{{if .R.Interrupted}} (interrupted){{end}}</h1>
<p class="headline {{.R.Verdict}}" id="headline">{{.Headline}}</p>
{{with .R.Models}}<table id="models"><tr><th>model</th><th>verdict</th><th>anomalies</th><th>summary</th></tr>
{{range .}}<tr><td>{{.Name}} ({{.Model}})</td><td class="{{.Verdict}}">{{.Verdict}}</td><td>{{.AnomalyCount}}</td><td>{{.Summary}}</td></tr>
{{end}}</table>{{end}}
{{range .IsolationNotes}}<p class="isolation-note">{{.}}.</p>
{{end}}{{if .R.Anomalies}}<h2>What the checker saw: {{.R.AnomalyTotal}} anomalies</h2>
<table id="anomaly-kinds"><tr><th>kind</th><th>found</th></tr>
{{range .Kinds}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table>
<ul>{{range .AnomaliesShown}}<li><b>{{.Kind}}</b>: {{.Explanation}}{{range .Claims}}<br><i>the proxy:</i> {{.}}{{end}}</li>{{end}}</ul>
{{if .AnomaliesFolded}}<details><summary>the rest of the {{len .R.Anomalies}} listed{{if gt .R.AnomalyTotal (len .R.Anomalies)}} ({{.R.AnomalyTotal}} in all){{end}}</summary><ul>{{range .AnomaliesFolded}}<li><b>{{.Kind}}</b>: {{.Explanation}}{{range .Claims}}<br><i>the proxy:</i> {{.}}{{end}}</li>{{end}}</ul></details>{{end}}{{end}}
{{with .R.Evidence}}{{if gt .AppliedTwiceTotal 0}}
<h2>Ground truth: {{.AppliedTwiceTotal}} operations took effect more than once: {{$.Grouped}}</h2>
<ul>{{range $.ShownFirst}}<li class="named">{{.Sentence}}</li>{{end}}</ul>
{{if $.Folded}}<details><summary>{{len $.Folded}} more listed{{if gt .AppliedTwiceTotal (len .AppliedTwice)}} ({{.AppliedTwiceTotal}} in all; results.json lists {{len .AppliedTwice}}: {{$.ListAll}}){{end}}</summary><ul>{{range $.Folded}}<li>{{.Sentence}}</li>{{end}}</ul></details>{{end}}
{{end}}{{if gt .ReplaysTotal 0}}
<h2>Ground truth: {{.ReplaysTotal}} operations committed by a cut and retried changed nothing the second time (replays)</h2>
<ul>{{range $.ReplaysShown}}<li>{{.Sentence}}</li>{{end}}</ul>
{{if $.ReplaysFolded}}<details><summary>{{len $.ReplaysFolded}} more listed</summary><ul>{{range $.ReplaysFolded}}<li>{{.Sentence}}</li>{{end}}</ul></details>{{end}}
{{end}}{{if gt .CommittedTwiceTotal 0}}
<h2>Ground truth: {{.CommittedTwiceTotal}} operations committed by a cut and retried, a second application possible but not proven</h2>
<ul>{{range $.CommittedShown}}<li>{{.Sentence}}</li>{{end}}</ul>
{{if $.CommittedFolded}}<details><summary>{{len $.CommittedFolded}} more listed</summary><ul>{{range $.CommittedFolded}}<li>{{.Sentence}}</li>{{end}}</ul></details>{{end}}
{{end}}{{range .Disagreements}}<p><b>Checker and ground truth disagree:</b> {{.}}</p>{{end}}{{end}}
{{with .R.Txn}}{{if .Cycles}}<h2>Dependency cycles: {{len .Cycles}}</h2>
<p>Each transaction (T and the history index of its completion) a node, each dependency an arrow: ww (wrote, then overwritten), wr (wrote, then read), rw (read, then overwritten), process or realtime order.{{if gt (len .Cycles) (len $.Cycles)}} The first {{len $.Cycles}} are drawn.{{end}}</p>
{{range $.Cycles}}<section class="cycle" id="{{.ID}}"><h3>{{.Type}}</h3>
<svg class="cycle" width="320" height="220" viewBox="0 0 320 220" role="img" aria-label="the cycle">
<defs><marker id="arrow-{{.ID}}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#a00"/></marker></defs>
{{$id := .ID}}{{range .Edges}}<path class="edge" d="{{.Path}}" fill="none" stroke="#a00" stroke-width="1.5" marker-end="url(#arrow-{{$id}})"/><text x="{{.LX}}" y="{{.LY}}" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Nodes}}<circle class="node" cx="{{.X}}" cy="{{.Y}}" r="18" fill="#fff" stroke="#333"/><text x="{{.X}}" y="{{.Y}}" dy="4" text-anchor="middle">{{.Label}}</text>
{{end}}</svg>
<ol class="steps">{{range .Steps}}<li>{{.}}</li>{{end}}</ol></section>
{{end}}{{end}}{{end}}
{{if .Named}}<p>Operations named above, highlighted on the timeline: <span id="named-ops" class="named">{{range .Named}}{{.}} {{end}}</span>{{if gt .Highlighted (len .Named)}}…{{end}}</p>{{end}}
{{if .Porcupine}}<p>Linearizability: <a href="linearizability.html">porcupine's visualization of the history</a> (beside this file).</p>{{end}}
{{with .R.TwoPhase}}<h2>Two-phase commit</h2>
<p>The coordinator's side of the run, from results.json's two_phase_commit: it explains the verdict, which the checker reached from the history alone.</p>
<table id="two-phase">
<tr><th>servers</th><td>{{.Servers}}</td></tr>
<tr><th>placement</th><td>{{.Placement}}</td></tr>
<tr><th>coordinator</th><td>{{.Coordinator}}</td></tr>
<tr><th>committed</th><td>{{.Transactions.Committed}}</td></tr>
<tr><th>aborted</th><td>{{.Transactions.Aborted}}</td></tr>
<tr><th>abandoned</th><td>{{.Transactions.Abandoned}}</td></tr>
<tr><th>committed per second</th><td>{{printf "%.1f" .CommittedPerSecond}}</td></tr>
<tr><th>latency of the committed</th><td>mean {{printf "%.2f" .LatencyMs.Mean}} ms, p99 {{printf "%.2f" .LatencyMs.P99}} ms</td></tr>
</table>
{{with .Crash}}<h3>Coordinator crash at {{printf "%.2f" .AtS}} s</h3>
<p>Transactions abandoned at each point of the protocol; then the branches left prepared (in doubt), the writers that met their rows, and how long until recovery finished them all.</p>
<table id="two-phase-crash">
{{range stops .Stops}}<tr><th>abandoned {{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}<tr><th>branches in doubt</th><td>{{len .InDoubt}}</td></tr>
<tr><th>recovery took</th><td>{{printf "%.1f" .RecoveryMs}} ms</td></tr>
<tr><th>all resolved, from the crash</th><td>{{printf "%.0f" .ResolvedMs}} ms</td></tr>
</table>
{{if .InDoubt}}<table id="in-doubt"><tr><th>transaction in doubt</th><th>server</th><th>prepared before the listing</th><th>locks in pg_locks</th></tr>
{{range .InDoubt}}<tr><td><code>{{.GID}}</code></td><td>{{.Server}}</td><td>{{printf "%.0f" .AgeMs}} ms</td><td>{{.Locks}}</td></tr>
{{end}}</table>{{end}}
{{if .Probes}}<p>Lock probes: a writer tried a row an in-doubt transaction held, over short lock_timeouts, until it got it.</p>
<table id="lock-probes"><tr><th>transaction</th><th>server</th><th>row</th><th>blocked</th><th>timeouts</th><th>row locked for</th><th>error</th></tr>
{{range .Probes}}<tr><td><code>{{.GID}}</code></td><td>{{.Server}}</td><td>{{.Row}}</td><td>{{printf "%.0f" .BlockedMs}} ms</td><td>{{.Timeouts}}</td><td>{{printf "%.0f" .LockedForMs}} ms</td><td>{{or .Error "—"}}</td></tr>
{{end}}</table>{{end}}{{end}}
{{if .Recovery}}<h3>Recovery: {{len .Recovery}} branches resolved</h3>
<p>From the log: the decision was in the coordinator's log; otherwise presumed abort, or the naive coordinator's commit of whatever it found prepared.</p>
<table id="recovery"><tr><th>transaction</th><th>server</th><th>decision</th><th>from the log</th><th>error</th></tr>
{{range .Recovery}}<tr><td><code>{{.GID}}</code></td><td>{{.Server}}</td><td>{{.Decision}}</td><td>{{if .Logged}}yes{{else}}no{{end}}</td><td>{{or .Error "—"}}</td></tr>
{{end}}</table>{{end}}{{end}}
<h2>Over time</h2>
{{if .WindowsDesc}}<p>Fault windows: {{range $i, $w := .WindowsDesc}}{{if $i}}; {{end}}{{$w}}{{end}}.</p>{{end}}
{{if .R.ProcessFaults}}<h3>Process faults</h3>
<p>Shaded grey on the charts from the fault to the server answering again. In flight: operations invoked before the fault and not completed when it was applied, by how they ended. First ack after: from the fault to the first operation acknowledged after the server answered again.</p>
<table id="process-faults"><tr><th>fault</th><th>action</th><th>pid</th><th>at</th><th>downtime</th><th>in flight</th><th>info</th><th>ok</th><th>first ack after</th><th>lost</th></tr>
{{range .R.ProcessFaults}}<tr><td><code>{{.Fault}}</code></td><td>{{.Action}}</td><td>{{.Pid}}</td><td>{{printf "%.2f" .StartS}} s</td><td>{{printf "%.2f" .DowntimeS}} s</td><td>{{.InFlight}}</td><td>{{.InFlightInfo}}</td><td>{{.InFlightOK}}</td><td>{{orNone .FirstAckS}}</td><td>{{.LostWrites}}</td></tr>{{if .Error}}<tr><td colspan="10">error: {{.Error}}</td></tr>{{end}}
{{end}}</table>{{end}}
{{if .R.Partitions}}<h3>Partitions between nodes</h3>
<p>Shaded blue on the charts while the grudge was in force; red where two or more nodes each reported themselves primary (a split brain). Receives from: who each node heard (the clients beside a node are cut with it). Heal: from the heal until one node alone reported primary.</p>
<table id="partitions"><tr><th>fault</th><th>shape</th><th>from</th><th>to</th><th>receives from</th><th>acknowledged during, by side</th><th>lost</th><th>split brain</th><th>heal</th><th>first ack after</th></tr>
{{range .R.Partitions}}<tr><td><code>{{.Fault}}</code></td><td>{{.Shape}}</td><td>{{printf "%.2f" .StartS}} s</td><td>{{printf "%.2f" .EndS}} s</td><td>{{range $n, $r := .Reach}}{{$n}}: {{range $r}}{{.}} {{end}}<br>{{end}}</td><td>{{range $n, $c := .AckedDuring}}{{$n}}: {{$c}}<br>{{end}}</td><td>{{.LostWrites}}</td><td>{{printf "%.2f" .SplitBrainS}} s</td><td>{{orNone .HealS}}</td><td>{{orNone .FirstAckS}}</td></tr>{{if .Error}}<tr><td colspan="10">error: {{.Error}}</td></tr>{{end}}
{{end}}</table>{{end}}
{{if .R.SplitBrain}}<h3>Split brain</h3>
<table id="split-brain"><tr><th>from</th><th>to</th><th>primaries</th><th>acknowledged through each (first)</th><th>writes on both sides</th></tr>
{{range $s := .R.SplitBrain}}<tr><td>{{printf "%.2f" $s.StartS}} s</td><td>{{printf "%.2f" $s.EndS}} s</td><td>{{range $s.Primaries}}{{.}} {{end}}</td><td>{{range $p, $c := $s.Acked}}{{$p}}: {{$c}} (first {{index $s.Examples $p}})<br>{{end}}</td><td>{{$s.WritesOnBoth}}</td></tr>
{{end}}</table>{{end}}
{{template "leaders" .Leaders}}
{{if .Lost}}<h3>Acknowledged writes lost: {{.LostTotal}}</h3>
<table id="lost-writes"><tr><th>operation</th><th>worker</th><th>what</th><th>acknowledged at</th><th>fault</th><th>ack to fault</th></tr>
{{range .Lost}}<tr title="{{.Explanation}}"><td class="named">{{if .OpID}}{{.OpID}}{{else}}—{{end}}</td><td>{{if ge .Worker 0}}{{.Worker}}{{else}}—{{end}}</td><td>{{.What}}</td><td>{{orNone .AckAtS}}</td><td>{{if .Fault}}<code>{{.Fault}}</code>{{else}}none{{end}}</td><td>{{if .Fault}}{{printf "%.3f" .AckBeforeFaultS}} s{{else}}—{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Charts}}{{range .Charts}}{{.}}{{end}}
<p>The timeline draws {{.Drawn}} of {{.Total}} operations{{if lt .Drawn .Total}} (the first {{.Drawn}} and every operation named above){{end}}; {{.Highlighted}} named by the verdict. Scroll or drag to zoom.</p>
{{else}}<p>No history beside this report: charts need history.jsonl.</p>{{end}}
<h2>Run</h2>
<table>
<tr><th>mechanism</th><td>{{.R.Mechanism}}</td></tr>
<tr><th>retry policy</th><td>{{.R.Retry}}</td></tr>
<tr><th>server</th><td>{{.R.Server}}{{if .R.Proxied}}, through the fault proxy{{end}}</td></tr>
<tr><th>seed</th><td>{{.R.Seed}}</td></tr>
<tr><th>workers</th><td>{{.R.Workers}}</td></tr>
<tr><th>duration</th><td>{{printf "%.2f" .R.DurationS}} s</td></tr>
<tr><th>throughput</th><td>{{printf "%.1f" .R.Throughput}} ops/s</td></tr>
<tr><th>operations</th><td>{{.R.Ops.Invoked}} invoked: {{.R.Ops.OK}} ok, {{.R.Ops.Fail}} fail, {{.R.Ops.Info}} info (unknown)</td></tr>
<tr><th>latency</th><td>p50 {{.R.LatencyMs.P50}} ms, p95 {{.R.LatencyMs.P95}} ms, p99 {{.R.LatencyMs.P99}} ms, max {{.R.LatencyMs.Max}} ms</td></tr>
<tr><th>retries</th><td>{{.R.Retries.Total}}: ok {{.R.Retries.ByOutcome.OK}}, fail {{.R.Retries.ByOutcome.Fail}}, info {{.R.Retries.ByOutcome.Info}}, deadline {{.R.Retries.ByOutcome.Deadline}}{{range $k, $v := .R.Retries.ByReason}}; {{$k}} {{$v}}{{end}}</td></tr>
<tr><th>CAS conflicts</th><td>{{.R.Conflicts}}</td></tr>
<tr><th>faults</th><td>{{range .R.Faults.Schedule}}<code>{{.}}</code> {{end}}{{range $k, $v := .R.Faults.ByKind}}{{$k}} {{$v}}; {{end}}{{with .R.Faults.Commits}}<br>commit faults: {{.}}{{else}}{{range $k, $v := .R.Faults.ByTruth}}truth {{$k}} {{$v}}; {{end}}{{end}}</td></tr>
</table>
<h2>Final state</h2>
{{if .Final}}<table id="final">{{range .Final}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>{{else if .FinalReads}}<p>The history's final reads, which the checker judged the run by:</p>
<table id="final-reads"><tr><th>operation</th><th>read</th></tr>{{range .FinalReads}}<tr><td>{{index . 0}}</td><td><code>{{index . 1}}</code></td></tr>{{end}}</table>{{else}}<p>This run has no final state: no final read in the history and none in results.json.</p>{{end}}
{{if .Files}}<p id="files">Files beside this one: {{range $i, $f := .Files}}{{if $i}}, {{end}}{{index $f 0}} ({{index $f 1}}){{end}}.</p>{{end}}
<div id="render-check" hidden></div>
<script>
(function(){
  var el=document.getElementById("render-check"), charts=[], hl=0;
  document.querySelectorAll("[_echarts_instance_]").forEach(function(d){
    var c=echarts.getInstanceByDom(d); if(!c) return;
    var o=c.getOption(); charts.push(d.id);
    if(d.id==="chart_timeline") el.setAttribute("data-timeline-series",(o.series||[]).map(function(s){return s.name}).join("|"));
    if(d.id==="chart_rate") el.setAttribute("data-rate-areas",[].concat.apply([],(o.series||[]).map(function(s){return ((s.markArea||{}).data||[]).map(function(a){return a[0].name})})).join("|"));
    (o.series||[]).forEach(function(s){ if(s.name==="named by the verdict") hl=(s.data||[]).filter(function(p){return p!=="-"&&p.value!=="-"}).length/2; });
  });
  el.setAttribute("data-charts",charts.join(" "));
  el.setAttribute("data-highlighted",String(hl));
  el.setAttribute("data-errors",window.__errors.join(" | "));
})();
</script>
</body></html>
`))
