package report

import (
	"fmt"
	"html/template"
	"sort"
	"strings"

	"github.com/indoubt/indoubt/internal/results"
)

// The leader timeline on report.html: results.json's leaders as a strip, one coloured
// segment per span as wide as it lasted (a colour per node leading, grey without a
// leader, red for two or more), and a table of the spans. The page's script writes
// each segment's laid-out width onto the strip (data-widths), so a test in a browser
// sees that it was drawn.

// leaderRows is how many spans the table lists; the strip draws them all.
const leaderRows = 100

// The strip's colours: one per node that led, in node order; then these.
var (
	leaderColours  = []string{"#1565c0", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#795548", "#ad1457", "#558b2f"}
	noLeaderColour = "#bdbdbd"
	splitColour    = "#c62828"
)

// leaderView is what the page shows of results.json's leaders.
type leaderView struct {
	*results.Leaders
	Segments []leaderSegment
	Rows     []results.LeaderSpan
	// ByWrites is the timeline read from whether each node's database takes writes,
	// where the run recorded it (results.Leaders's writes); nil elsewhere.
	ByWrites *leaderView
	More     int
	// Spans is each segment's leader, "|" between them: the strip's data-spans.
	Spans string
}

type leaderSegment struct {
	Style template.CSS
	Title string
	// Label is written in the segment when it is wide enough to hold it.
	Label string
}

func leadersOf(l *results.Leaders) *leaderView {
	if l == nil || len(l.Timeline) == 0 {
		return nil
	}
	v := &leaderView{Leaders: l}
	var nodes []string
	for _, s := range l.Timeline {
		for _, n := range s.Leaders {
			if !contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	sort.Strings(nodes)
	total := l.ToS - l.FromS
	var spans []string
	for _, s := range l.Timeline {
		colour := noLeaderColour
		switch len(s.Leaders) {
		case 0:
		case 1:
			i := 0
			for nodes[i] != s.Leaders[0] {
				i++
			}
			colour = leaderColours[i%len(leaderColours)]
		default:
			colour = splitColour
		}
		d := s.EndS - s.StartS
		title := fmt.Sprintf("%s from %.2f s to %.2f s (%.2f s)", s.Leader(), s.StartS, s.EndS, d)
		if len(s.Down) > 0 {
			title += "; not answering: " + strings.Join(s.Down, ", ")
		}
		seg := leaderSegment{Title: title,
			// Only numbers and the fixed colours: nothing read from the run reaches the CSS.
			Style: template.CSS(fmt.Sprintf("flex:%.3f 0 0;background:%s", max(d, 0), colour))}
		if total > 0 && d/total >= 0.06 {
			seg.Label = s.Leader()
		}
		v.Segments = append(v.Segments, seg)
		spans = append(spans, s.Leader())
	}
	v.Spans = strings.Join(spans, "|")
	v.Rows = l.Timeline[:min(len(l.Timeline), leaderRows)]
	v.More = len(l.Timeline) - len(v.Rows)
	v.ByWrites = leadersOf(l.Writes)
	return v
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

const leadersTemplate = `{{if .}}<h3>Leader over time</h3>
<p id="leader-figures">From {{printf "%.2f" .FromS}} s to {{printf "%.2f" .ToS}} s, as the nodes reported their own role when polled: {{printf "%.2f" .NoLeaderS}} s with no node reporting itself leader, {{printf "%.2f" .SplitBrainS}} s with two or more (red), {{.Changes}} leader {{if eq .Changes 1}}change{{else}}changes{{end}}. A node that did not answer (killed, paused, cut off) counts as no leader, whatever it thought of itself.{{if .Signal}} Asked: {{.Signal}}.{{end}}</p>
<div id="leader-strip" data-spans="{{.Spans}}" style="display:flex;height:1.8em;border:1px solid #999;font-size:12px;line-height:1.8em;color:#fff;overflow:hidden">{{range .Segments}}<div class="leader-segment" title="{{.Title}}" style="{{.Style}};min-width:1px;text-align:center;white-space:nowrap;overflow:hidden">{{.Label}}</div>{{end}}</div>
<div style="display:flex;justify-content:space-between;font-size:12px;color:#555"><span>{{printf "%.2f" .FromS}} s</span><span>{{printf "%.2f" .ToS}} s</span></div>
<table id="leaders"><tr><th>from</th><th>to</th><th>for</th><th>leader</th><th>not answering</th></tr>
{{range .Rows}}<tr><td>{{printf "%.2f" .StartS}} s</td><td>{{printf "%.2f" .EndS}} s</td><td>{{printf "%.2f" (dur .)}} s</td><td>{{if eq (len .Leaders) 0}}none{{else}}{{.Leader}}{{if gt (len .Leaders) 1}} (split brain){{end}}{{end}}</td><td>{{range $i, $n := .Down}}{{if $i}}, {{end}}{{$n}}{{end}}</td></tr>
{{end}}</table>{{if .More}}<p>and {{.More}} more spans in results.json (leaders.timeline).</p>{{end}}
{{with .ByWrites}}<h4>Leader by writes taken</h4>
<p id="leader-writes-figures">The same nodes, each asked whether its database takes writes ({{.Signal}}): {{printf "%.2f" .NoLeaderS}} s with none taking writes, {{printf "%.2f" .SplitBrainS}} s with two or more, {{.Changes}} leader {{if eq .Changes 1}}change{{else}}changes{{end}}, from {{printf "%.2f" .FromS}} s to {{printf "%.2f" .ToS}} s.</p>
<table id="leaders-writes"><tr><th>from</th><th>to</th><th>for</th><th>taking writes</th><th>not answering</th></tr>
{{range .Rows}}<tr><td>{{printf "%.2f" .StartS}} s</td><td>{{printf "%.2f" .EndS}} s</td><td>{{printf "%.2f" (dur .)}} s</td><td>{{if eq (len .Leaders) 0}}none{{else}}{{.Leader}}{{if gt (len .Leaders) 1}} (split brain){{end}}{{end}}</td><td>{{range $i, $n := .Down}}{{if $i}}, {{end}}{{$n}}{{end}}</td></tr>
{{end}}</table>{{if .More}}<p>and {{.More}} more spans in results.json (leaders.writes.timeline).</p>{{end}}{{end}}
<script>
(function(){
  var s=document.getElementById("leader-strip"); if(!s) return;
  s.setAttribute("data-widths",[].map.call(s.children,function(c){return Math.round(c.getBoundingClientRect().width)}).join(" "));
})();
</script>
{{end}}`

func init() {
	template.Must(page.New("leaders").Funcs(template.FuncMap{
		"dur": func(s results.LeaderSpan) float64 { return s.EndS - s.StartS },
	}).Parse(leadersTemplate))
}
