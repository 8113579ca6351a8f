package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
)

// The charts of report.html and summary.html are ECharts option objects, built here from
// a few small types that hold only the part of ECharts' option schema the pages use
// (https://echarts.apache.org/en/option.html) and marshalled by encoding/json; the
// ECharts script itself is embedded (assets/). A field left at its zero value is left
// out of the option, so that ECharts' default applies, except where a type says
// otherwise: a pointer is written whenever it is set, false and 0 included.

// chart is one chart of a page: its element's id and height (its width is the page's)
// and the option ECharts draws.
type chart struct {
	id, height string
	option     option
}

// option is an ECharts option object.
type option struct {
	// Animation is written false: pages are read, and tested, once drawn.
	Animation bool     `json:"animation"`
	Color     []string `json:"color"`
	Title     title    `json:"title"`
	// Legend is always written: an empty one is a legend with ECharts' defaults.
	Legend   legend     `json:"legend"`
	Tooltip  tooltip    `json:"tooltip"`
	Toolbox  struct{}   `json:"toolbox"` // no tools
	Grid     []grid     `json:"grid,omitempty"`
	DataZoom []dataZoom `json:"dataZoom,omitempty"`
	XAxis    []axis     `json:"xAxis"`
	YAxis    []axis     `json:"yAxis"`
	Series   []series   `json:"series"`
}

// palette is ECharts 5's default palette, the colours of the series that set none.
var palette = []string{"#5470c6", "#91cc75", "#fac858", "#ee6666", "#73c0de", "#3ba272", "#fc8452", "#9a60b4", "#ea7ccc"}

// newOption is an option without animation, in the default palette, with one x and one
// y axis.
func newOption(t title, x, y axis) option {
	return option{Color: palette, Title: t, XAxis: []axis{x}, YAxis: []axis{y}}
}

type title struct {
	Text    string `json:"text,omitempty"`
	Subtext string `json:"subtext,omitempty"`
}

type legend struct {
	Show  bool   `json:"show,omitempty"`
	Top   string `json:"top,omitempty"`
	Right string `json:"right,omitempty"`
}

type tooltip struct {
	Show    bool   `json:"show,omitempty"`
	Trigger string `json:"trigger,omitempty"` // "axis" or "item"
}

type grid struct {
	Top    string `json:"top,omitempty"`
	Bottom string `json:"bottom,omitempty"`
}

type dataZoom struct {
	Type       string `json:"type"` // "inside" (scroll) or "slider"
	XAxisIndex []int  `json:"xAxisIndex"`
}

// axis is an x or y axis: a value (or log) axis with its bounds when set, or a
// category axis of the names in Data.
type axis struct {
	Type     string   `json:"type,omitempty"`
	Name     string   `json:"name,omitempty"`
	Min      *float64 `json:"min,omitempty"`
	Max      *float64 `json:"max,omitempty"`
	Inverse  bool     `json:"inverse,omitempty"`
	Position string   `json:"position,omitempty"`
	Data     []string `json:"data,omitempty"`
}

// bounded is a value axis from min to max.
func bounded(name string, min, max float64) axis {
	return axis{Type: "value", Name: name, Min: &min, Max: &max}
}

// series is one line or bar series.
type series struct {
	Name string `json:"name"`
	Type string `json:"type"` // "line" or "bar"
	// Animation is set false on the line series (and left out on the bars), as the
	// option's.
	Animation    *bool      `json:"animation,omitempty"`
	Data         []datum    `json:"data"`
	YAxisIndex   int        `json:"yAxisIndex,omitempty"`
	Step         string     `json:"step,omitempty"`
	ConnectNulls *bool      `json:"connectNulls,omitempty"`
	ShowSymbol   *bool      `json:"showSymbol,omitempty"`
	Symbol       string     `json:"symbol,omitempty"`
	SymbolSize   int        `json:"symbolSize,omitempty"`
	ItemStyle    *itemStyle `json:"itemStyle,omitempty"`
	LineStyle    *lineStyle `json:"lineStyle,omitempty"`
	MarkArea     *markArea  `json:"markArea,omitempty"`
}

// line is a line series of the points.
func line(name string, pts []datum) series {
	return series{Name: name, Type: "line", Animation: explicit(false), Data: pts}
}

// explicit is a bool option written whatever its value.
func explicit(b bool) *bool { return &b }

// datum is one item of a series: a point [x, y] (xy), a break in the line (lineBreak),
// or a bar's value; Name shows in its tooltip.
type datum struct {
	Name      string     `json:"name,omitempty"`
	Value     any        `json:"value"`
	ItemStyle *itemStyle `json:"itemStyle,omitempty"`
}

func xy(x, y float64) datum { return datum{Value: []float64{x, y}} }

// lineBreak ends a segment of a line series: ECharts draws no line across "-".
var lineBreak = datum{Value: "-"}

type itemStyle struct {
	Color string `json:"color,omitempty"`
}

type lineStyle struct {
	Color   string   `json:"color,omitempty"`
	Width   float64  `json:"width,omitempty"`
	Type    string   `json:"type,omitempty"` // "dashed"
	Opacity *float64 `json:"opacity,omitempty"`
}

// markArea shades areas of a chart, each from one corner to the opposite one.
type markArea struct {
	Data [][2]areaCorner `json:"data,omitempty"`
}

// areaCorner is a corner of a shaded area: the first carries its name and colour.
// Coord is [x, y], where y may be "min" or "max" for the axis' bounds.
type areaCorner struct {
	Name      string     `json:"name,omitempty"`
	Coord     [2]any     `json:"coord"`
	ItemStyle *itemStyle `json:"itemStyle,omitempty"`
}

// chartHTML renders a chart as its element and the script that draws it, with the
// options escaped as the rule in html.go says: json.Marshal with its HTML escaping on.
func chartHTML(c chart) (template.HTML, error) {
	opt, err := json.Marshal(c.option)
	if err != nil {
		return "", fmt.Errorf("report: chart %s: %v", c.id, err)
	}
	// The theme and renderer the pages have always passed: ECharts has no theme named
	// "white" and draws with its default one; canvas is its default renderer.
	init, err := json.Marshal([]string{c.id, "white", "canvas"})
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	err = chartTpl.Execute(&buf, struct {
		ID, Width, Height string
		Init, Option      template.JS
	}{c.id, "100%", c.height, template.JS(init), template.JS(opt)})
	return template.HTML(buf.String()), err
}

var chartTpl = template.Must(template.New("chart").Parse(`<div class="container"><div class="item" id="{{.ID}}" style="width:{{.Width}};height:{{.Height}}"></div></div>
<script>(function(a){echarts.init(document.getElementById(a[0]),a[1],{renderer:a[2]}).setOption({{.Option}});})({{.Init}});</script>
`))

// renderCharts renders each chart; the first error stops it.
func renderCharts(cs ...chart) ([]template.HTML, error) {
	out := make([]template.HTML, 0, len(cs))
	for _, c := range cs {
		h, err := chartHTML(c)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// opacity is a line's opacity, written whatever its value (0: invisible).
func opacity(v float64) *float64 { return &v }
