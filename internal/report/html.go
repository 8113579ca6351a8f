package report

import (
	"bytes"
	"encoding/json"
	"html/template"
	"os"
)

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"json": func(v any) string {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err.Error()
		}
		return string(b)
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>indoubt: {{.Workload}} on {{.Store}} — {{.Verdict}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:2em;max-width:70em}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
.valid{color:#176617}.invalid{color:#b00020}.unknown{color:#8a6d00}
pre{background:#f6f6f6;padding:.5em;overflow:auto}
</style></head><body>
<h1>{{.Workload}} on {{.Store}}: <span class="{{.Verdict}}">{{.Verdict}}</span>{{if .Interrupted}} (interrupted){{end}}</h1>
<p>{{.Summary}}</p>
<table>
<tr><th>mechanism</th><td>{{.Mechanism}}</td></tr>
<tr><th>retry policy</th><td>{{.Retry}}</td></tr>
<tr><th>server</th><td>{{.Server}}{{if .Proxied}}, through the fault proxy{{end}}</td></tr>
<tr><th>seed</th><td>{{.Seed}}</td></tr>
<tr><th>workers</th><td>{{.Workers}}</td></tr>
<tr><th>duration</th><td>{{printf "%.2f" .DurationS}} s</td></tr>
<tr><th>throughput</th><td>{{printf "%.1f" .Throughput}} ops/s</td></tr>
<tr><th>operations</th><td>{{.Ops.Invoked}} invoked: {{.Ops.OK}} ok, {{.Ops.Fail}} fail, {{.Ops.Info}} info (unknown)</td></tr>
<tr><th>latency</th><td>p50 {{.LatencyMs.P50}} ms, p95 {{.LatencyMs.P95}} ms, p99 {{.LatencyMs.P99}} ms, max {{.LatencyMs.Max}} ms</td></tr>
<tr><th>retries</th><td>{{.Retries.Total}}: ok {{.Retries.ByOutcome.OK}}, fail {{.Retries.ByOutcome.Fail}}, info {{.Retries.ByOutcome.Info}}, deadline {{.Retries.ByOutcome.Deadline}}; by reason {{range $k, $v := .Retries.ByReason}}{{$k}}={{$v}} {{end}}</td></tr>
<tr><th>CAS conflicts</th><td>{{.Conflicts}}</td></tr>
<tr><th>faults</th><td>{{range .Faults.Schedule}}{{.}} {{end}}{{range $k, $v := .Faults.ByKind}}{{$k}}={{$v}} {{end}}{{if .Faults.Commits}}<br>commit faults: {{.Faults.Commits}}{{else}}{{range $k, $v := .Faults.ByTruth}}truth {{$k}}={{$v}} {{end}}{{end}}</td></tr>
</table>
{{with .Evidence}}<h2>Ground truth from the proxy</h2>
<p>{{.Events}} fault events, {{.Joined}} joined to operations.</p>
{{if .AppliedTwice}}<h3>Applied more than once</h3><ul>{{range .AppliedTwice}}<li>{{.Sentence}}</li>{{end}}</ul>{{end}}
{{if .CommittedTwice}}<h3>Committed more than once (the first commit's reply does not show what it changed)</h3><ul>{{range .CommittedTwice}}<li>{{.Sentence}}</li>{{end}}</ul>{{end}}
{{if .Disagreements}}<h3>Checker and ground truth disagree</h3><ul>{{range .Disagreements}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{if .Ambiguous}}<h3>Operations hit by a fault</h3><table><tr><th>op</th><th>ended</th><th>connection</th><th>fault</th><th>truth</th></tr>
{{range .Ambiguous}}<tr><td>{{.OpID}}</td><td>{{.Completion}}</td><td>{{.Conn}}</td><td>{{.Fault}}</td><td>{{.Truth}}</td></tr>{{end}}</table>{{end}}
{{end}}
{{if .Anomalies}}<h2>Anomalies</h2><p>{{len .Anomalies}} listed{{if gt (len .Anomalies) 20}}; the first 20 here, all in results.json{{end}}.</p><ul>{{range $i, $a := .Anomalies}}{{if lt $i 20}}<li><b>{{$a.Kind}}</b>: {{$a.Explanation}} (history events {{range $a.Ops}}{{.}} {{end}})</li>{{end}}{{end}}</ul>{{end}}
<h2>Final state</h2><pre>{{json .Final}}</pre>
<p>Files beside this one: history.jsonl (every operation), faults.jsonl (proxy events), results.json, config.json.</p>
</body></html>
`))

// WriteHTML writes report.html for one run.
func WriteHTML(path string, r *Results) error {
	var buf bytes.Buffer
	if err := page.Execute(&buf, r); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
