package report

import (
	"bytes"
	"fmt"
	"html/template"
	"path/filepath"
	"sort"

	"github.com/indoubt/indoubt/internal/atomicfile"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// summaryRow is one run in summary.html.
type summaryRow struct {
	Row
	Workload workloads.Name
	Workers  int
	Retry    string
	Faults   string
	Link     string
	P99      float64
	RPS      string
}

type summaryPage struct {
	Rows   []summaryRow
	Charts []template.HTML
	JS     template.JS
}

// WriteSummaryHTML writes summary.html for several runs: the stand's table, a bar chart
// of throughput per store, and for counter runs at several worker counts the contention
// sweep's curves (tx/s, p99 latency, retries per success against workers). The file is
// written whole or not at all (atomicfile).
func WriteSummaryHTML(path string, runs []*results.Results) error {
	p := summaryPage{JS: template.JS(echartsJS)}
	base := filepath.Dir(path)
	for _, r := range runs {
		row := summaryRow{Row: RowOf(r), Workload: r.Workload, Workers: r.Workers, Retry: r.Retry, P99: r.LatencyMs.P99, RPS: "-"}
		for i, f := range r.Faults.Schedule {
			if i > 0 {
				row.Faults += " "
			}
			row.Faults += f
		}
		if v, ok := r.Outcomes.RetriesPerSuccess(); ok {
			row.RPS = fmt.Sprintf("%.2f", v)
		}
		if r.RunDir != "" {
			if rel, err := filepath.Rel(base, filepath.Join(r.RunDir, "report.html")); err == nil {
				row.Link = filepath.ToSlash(rel)
			}
		}
		p.Rows = append(p.Rows, row)
	}
	cs := []chart{storeBars(runs)}
	if sweep := sweepRuns(runs); len(sweep) > 1 {
		cs = append(cs, sweepCharts(sweep)...)
	}
	var err error
	if p.Charts, err = renderCharts(cs...); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := summaryTpl.Execute(&buf, p); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes(), 0o644)
}

// storeBars is the stand's chart: one bar per run, labelled by store (and workers and
// retry when the runs differ in them), of committed operations per second.
func storeBars(runs []*results.Results) chart {
	o := newOption(title{Text: "Throughput per run", Subtext: "completed operations per second; colour: verdict"}, axis{}, axis{Type: "value", Name: "ops/s"})
	o.Tooltip = tooltip{Show: true}
	bars := series{Name: "ops/s", Type: "bar"}
	colors := map[string]string{"valid": "#2e7d32", "invalid": "#c62828", "unknown": "#8a6d00"}
	for _, r := range runs {
		label := r.Store
		if len(runs) > 1 {
			label = fmt.Sprintf("%s %s w%d %s", r.Store, r.Workload, r.Workers, r.Retry)
		}
		o.XAxis[0].Data = append(o.XAxis[0].Data, label)
		bars.Data = append(bars.Data, datum{Value: round2(r.Throughput), ItemStyle: &itemStyle{Color: colors[r.Verdict.String()]}})
	}
	o.Series = []series{bars}
	return chart{id: "chart_stores", height: "320px", option: o}
}

// sweepRuns returns the counter runs of one store and mechanism, by workers, when the
// runs hold a contention sweep.
func sweepRuns(runs []*results.Results) []*results.Results {
	var out []*results.Results
	for _, r := range runs {
		if r.Workload == workloads.Counter && r.Store == runs[0].Store && r.Mechanism == runs[0].Mechanism {
			out = append(out, r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Workers < out[j].Workers })
	return out
}

func sweepCharts(sweep []*results.Results) []chart {
	mk := func(id, text, unit string, get func(*results.Results) (float64, bool)) chart {
		o := newOption(title{Text: text, Subtext: fmt.Sprintf("%s on %s, %s", sweep[0].Workload, sweep[0].Store, sweep[0].Mechanism)},
			axis{Type: "value", Name: "workers"}, axis{Type: "value", Name: unit})
		o.Tooltip = tooltip{Show: true, Trigger: "axis"}
		var pts []datum
		for _, r := range sweep {
			if v, ok := get(r); ok {
				pts = append(pts, xy(float64(r.Workers), round2(v)))
			}
		}
		l := line(text, pts)
		l.ShowSymbol = explicit(true)
		o.Series = []series{l}
		return chart{id: id, height: "280px", option: o}
	}
	return []chart{
		mk("chart_sweep_tps", "Committed transactions per second", "tx/s", func(r *results.Results) (float64, bool) {
			if r.DurationS <= 0 {
				return 0, false
			}
			return float64(r.Outcomes.Succeeded.Ops) / r.DurationS, true
		}),
		mk("chart_sweep_p99", "p99 latency", "ms", func(r *results.Results) (float64, bool) { return r.LatencyMs.P99, true }),
		mk("chart_sweep_rps", "Retries per success", "retries", func(r *results.Results) (float64, bool) { return r.Outcomes.RetriesPerSuccess() }),
	}
}

var summaryTpl = template.Must(template.New("summary").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>indoubt: summary of {{len .Rows}} runs</title>
<script>window.__errors=[];window.addEventListener("error",function(e){window.__errors.push(String(e.message))});</script>
<script>{{.JS}}</script>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:1.5em auto;max-width:80em;padding:0 1em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}
.valid{color:#2e7d32}.invalid{color:#c62828}.unknown{color:#8a6d00}.container{margin:1em 0}
</style></head><body>
<h1>{{len .Rows}} runs</h1>
<table id="stand"><tr><th>store</th><th>workload</th><th>mechanism</th><th>workers</th><th>retry</th><th>faults</th><th>tx/s</th><th>p99 ms</th><th>retries/success</th><th>applied</th><th>rejected</th><th>final</th><th>retries/conflicts</th><th>ambiguous (cut/drop)</th><th>verdict</th></tr>
{{range .Rows}}<tr><td>{{if .Link}}<a href="{{.Link}}">{{.Store}}</a>{{else}}{{.Store}}{{end}}</td><td>{{.Workload}}</td><td>{{.Mechanism}}</td><td>{{.Workers}}</td><td>{{.Retry}}</td><td>{{.Faults}}</td><td>{{printf "%.0f" .TxPerSec}}</td><td>{{.P99}}</td><td>{{.RPS}}</td><td>{{.Applied}}</td><td>{{.Rejected}}</td><td>{{.Final}}</td><td>{{.Retries}}</td><td>{{.Ambiguous}}</td><td class="{{.Verdict}}">{{.Verdict}}</td></tr>
{{end}}</table>
{{range .Charts}}{{.}}{{end}}
<div id="render-check" hidden></div>
<script>
(function(){
  var el=document.getElementById("render-check"), ids=[];
  document.querySelectorAll("[_echarts_instance_]").forEach(function(d){ if(echarts.getInstanceByDom(d)) ids.push(d.id); });
  el.setAttribute("data-charts",ids.join(" "));
  el.setAttribute("data-errors",window.__errors.join(" | "));
})();
</script>
</body></html>
`))
