package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// hostile returns a string for the field named field of a run directory that would run
// script if a page took it as markup, broke out of a script element with it, or let
// go-echarts' "__f__" marker turn it into code; and that would clear the screen, set
// the title and reverse the text if a terminal were given it raw. The script it would
// run records field in window.__pwned.
func hostile(field string) string {
	push := `(window.__pwned=window.__pwned||[]).push('` + field + `')`
	return "__f__" + field + `</script><script>` + push + `</script><img src=x onerror="` + push + `"><!--<script>` +
		"\x1b[2J\x1b]0;pwned\x07\u202e\u009b" + `__f__`
}

// poisonRunDir copies the run directory src to dst with every string a run directory
// carries made hostile: in results.json every string value and map key but the few
// that are read as typed values (the verdict, workload, times, the final state's
// fields), plus a process fault and a lost write with every field set; in
// history.jsonl the op ids, connections, errors and the header's store; in faults.jsonl
// the fault names, kinds, statements, tags, truths, protocols and connections. The
// same field gets the same suffix everywhere, so that op ids still pair, fault
// windows still open and close, and events still join their connections.
func poisonRunDir(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	readJSON(t, filepath.Join(src, "results.json"), &res)
	keep := map[string]bool{"verdict": true, "workload": true, "started_at": true, "final": true, "times_applied": true, "run_dir": true}
	for k, v := range res {
		if !keep[k] {
			res[k] = poisonValue(k, v)
		}
	}
	res["process_faults"] = []any{map[string]any{
		"fault": hostile("process_fault"), "action": "kill", "server": hostile("pf_server"), "pid": 7,
		"start_s": 0.2, "end_s": 0.4, "downtime_s": 0.2, "error": hostile("pf_error"),
		"in_flight": 0, "in_flight_info": 0, "in_flight_ok": 0, "lost_writes": 0,
	}}
	res["lost_writes"] = []any{map[string]any{
		"op_id": "1-" + hostile("lost_op_id"), "index": 3, "key": hostile("lost_key"), "value": hostile("lost_value"),
		"fault": hostile("process_fault"), "ack_before_fault_s": 0.1, "explanation": hostile("lost_explanation"), "count": 0,
	}}
	writeJSON(t, filepath.Join(dst, "results.json"), res)
	poisonLines(t, filepath.Join(src, "history.jsonl"), filepath.Join(dst, "history.jsonl"), func(m map[string]any) {
		if h, ok := m["header"].(map[string]any); ok {
			h["store"] = "postgres" + hostile("header_store")
		}
		for _, k := range []string{"op_id", "conn", "error"} {
			if s, ok := m[k].(string); ok {
				m[k] = s + hostile(k)
			}
		}
		// The failed attempts' connections too: the report joins a fault event to the
		// attempt it hit, as the evidence does.
		if fa, ok := m["failed_attempts"].([]any); ok {
			for _, a := range fa {
				if a, ok := a.(map[string]any); ok {
					if s, ok := a["conn"].(string); ok {
						a["conn"] = s + hostile("conn")
					}
				}
			}
		}
	})
	poisonLines(t, filepath.Join(src, "faults.jsonl"), filepath.Join(dst, "faults.jsonl"), func(m map[string]any) {
		for _, k := range []string{"fault", "kind", "statement", "tag", "truth", "protocol"} {
			if s, ok := m[k].(string); ok {
				m[k] = s + hostile("fault_"+k)
			}
		}
		if s, ok := m["conn"].(string); ok {
			m["conn"] = s + hostile("conn") // as in the history: the events join
		}
	})
}

// poisonValue makes every string in v, and every key of its objects, hostile, named
// for the key it is under.
func poisonValue(key string, v any) any {
	switch v := v.(type) {
	case string:
		if schemaEnums[key] {
			// One of the names schemas/results.schema.json allows: report refuses
			// anything else before rendering.
			return v
		}
		return v + hostile(key)
	case []any:
		for i := range v {
			v[i] = poisonValue(key, v[i])
		}
		return v
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			nk := k
			if key == "errors" || key == "by_kind" || key == "by_truth" || key == "by_reason" || key == "anomaly_kinds" {
				nk = k + hostile(key+"_key")
			}
			out[nk] = poisonValue(k, x)
		}
		return out
	}
	return v
}

// schemaEnums are the keys whose strings results.json's schema holds to a list of
// names.
var schemaEnums = map[string]bool{"completion": true, "proof": true, "shape": true, "decision": true,
	"coordinator": true, "placement": true, "retry": true, "type": true}

func poisonLines(t *testing.T, src, dst string, poison func(map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		poison(m)
		nb, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, nb...), '\n')
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func chromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is missing (required under CI=true)")
		}
		t.Skip("chromium is missing: install Debian package chromium (scripts/test does as root)")
	}
	return p
}

// tooltipProbe is appended to a copy of a page: once the charts are drawn it shows the
// tooltip of the first points of every series of every chart, one after the other,
// and records on #render-check what the tooltips held as text, how many elements
// they held, and what window.__pwned holds (the fields whose script ran).
const tooltipProbe = `<script>
(function(){
  var el=document.getElementById("render-check"), steps=[], texts=[], tags=0;
  document.querySelectorAll("[_echarts_instance_]").forEach(function(d){
    var c=echarts.getInstanceByDom(d); if(!c) return;
    (c.getOption().series||[]).forEach(function(s,si){
      for(var j=0;j<Math.min((s.data||[]).length,4);j++) steps.push([c,si,j]);
    });
  });
  function tips(){ return Array.prototype.filter.call(document.querySelectorAll("div"),function(x){return x.style.zIndex==="9999999"}); }
  function next(i){
    if(i>0) tips().forEach(function(x){ texts.push(x.textContent); tags+=x.querySelectorAll("*:not(span):not(br):not(div)").length; });
    if(i===steps.length){
      el.setAttribute("data-tips",String(texts.length));
      el.setAttribute("data-tip-text",texts.join(" | "));
      el.setAttribute("data-tip-tags",String(tags));
      setTimeout(function(){ el.setAttribute("data-pwned",(window.__pwned||[]).join(" ")); el.setAttribute("data-probe","done"); },300);
      return;
    }
    var s=steps[i]; s[0].dispatchAction({type:"showTip",seriesIndex:s[1],dataIndex:s[2]});
    setTimeout(function(){next(i+1)},30);
  }
  setTimeout(function(){next(0)},200);
})();
</script>
</body>`

// loadHostile opens a copy of page with tooltipProbe in headless chromium and returns
// the DOM it ends with.
func loadHostile(t *testing.T, bin, page string) string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	probe := strings.TrimSuffix(page, ".html") + "-probe.html"
	if i := strings.LastIndex(string(b), "</body>"); i < 0 {
		t.Fatalf("%s has no </body>", page)
	} else {
		b = append(b[:i:i], tooltipProbe...)
	}
	if err := os.WriteFile(probe, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
		"--user-data-dir="+t.TempDir(), "--dump-dom", "file://"+probe).Output()
	if err != nil {
		t.Fatalf("chromium %s: %v", probe, err)
	}
	return string(out)
}

func attr(dom, name string) (string, bool) {
	m := regexp.MustCompile(`\b` + name + `="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// TestHostileRunDirectoryInBrowser: a run directory whose every string field carries
// a script (a real faulted run's, poisoned) is judged again and re-rendered by indoubt
// report, and its
// report.html and summary.html, opened in headless chromium with every chart's
// tooltips shown, run none of them: no script error, every chart drawn, the strings
// shown as text. The same directory through indoubt compare and check prints no
// control character.
func TestHostileRunDirectoryInBrowser(t *testing.T) {
	bin := chromium(t)
	srv := startPostgres(t)
	out := t.TempDir()
	if code, _, stderr := invoke(t, "run", "--dsn", srv.DSN, "--out", out, "--workers", "3", "--ops", "20", "--quiet",
		"--fault", "commit-cut:0.3", "--retry", "naive"); code != 1 {
		t.Fatalf("the faulted run: exit %d, want 1 (invalid); stderr %q", code, stderr)
	}
	runs, _ := filepath.Glob(filepath.Join(out, "*-budget-postgres-*"))
	if len(runs) != 1 {
		t.Fatalf("run directories: %v", runs)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	poisonRunDir(t, runs[0], a)
	poisonRunDir(t, runs[0], b)
	summary := filepath.Join(dir, "summary.html")
	code, stdout, stderr := invoke(t, "report", "--summary", summary, a, b)
	if code != 0 {
		t.Fatalf("indoubt report: exit %d, stderr %q", code, stderr)
	}
	if c := controls(stdout + stderr); c != "" {
		t.Errorf("indoubt report printed the control %q", c)
	}
	t.Run("report.html", func(t *testing.T) {
		dom := loadHostile(t, bin, filepath.Join(a, "report.html"))
		checkHostileDOM(t, dom, "chart_rate chart_latency chart_timeline")
		// The strings are on the page as text: the store in the heading, an op id of
		// the history among the named operations and in the judged explanations.
		for _, field := range []string{"store", "mechanism", "server", "op_id"} {
			if !strings.Contains(dom, "__f__"+field+"&lt;/script&gt;&lt;script&gt;") {
				t.Errorf("%s is not shown as text on the page", field)
			}
		}
		// What the judge decides (the summary, the explanations, the process faults, the
		// lost writes) is computed again from the history: results.json's poisoned
		// copies of them are not rendered at all.
		for _, field := range []string{"summary", "explanation", "sentence", "process_fault", "lost_key", "pf_error"} {
			if strings.Contains(dom, "__f__"+field) {
				t.Errorf("results.json's %s is on the page: the judged one should replace it", field)
			}
		}
		series, _ := attr(dom, "data-timeline-series")
		if !strings.Contains(series, "commit-cut__f__fault_kind&lt;/script&gt;") {
			t.Errorf("the timeline's series do not name the poisoned fault kind as text: %q", series)
		}
		areas, _ := attr(dom, "data-rate-areas")
		if !strings.Contains(areas, "__f__fault_fault&lt;/script&gt;") {
			t.Errorf("the rate chart's fault windows do not carry the poisoned fault name as text: %q", areas)
		}
	})
	t.Run("summary.html", func(t *testing.T) {
		dom := loadHostile(t, bin, summary)
		checkHostileDOM(t, dom, "chart_stores")
		if !strings.Contains(dom, "__f__store&lt;/script&gt;&lt;script&gt;") {
			t.Errorf("the store is not shown as text in the stand's table")
		}
	})
	t.Run("compare and check print no control", func(t *testing.T) {
		for _, args := range [][]string{{"compare", a, b}, {"check", filepath.Join(a, "history.jsonl")}, {"check", "--faults", filepath.Join(a, "faults.jsonl"), filepath.Join(a, "history.jsonl")}} {
			code, stdout, stderr := invoke(t, args...)
			if code != 0 && code != 1 {
				t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
			}
			if c := controls(stdout + stderr); c != "" {
				t.Errorf("%v printed the control %q:\n%.3000q", args, c, stdout)
			}
			if !strings.Contains(stdout, `\x1b[2J\x1b]0;pwned\a\u202e\u009b`) {
				t.Errorf("%v does not show the hostile strings escaped:\n%.3000q", args, stdout)
			}
		}
	})
}

// checkHostileDOM holds what a page of a poisoned run directory must show: the probe
// ran, no script of the run directory ran, no script error, the charts drawn, and
// tooltips shown holding the strings as text, with no element of theirs.
func checkHostileDOM(t *testing.T, dom, wantCharts string) {
	t.Helper()
	if v, _ := attr(dom, "data-probe"); v != "done" {
		t.Fatalf("the probe did not finish: the page's scripts broke (%s)", regexp.MustCompile(`<div id="render-check"[^>]*>`).FindString(dom))
	}
	if v, ok := attr(dom, "data-pwned"); !ok || v != "" {
		t.Errorf("scripts from the run directory ran, for fields: %q", v)
	}
	if v, _ := attr(dom, "data-errors"); v != "" {
		t.Errorf("script errors: %s", v)
	}
	if v, _ := attr(dom, "data-charts"); v != wantCharts {
		t.Errorf("charts drawn: %q, want %q", v, wantCharts)
	}
	if n, _ := attr(dom, "data-tips"); n == "" || n == "0" {
		t.Errorf("no tooltip was shown")
	}
	if n, _ := attr(dom, "data-tip-tags"); n != "0" {
		t.Errorf("tooltips hold %s elements of their own (markup from the run directory)", n)
	}
	if tip, _ := attr(dom, "data-tip-text"); !strings.Contains(tip, "&lt;/script&gt;") {
		t.Errorf("no tooltip shows a hostile string as text: %.500q", tip)
	}
	if regexp.MustCompile(`(?i)<img[^>]*src="x"`).MatchString(dom) {
		t.Errorf("an <img> from the run directory is in the page")
	}
}
