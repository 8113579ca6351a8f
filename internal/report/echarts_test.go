package report

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

var update = flag.Bool("update", false, "rewrite testdata/charts/options.json from the charts drawn now")

// chartsOf draws every chart of both pages on one small fixed run: operations of each
// outcome (one op id holding "</script>"), a proxy window, its cuts, drops and another
// kind (one on no worker), a kill, the timeline with and without the named operations
// and the process faults, a run with no window, a latency chart with no points, the
// stand's bars of one run and of three, and the sweep's curves.
func chartsOf(t *testing.T) []chart {
	first := 0.5
	d := runData{end: 3.01,
		spans: []span{
			{0, "0-1", 0.01, 0.2, histories.OK, 1}, {1, "1-1", 0.02, 0.9, histories.Fail, 2},
			{2, "2-1", 0.3, 1.4, histories.Info, 3}, {0, "0-2", 0.3, 2.5, histories.OK, 4}, {1, "1-2</script>", 1.0, 2.9, histories.OK, 5},
		},
		windows: []window{{"commit-cut:0.2@0s-1s", 0, 1}},
		marks:   []mark{{0.5, "commit-cut", 0}, {0.7, "commit-drop", 1}, {0.8, "other", 2}, {0.9, "commit-cut", -1}},
		procs:   []results.ProcessFault{{Fault: "kill@1s-2s", Action: "kill", StartS: 1, EndS: 2, FirstAckS: &first}},
	}
	o := perSecond(d)
	tl, _, _ := timelineChart(d, map[string]bool{"1-1": true})
	d2 := d
	d2.procs = nil
	tl2, _, _ := timelineChart(d2, map[string]bool{})
	d3 := d2
	d3.windows, d3.marks = nil, nil
	tl3, _, _ := timelineChart(d3, map[string]bool{"0-1": true})
	var runs []*results.Results
	for i, w := range []int{1, 4, 16} {
		var r results.Results
		b := []byte(`{"verdict":"valid","workload":"counter","store":"postgres","mechanism":"read-write","retry":"conflict","duration_s":10,
			"throughput":900.123,"latency_ms":{"p99":12},"outcomes":{"succeeded":{"ops":9000,"attempts":10000}}}`)
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		r.Workers = w
		if i == 1 {
			r.Verdict = 2
		}
		runs = append(runs, &r)
	}
	cs := []chart{rateChart(d, o), latencyChart(d, o), tl, tl2, rateChart(d2, o), rateChart(d3, o), latencyChart(d3, perSecond(runData{end: 1})), tl3,
		storeBars(runs), storeBars(runs[:1])}
	return append(cs, sweepCharts(runs)...)
}

var drawRE = regexp.MustCompile(`(?s)^<div class="container"><div class="item" id="[a-z0-9_]+" style="width:100%;height:\d+px"></div></div>
<script>\(function\(a\)\{echarts.init\(document.getElementById\(a\[0\]\),a\[1\],\{renderer:a\[2\]\}\).setOption\((.*)\);\}\)\((.*)\);</script>
$`)

// The charts' options are the ECharts options in testdata/charts/options.json, which
// go-echarts v2.6.7 built for the same charts before our own types replaced it, so the
// pages draw the same charts (a null member, which ECharts reads as absent, is left out
// on both sides: go-echarts wrote the "itemStyle" of an area's second corner null).
// Each is written in the element and script the pages have always had, with no "<"
// left raw in it. -update rewrites the file from the charts drawn now.
func TestChartOptions(t *testing.T) {
	type drawn struct {
		Init   []string `json:"init"`
		Option any      `json:"option"`
	}
	var got []drawn
	for _, c := range chartsOf(t) {
		h, err := chartHTML(c)
		if err != nil {
			t.Fatal(err)
		}
		m := drawRE.FindStringSubmatch(string(h))
		if m == nil {
			t.Fatalf("chart %s is not drawn by the pages' element and script:\n%s", c.id, h)
		}
		if strings.Contains(m[1], "<") {
			t.Errorf("chart %s: a raw < in its options", c.id)
		}
		var d drawn
		if err := json.Unmarshal([]byte(m[1]), &d.Option); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(m[2]), &d.Init); err != nil {
			t.Fatal(err)
		}
		d.Option = withoutNulls(d.Option)
		got = append(got, d)
	}
	path := filepath.Join("testdata", "charts", "options.json")
	if *update {
		b, _ := json.MarshalIndent(got, "", " ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []drawn
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d charts, %d in %s", len(got), len(want), path)
	}
	for i := range got {
		if !reflect.DeepEqual(got[i], want[i]) {
			g, _ := json.Marshal(got[i])
			w, _ := json.Marshal(want[i])
			t.Errorf("chart %d (%s) differs from %s:\n got %s\nwant %s", i, got[i].Init[0], path, g, w)
		}
	}
}

// withoutNulls drops the null members of the objects in a decoded JSON value.
func withoutNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if x == nil {
				delete(v, k)
			} else {
				v[k] = withoutNulls(x)
			}
		}
	case []any:
		for i, x := range v {
			v[i] = withoutNulls(x)
		}
	}
	return v
}
