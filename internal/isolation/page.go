package isolation

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// WritePage writes the table as a page that stands alone (no script, nothing
// fetched): the table with its cost rows, then one section a cell with the verdict,
// a finding when it differs from Hermitage, the cycle drawn (each session a node
// linked to its statements, each dependency an arrow with its key) and the
// statements as they ran, one column a session, in order.
func (t Table) WritePage(w io.Writer) error {
	type stepRow struct {
		ID    string
		Cols  []template.HTML
		Class string
	}
	type section struct {
		ID, Title, Class, How, Cycle, Finding, Sessions string
		Others                                          []string
		Graph                                           *pageGraph
		Heads                                           []string
		Rows                                            []stepRow
	}
	type cellView struct{ Href, Text, Class string }
	type row struct {
		Name  string
		Cells []cellView
	}
	var rows []row
	var sections []section
	for _, name := range Anomalies() {
		r := row{Name: name}
		for _, l := range t.Levels {
			c, ok := t.Cell(name, l)
			if !ok {
				r.Cells = append(r.Cells, cellView{})
				continue
			}
			r.Cells = append(r.Cells, cellView{Href: "#" + cellID(c), Text: cellText(c), Class: cellClass(c)})
		}
		rows = append(rows, r)
	}
	for _, c := range t.Cells {
		id := cellID(c)
		s := section{ID: id, Title: fmt.Sprintf("%s (%s) at %s", c.Anomaly, c.Title, c.Level), Class: cellClass(c),
			How: cellText(c), Cycle: c.Cycle, Finding: c.Finding, Sessions: c.Sessions}
		for _, o := range c.Others {
			s.Others = append(s.Others, o.Kind+": "+o.Explanation)
		}
		n := 0
		for _, st := range c.Steps {
			n = max(n, st.Session)
		}
		for i := 1; i <= n; i++ {
			s.Heads = append(s.Heads, fmt.Sprintf("T%d", i))
		}
		first := map[int]bool{}
		for i, st := range c.Steps {
			rid := fmt.Sprintf("%s-step-%d", id, i+1)
			if !first[st.Session] {
				first[st.Session] = true
				rid = fmt.Sprintf("%s-T%d", id, st.Session)
			}
			cols := make([]template.HTML, n)
			var b strings.Builder
			template.HTMLEscape(&b, []byte(st.SQL))
			switch {
			case st.Skipped:
				b.WriteString(`<br><i>not sent: the transaction had failed</i>`)
			case st.Error != "":
				b.WriteString(`<br>&rarr; <b>ERROR `)
				template.HTMLEscape(&b, []byte(st.SQLState+": "+st.Error))
				b.WriteString(`</b>`)
			default:
				b.WriteString(`<br>&rarr; `)
				template.HTMLEscape(&b, []byte(st.Result))
			}
			if st.Blocked {
				b.WriteString(` <i>(blocked first)</i>`)
			}
			cols[st.Session-1] = template.HTML(b.String())
			class := ""
			switch {
			case st.Error != "":
				class = "err"
			case st.Blocked:
				class = "blocked"
			}
			s.Rows = append(s.Rows, stepRow{ID: rid, Cols: cols, Class: class})
		}
		if c.Graph != nil {
			s.Graph = drawCycle(c.Graph, id)
		}
		sections = append(sections, s)
	}
	type costRow struct {
		Label string
		Vals  []string
	}
	var costs []costRow
	if len(t.Costs) > 0 {
		add := func(label string, f func(Cost) string) {
			r := costRow{Label: label}
			for _, l := range t.Levels {
				v := ""
				for _, c := range t.Costs {
					if c.Level == l {
						v = f(c)
					}
				}
				r.Vals = append(r.Vals, v)
			}
			costs = append(costs, r)
		}
		add("committed/s", func(c Cost) string { return fmt.Sprintf("%.0f", c.CommittedPerSecond) })
		add("latency p50 / p99 ms", func(c Cost) string { return fmt.Sprintf("%.1f / %.1f", c.LatencyP50, c.LatencyP99) })
		add("aborts per commit", func(c Cost) string { return fmt.Sprintf("%.2f (%s)", c.AbortsPerCommit, c.abortsText()) })
		add("random workload checked", func(c Cost) string { return fmt.Sprintf("%d transactions: %s", c.Transactions, c.Verdict) })
	}
	if len(t.Contention) > 0 {
		r := costRow{Label: "hot-key read-modify-write, checked for serializable"}
		for _, l := range t.Levels {
			v := ""
			for _, c := range t.Contention {
				if c.Level == l {
					v = c.text()
				}
			}
			r.Vals = append(r.Vals, v)
		}
		costs = append(costs, r)
	}
	return pageTemplate.Execute(w, map[string]any{
		"Server": t.Server, "Levels": t.Levels, "Rows": rows, "Costs": costs, "Sections": sections,
		"Findings": len(t.Findings()),
	})
}

// pageGraph is a cycle laid out: its sessions as nodes linked to their statements,
// its dependencies as curved arrows with their labels.
type pageGraph struct {
	Nodes []pageNode
	Edges []pageEdge
}

type pageNode struct {
	X, Y    float64
	Session int
	Href    string
}

type pageEdge struct {
	Path, Label string
	LX, LY      float64
}

// drawCycle lays a cycle's sessions on a circle and its edges as arrows between them.
func drawCycle(cy *Cycle, id string) *pageGraph {
	var order []int
	for _, st := range cy.Steps {
		for _, s := range []int{st.FromSession, st.ToSession} {
			found := false
			for _, o := range order {
				found = found || o == s
			}
			if !found {
				order = append(order, s)
			}
		}
	}
	const cx, cy0, rad = 160.0, 110.0, 70.0
	pos := map[int][2]float64{}
	var nodes []pageNode
	for i, s := range order {
		a := 2*math.Pi*float64(i)/float64(len(order)) - math.Pi
		x, y := cx+rad*math.Cos(a), cy0+rad*math.Sin(a)
		pos[s] = [2]float64{x, y}
		nodes = append(nodes, pageNode{x, y, s, fmt.Sprintf("#%s-T%d", id, s)})
	}
	var edges []pageEdge
	for _, st := range cy.Steps {
		a, b := pos[st.FromSession], pos[st.ToSession]
		// A curve bent to the left of its direction, so that the two edges of a
		// two-transaction cycle do not overlap.
		mx, my := (a[0]+b[0])/2, (a[1]+b[1])/2
		dx, dy := b[0]-a[0], b[1]-a[1]
		l := math.Hypot(dx, dy)
		if l == 0 {
			l = 1
		}
		qx, qy := mx-dy/l*35, my+dx/l*35
		// Stop short of the node's circle.
		ex, ey := b[0]-(b[0]-qx)/math.Hypot(b[0]-qx, b[1]-qy)*20, b[1]-(b[1]-qy)/math.Hypot(b[0]-qx, b[1]-qy)*20
		sx, sy := a[0]+(qx-a[0])/math.Hypot(qx-a[0], qy-a[1])*20, a[1]+(qy-a[1])/math.Hypot(qx-a[0], qy-a[1])*20
		label := st.Type
		if st.Key != "" {
			label += " key " + st.Key
		}
		edges = append(edges, pageEdge{fmt.Sprintf("M%.1f,%.1f Q%.1f,%.1f %.1f,%.1f", sx, sy, qx, qy, ex, ey), label, qx, qy})
	}
	return &pageGraph{nodes, edges}
}

func cellID(c Cell) string { return "cell-" + c.Anomaly + "-" + string(c.Level) }

func cellText(c Cell) string {
	s := "prevented: " + c.How
	if c.Observed {
		s = "observed: " + c.CycleKind
	}
	if !c.Agrees {
		s += " (differs from Hermitage)"
	}
	return s
}

func cellClass(c Cell) string {
	cl := "prevented"
	if c.Observed {
		cl = "observed"
	}
	if !c.Agrees {
		cl += " differs"
	}
	return cl
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Isolation measured: {{.Server}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
td.observed{background:#fde2e2}td.prevented{background:#e3f4e3}td.differs{outline:3px solid #c00}
tr.blocked td{background:#fff6d5}tr.err td{background:#fde2e2}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
pre.finding{background:#fde2e2}
section{border-top:1px solid #ddd;margin-top:1.5em}
svg text{font:12px system-ui,sans-serif}
</style></head><body>
<h1>Hermitage's table measured on {{.Server}}</h1>
<p>Each cell is one of Hermitage's interleavings run statement by statement at that level, its
transactions judged by the list-append checker: <b>observed</b> with the kind of cycle that
proves it, or <b>prevented</b> and how (a session blocked on another's lock, a transaction
aborted with its SQLSTATE, or neither). {{if .Findings}}<b>{{.Findings}} cell(s) differ from Hermitage's table.</b>{{else}}Every cell agrees with Hermitage's table.{{end}}
The cost rows are the random list-append workload at each level.</p>
<table id="table"><thead><tr><th>anomaly</th>{{range .Levels}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr class="anomaly"><th>{{.Name}}</th>{{range .Cells}}<td class="{{.Class}}"><a href="{{.Href}}">{{.Text}}</a></td>{{end}}</tr>
{{end}}{{range .Costs}}<tr class="cost"><th>{{.Label}}</th>{{range .Vals}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{range .Sections}}<section id="{{.ID}}" class="{{.Class}}">
<h2>{{.Title}}: {{.How}}</h2>
{{if .Finding}}<pre class="finding">FINDING: {{.Finding}}</pre>{{end}}
{{if .Graph}}<svg class="cycle" width="320" height="220" viewBox="0 0 320 220" role="img" aria-label="the cycle">
<defs><marker id="arrow-{{.ID}}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#a00"/></marker></defs>
{{$id := .ID}}{{range .Graph.Edges}}<path class="edge" d="{{.Path}}" fill="none" stroke="#a00" stroke-width="1.5" marker-end="url(#arrow-{{$id}})"/><text x="{{.LX}}" y="{{.LY}}" text-anchor="middle">{{.Label}}</text>
{{end}}{{range .Graph.Nodes}}<a href="{{.Href}}"><circle class="node" cx="{{.X}}" cy="{{.Y}}" r="18" fill="#fff" stroke="#333"/><text x="{{.X}}" y="{{.Y}}" dy="4" text-anchor="middle">T{{.Session}}</text></a>
{{end}}</svg>{{end}}
{{if .Cycle}}<pre class="cycle">{{.Sessions}}
{{.Cycle}}</pre>{{end}}
{{range .Others}}<pre class="other">also found: {{.}}</pre>{{end}}
<table class="steps"><thead><tr>{{range .Heads}}<th>{{.}}</th>{{end}}</tr></thead><tbody>
{{range .Rows}}<tr id="{{.ID}}" class="{{.Class}}">{{range .Cols}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
</section>
{{end}}</body></html>
`))
