package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/catalog"
	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/workloads"
)

const suiteHelp = `indoubt suite: run the cases of a suite file in order, each a run with its
expectation (a verdict, and bounds on the figures of results.json), print a table, and
exit 0 only if every expectation held.

A case whose server cannot be launched here is skipped with a note. Under CI=true a
missing server fails its case, unless the case says optional: true (servers that need
prepared files, such as Cassandra's jars). docs/suites.md describes the file.

Usage: indoubt suite [flags] FILE.yaml

Examples:
  indoubt suite suites/smoke.yaml
  indoubt suite --junit junit.xml --github suites/smoke.yaml
  indoubt suite --shrink --shrink-budget 2m --junit junit.xml suites/smoke.yaml

With --shrink, each case whose run was invalid when it expected otherwise is shrunk
after the cases have run (indoubt shrink, within --shrink-budget each), and the one-line
indoubt run command of its smallest failing run is added to its failure: the table's FAIL
lines, the JUnit failure message and the annotations. The smallest run is kept in
RUNDIR.shrink beside the case's run directory.

Every case is validated, and --junit and --out checked, before the first case runs.
SIGINT or SIGTERM stops the case running: the table of what ran is printed and the JUnit
file written, the cases not run marked skipped (interrupted).

Exit codes: 0 every expectation held, 1 one did not, 2 interrupted (no expectation had
failed yet), 3 bad suite file or could not run.
`

// suiteFile is a suite as written in YAML. Its defaults hold run settings (the keys of
// runner.Settings); a case holds its own keys (caseOwn) and run settings.
type suiteFile struct {
	Name     string      `yaml:"name"`
	Defaults yaml.Node   `yaml:"defaults"`
	Cases    []yaml.Node `yaml:"cases"`
}

// caseOwn are the keys of a case that are not run settings: its name and expectations.
type caseOwn struct {
	Name     string            `yaml:"name"`
	Optional bool              `yaml:"optional"`
	Expect   string            `yaml:"expect"`
	Figures  map[string]string `yaml:"figures"`
}

// suiteCase is one case as written: its own keys, and its run settings by suite key
// (runner.Settings), the suite's defaults under those it does not set.
type suiteCase struct {
	caseOwn
	settings map[string]*yaml.Node
	// defaulted are the settings the case takes from the suite's defaults.
	defaulted map[string]bool
}

// readSettings reads the keys of a mapping into settings: every key must be a run
// setting, or (own non-nil) a case's own key, decoded into own.
func readSettings(n *yaml.Node, own *caseOwn, settings map[string]*yaml.Node) error {
	if n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: want a mapping of keys", n.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return fmt.Errorf("line %d: %s is given twice", k.Line, k.Value)
		}
		seen[k.Value] = true
		var err error
		switch k.Value {
		case "name", "optional", "expect", "figures":
			if own == nil {
				return fmt.Errorf("line %d: %s: a case's own key, not a default", k.Line, k.Value)
			}
			switch k.Value {
			case "name":
				err = v.Decode(&own.Name)
			case "optional":
				err = v.Decode(&own.Optional)
			case "expect":
				err = v.Decode(&own.Expect)
			case "figures":
				err = v.Decode(&own.Figures)
			}
		default:
			if s, ok := runner.SettingByKey(k.Value); !ok || s.Key == "" {
				return fmt.Errorf("line %d: field %s not found: neither a case's key nor a run setting (docs/suites.md lists them)", k.Line, k.Value)
			}
			settings[k.Value] = v
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// suiteRun is a case ready to run: its configuration and its expectations.
type suiteRun struct {
	name     string
	line     int
	cfg      runner.Config
	optional bool
	expect   checker.Verdict
	bounds   []figureBound
}

type figureBound struct {
	figure string
	bound  results.Bound
}

// caseResult is what happened to one case.
type caseResult struct {
	run     *suiteRun
	res     *results.Results
	elapsed time.Duration
	skipped string   // why it did not run
	failed  []string // expectations that did not hold, or why it could not run
	first   string   // the failure message: the verdict's first explanation when there is one
	// interrupted is set for a case that SIGINT or SIGTERM cut short or kept from
	// running: neither passed nor (unless it had already failed) failed.
	interrupted bool
}

func (c caseResult) passed() bool { return c.skipped == "" && len(c.failed) == 0 && !c.interrupted }

func suiteCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("suite", suiteHelp, stdout)
	junit := fs.String("junit", "", "write a JUnit XML report to this file")
	github := fs.Bool("github", false, "write GitHub Actions annotations (::error) for failed cases to stdout")
	out := fs.String("out", "runs", "parent directory of the run directories")
	quiet := fs.Bool("quiet", false, "no line per case on stderr while the suite runs")
	shrinkCases := fs.Bool("shrink", false, "shrink each case whose run was invalid against its expectation (indoubt shrink) and put the reproducing command in its failure")
	shrinkBudget := fs.Duration("shrink-budget", 5*time.Minute, "with --shrink: the time budget of each case's shrink")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("suite: want one suite file (see indoubt suite --help)")
	}
	// Every output is checked before the first case launches anything.
	if err := checkWritable(*junit); err != nil {
		return fmt.Errorf("suite: --junit: %v", err)
	}
	if err := checkDirWritable(*out); err != nil {
		return fmt.Errorf("suite: --out: %v", err)
	}
	if *shrinkBudget <= 0 {
		return fmt.Errorf("suite: --shrink-budget must be positive (got %v)", *shrinkBudget)
	}
	path := fs.Arg(0)
	name, runs, err := loadSuite(path)
	if err != nil {
		return err
	}
	for _, sr := range runs {
		sr.cfg.Out = *out
	}
	if err := validateCases(path, runs); err != nil {
		return err
	}
	defer shareInitdb(stderr)()
	ci := os.Getenv("CI") == "true"
	started := time.Now()
	var cases []caseResult
	for i, sr := range runs {
		if ctx.Err() != nil {
			cases = append(cases, caseResult{run: sr, interrupted: true, skipped: "interrupted: not run"})
			continue
		}
		if !*quiet {
			console.Fprintf(stderr, "[%d/%d] %s ...\n", i+1, len(runs), sr.name)
		}
		cases = append(cases, runCase(ctx, sr, ci))
		if ctx.Err() != nil && i+1 < len(runs) {
			fmt.Fprintf(stderr, "suite: interrupted after %d of %d cases\n", i+1, len(runs))
		}
	}
	if *shrinkCases {
		shrinkFailedCases(ctx, cases, *shrinkBudget, stderr, *quiet)
	}
	writeSuiteTable(stdout, name, cases, time.Since(started))
	var ran []*results.Results
	for _, r := range cases {
		if r.res != nil {
			ran = append(ran, r.res)
		}
	}
	if len(ran) > 1 {
		safe := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(name, "_")
		path := filepath.Join(*out, "summary-"+safe+"-"+started.Format("20060102-150405")+".html")
		if err := report.WriteSummaryHTML(path, ran); err != nil {
			return fmt.Errorf("suite: %v", err)
		}
		console.Fprintf(stdout, "summary: %s\n", path)
	}
	if *github {
		writeAnnotations(stdout, path, name, cases)
	}
	if *junit != "" {
		var buf bytes.Buffer
		if err := report.WriteJUnit(&buf, name, started, junitCases(cases)); err != nil {
			return fmt.Errorf("suite: junit: %v", err)
		}
		if err := os.WriteFile(*junit, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("suite: %v", err)
		}
	}
	for _, r := range cases {
		if len(r.failed) > 0 {
			return verdictExit{exitInvalid}
		}
	}
	if ctx.Err() != nil {
		return verdictExit{exitUnknown}
	}
	return nil
}

// validateCases checks every case's configuration as its run would, before the first
// one starts: a bad case on line 90 must not wait behind a server launched for line 10.
// A case whose server cannot be launched here is left to runCase, which skips it.
func validateCases(path string, runs []*suiteRun) error {
	for _, sr := range runs {
		err := sr.cfg.Validate()
		if err == nil || errors.Is(err, runner.ErrUnavailable) || caseAvailable(sr.cfg) != nil {
			continue // a case that cannot run here is skipped with its note (runCase)
		}
		return suiteError(path, sr.line, "case %q: %v", sr.name, keyError(err))
	}
	return nil
}

// keyError says a runner.FieldError in the suite's words: the key of its field
// (runner.Settings).
func keyError(err error) error {
	var fe *runner.FieldError
	if errors.As(err, &fe) {
		if st, ok := runner.SettingByField(fe.Field); ok && st.Key != "" {
			return fmt.Errorf("%s: %s", st.Key, fe.Text(func(f string) string {
				if st, ok := runner.SettingByField(f); ok && st.Key != "" {
					return st.Key + ":"
				}
				return "Config." + f
			}))
		}
		return fe
	}
	return err
}

var yamlLine = regexp.MustCompile(`line (\d+): (.*)`)

// suiteError is a bad suite file: one line naming the file and the line.
func suiteError(path string, line int, format string, a ...any) error {
	if line > 0 {
		return fmt.Errorf("suite: %s:%d: %s", path, line, fmt.Sprintf(format, a...))
	}
	return fmt.Errorf("suite: %s: %s", path, fmt.Sprintf(format, a...))
}

// yamlError turns a YAML decoding error into a suite error on the line it names.
func yamlError(path string, err error) error {
	var te *yaml.TypeError
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return suiteError(path, n, "%s", m[2])
	}
	return suiteError(path, 0, "%s", strings.TrimPrefix(msg, "yaml: "))
}

// strictDecode decodes a node refusing keys the struct does not have: a misspelt key
// would otherwise be a silently ignored expectation.
func strictDecode(n *yaml.Node, v any) error {
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		// Re-marshalling renumbers lines from 1: shift them back onto the file.
		var te *yaml.TypeError
		if errors.As(err, &te) {
			for i, e := range te.Errors {
				if m := yamlLine.FindStringSubmatch(e); m != nil {
					k, _ := strconv.Atoi(m[1])
					te.Errors[i] = fmt.Sprintf("line %d: %s", k+n.Line-1, m[2])
				}
			}
		}
		return err
	}
	return nil
}

// Bounds of a suite file. A suite is written by hand and each case is a run of its own
// (seconds to minutes): the suites in suites/ are a few kB. A megabyte holds thousands of
// cases, hours of runs; a file past it is refused before YAML sees it, so that a runaway
// file costs neither minutes nor gigabytes. Each case is decoded on its own (strictly,
// for its line numbers): more than maxSuiteCases (days of runs) is refused before the
// first, which bounds that work too. A name is a line of the table and of the JUnit file: one longer than maxSuiteName is
// refused without being echoed.
const (
	maxSuiteBytes = 1 << 20
	maxSuiteName  = 200
	maxSuiteCases = 1000
)

// readSuiteFile reads at most maxSuiteBytes of path, refusing a longer file.
func readSuiteFile(path string) ([]byte, error) {
	f, err := openNoWait(path)
	if err != nil {
		return nil, fmt.Errorf("suite: %v", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSuiteBytes+1))
	if err != nil {
		return nil, fmt.Errorf("suite: %v", err)
	}
	if len(b) > maxSuiteBytes {
		return nil, suiteError(path, 0, "more than %d bytes (1 MiB), the most a suite file may hold", maxSuiteBytes)
	}
	return b, nil
}

// nameError says a name is too long without echoing it.
func nameError(what, name string) error {
	if len(name) > maxSuiteName {
		return fmt.Errorf("%s is %d bytes long, at most %d", what, len(name), maxSuiteName)
	}
	return nil
}

// loadSuite reads and validates a suite file. Every error names the file and the line.
func loadSuite(path string) (string, []*suiteRun, error) {
	b, err := readSuiteFile(path)
	if err != nil {
		return "", nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(b, &root); err != nil {
		return "", nil, yamlError(path, err)
	}
	if len(root.Content) == 0 {
		return "", nil, suiteError(path, 0, "empty suite file")
	}
	if n := casesNode(root.Content[0]); n != nil && len(n.Content) > maxSuiteCases {
		return "", nil, suiteError(path, n.Line, "%d cases, more than the %d a suite may hold", len(n.Content), maxSuiteCases)
	}
	var sf suiteFile
	if err := strictDecode(root.Content[0], &sf); err != nil {
		return "", nil, yamlError(path, err)
	}
	if err := nameError("the suite's name", sf.Name); err != nil {
		return "", nil, suiteError(path, root.Content[0].Line, "%v", err)
	}
	if sf.Name == "" {
		sf.Name = strings.TrimSuffix(strings.TrimSuffix(baseName(path), ".yaml"), ".yml")
	}
	if len(sf.Cases) == 0 {
		return "", nil, suiteError(path, root.Content[0].Line, "no cases (want a list under cases:)")
	}
	defaults := map[string]*yaml.Node{}
	if err := readSettings(&sf.Defaults, nil, defaults); err != nil {
		return "", nil, yamlError(path, err)
	}
	seen := map[string]int{}
	var runs []*suiteRun
	for i := range sf.Cases {
		n := &sf.Cases[i]
		c := suiteCase{settings: map[string]*yaml.Node{}, defaulted: map[string]bool{}}
		for k, v := range defaults {
			c.settings[k], c.defaulted[k] = v, true
		}
		own := map[string]*yaml.Node{}
		if err := readSettings(n, &c.caseOwn, own); err != nil {
			return "", nil, yamlError(path, err)
		}
		for k, v := range own {
			c.settings[k], c.defaulted[k] = v, false
		}
		if err := nameError("the case's name", c.Name); err != nil {
			return "", nil, suiteError(path, n.Line, "%v", err)
		}
		sr, err := buildCase(c, n.Line)
		if err != nil {
			return "", nil, suiteError(path, n.Line, "case %q: %v", c.Name, err)
		}
		if prev, dup := seen[sr.name]; dup {
			return "", nil, suiteError(path, n.Line, "case %q: the name is used already on line %d", sr.name, prev)
		}
		seen[sr.name] = n.Line
		runs = append(runs, sr)
	}
	return sf.Name, runs, nil
}

// casesNode is the value of the document's cases: key, or nil.
func casesNode(doc *yaml.Node) *yaml.Node {
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "cases" {
			return doc.Content[i+1]
		}
	}
	return nil
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// buildCase checks a case and turns it into a run configuration: its settings are read
// as indoubt run reads its flags (runner.Settings), from the same defaults, within the
// same bounds. A default of the suite that does not apply to the case's workload (the
// budget's balance for a counter case) is left out; a case's own is refused.
func buildCase(c suiteCase, line int) (*suiteRun, error) {
	if c.Name == "" {
		return nil, fmt.Errorf("a case needs a name")
	}
	sr := &suiteRun{name: c.Name, line: line, optional: c.Optional}
	wname := string(workloads.Budget)
	if n, ok := c.settings["workload"]; ok {
		wname = n.Value
	}
	w, err := catalog.Parse(wname)
	if err != nil {
		return nil, err
	}
	given := map[string][]string{}
	for _, st := range runner.Settings {
		n, ok := c.settings[st.Key]
		if !ok || st.Key == "" || (!st.AppliesTo(w) && c.defaulted[st.Key]) {
			continue
		}
		if given[st.Field], err = scalars(n, st); err != nil {
			return nil, err
		}
	}
	if sr.cfg, err = runner.Configure(given); err != nil {
		return nil, keyError(err)
	}
	cfg := &sr.cfg
	if cfg.Store == "" {
		return nil, fmt.Errorf("a case needs a store (one of %s)", choice.List(runner.StoreNames()))
	}
	if !slices.Contains(runner.StoreNames(), cfg.Store) {
		return nil, fmt.Errorf("unknown store %q (want one of %s)", cfg.Store, choice.List(runner.StoreNames()))
	}
	if !runner.Supports(cfg.Store, w) {
		return nil, fmt.Errorf("store %s has no workload %s", cfg.Store, w)
	}
	switch c.Expect {
	case "valid":
		sr.expect = checker.Valid
	case "invalid":
		sr.expect = checker.Invalid
	case "unknown":
		sr.expect = checker.Unknown
	default:
		return nil, fmt.Errorf("expect %q: want valid, invalid or unknown", c.Expect)
	}
	names := make([]string, 0, len(c.Figures))
	for k := range c.Figures {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if !results.IsFigure(k) {
			return nil, fmt.Errorf("unknown figure %q (see docs/suites.md for the names)", k)
		}
		b, err := results.ParseBound(c.Figures[k])
		if err != nil {
			return nil, fmt.Errorf("figure %s: %v", k, err)
		}
		sr.bounds = append(sr.bounds, figureBound{k, b})
	}
	return sr, nil
}

// scalars are the values of a setting as written: one scalar, or a list of them for a
// repeatable setting (faults, dsn).
func scalars(n *yaml.Node, st runner.Setting) ([]string, error) {
	switch {
	case n.Kind == yaml.ScalarNode:
		return []string{n.Value}, nil
	case n.Kind == yaml.SequenceNode && st.Kind == runner.KindList:
		out := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("%s: line %d: want a list of values", st.Key, e.Line)
			}
			out = append(out, e.Value)
		}
		return out, nil
	case st.Kind == runner.KindList:
		return nil, fmt.Errorf("%s: want a value or a list of them", st.Key)
	}
	return nil, fmt.Errorf("%s: want one value", st.Key)
}

// caseAvailable says why a case cannot run on this machine: its server cannot be
// launched here, or its partitions need network namespaces this machine cannot make
// (root and nft).
func caseAvailable(cfg runner.Config) error {
	if cfg.DSN == "" && len(cfg.DSNs) == 0 {
		if err := runner.Available(cfg.Store); err != nil {
			return fmt.Errorf("%s cannot be launched here: %v", cfg.Store, err)
		}
	}
	if len(cfg.Faults.BetweenNodes()) > 0 || cfg.Network != "" {
		if err := netns.Available(); err != nil {
			return fmt.Errorf("the case's network cannot be made here: %v", err)
		}
	}
	return nil
}

// runCase runs one case and judges its expectations. A server that cannot be launched
// here skips the case with a note, or fails it under CI unless the case is optional.
func runCase(ctx context.Context, sr *suiteRun, ci bool) caseResult {
	cr := caseResult{run: sr}
	if err := caseAvailable(sr.cfg); err != nil {
		note := err.Error()
		if ci && !sr.optional {
			cr.failed = []string{note + " (a required server under CI=true)"}
			cr.first = cr.failed[0]
			return cr
		}
		cr.skipped = note
		return cr
	}
	t0 := time.Now()
	res, err := runner.Run(ctx, sr.cfg)
	cr.elapsed = time.Since(t0)
	if err != nil && ctx.Err() != nil {
		cr.interrupted, cr.skipped = true, "interrupted before its run had a verdict"
		return cr
	}
	if err != nil {
		cr.failed = []string{"could not run: " + oneLine(err.Error())}
		cr.first = cr.failed[0]
		return cr
	}
	cr.res = res
	if res.Interrupted && !(res.Verdict == checker.Invalid && sr.expect != checker.Invalid) {
		// Cut short: what it recorded says nothing of what the whole case would have,
		// unless it already holds an anomaly the case did not expect.
		cr.interrupted = true
		cr.skipped = fmt.Sprintf("interrupted after %.1fs (verdict so far: %s)", cr.elapsed.Seconds(), res.Verdict)
		return cr
	}
	if res.Verdict != sr.expect {
		cr.failed = append(cr.failed, fmt.Sprintf("verdict %s, expected %s", res.Verdict, sr.expect))
	}
	for _, fb := range sr.bounds {
		v, ok := results.Figure(res, fb.figure)
		switch {
		case !ok:
			cr.failed = append(cr.failed, fmt.Sprintf("%s: this run has no such figure", fb.figure))
		case !fb.bound.Holds(v):
			cr.failed = append(cr.failed, fmt.Sprintf("%s = %s, expected %s", fb.figure, results.FormatFigure(v), fb.bound.Text))
		}
	}
	// The failure message is the verdict's first line; when the verdict was the expected
	// one and a figure was not, the figure comes first.
	switch {
	case len(cr.failed) == 0:
	case res.Verdict != sr.expect:
		cr.first = report.Headline(res)
	default:
		cr.first = cr.failed[0] + "; " + report.Headline(res)
	}
	return cr
}

func writeSuiteTable(w io.Writer, name string, cases []caseResult, took time.Duration) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tstore\texpect\tgot\tfigures\tresult\ttime\trun directory")
	var pass, fail, skip int
	for _, r := range cases {
		got, status, dir := "-", "pass", "-"
		switch {
		case r.interrupted:
			status = "interrupted"
			skip++
		case r.skipped != "":
			status = "skip"
			skip++
		case len(r.failed) > 0:
			status = "FAIL"
			fail++
		default:
			pass++
		}
		if r.res != nil {
			got, dir = r.res.Verdict.String(), r.res.RunDir
		}
		var figs []string
		for _, fb := range r.run.bounds {
			v := "-"
			if r.res != nil {
				if f, ok := results.Figure(r.res, fb.figure); ok {
					v = results.FormatFigure(f)
				}
			}
			figs = append(figs, fmt.Sprintf("%s=%s (%s)", fb.figure, v, fb.bound.Text))
		}
		if len(figs) == 0 {
			figs = []string{"-"}
		}
		console.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\t%s\n", r.run.name, r.run.cfg.Store, r.run.expect, got,
			strings.Join(figs, " "), status, r.elapsed.Seconds(), dir)
	}
	tw.Flush()
	for _, r := range cases {
		if r.skipped != "" && r.interrupted {
			console.Fprintf(w, "interrupted %s: %s\n", r.run.name, r.skipped)
		} else if r.skipped != "" {
			console.Fprintf(w, "skipped %s: %s\n", r.run.name, r.skipped)
		}
		for _, f := range r.failed {
			console.Fprintf(w, "FAIL %s: %s\n", r.run.name, f)
		}
	}
	console.Fprintf(w, "suite %s: %d passed, %d failed, %d skipped in %.1fs\n", name, pass, fail, skip, took.Seconds())
}

// ghEscape escapes a workflow command's message; ghProp also a property value.
func ghEscape(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func ghProp(s string) string {
	return strings.NewReplacer(":", "%3A", ",", "%2C").Replace(ghEscape(s))
}

// writeAnnotations writes a GitHub Actions error annotation per failed case, on the
// case's line of the suite file, and a notice per skipped case.
func writeAnnotations(w io.Writer, path, suite string, cases []caseResult) {
	for _, r := range cases {
		loc := fmt.Sprintf("file=%s,line=%d,", ghProp(path), r.run.line)
		switch {
		case len(r.failed) > 0:
			msg := strings.Join(r.failed, "; ")
			if r.first != "" && r.first != r.failed[0] {
				msg += "\n" + r.first
			}
			if r.res != nil {
				msg += "\nrun directory: " + r.res.RunDir
			}
			console.Fprintf(w, "::error %stitle=%s::%s\n", loc, ghProp("indoubt suite "+suite+": "+r.run.name), ghEscape(msg))
		case r.skipped != "":
			console.Fprintf(w, "::notice %stitle=%s::%s\n", loc, ghProp("skipped "+r.run.name), ghEscape(r.skipped))
		}
	}
}

func junitCases(cases []caseResult) []report.JUnitCase {
	var out []report.JUnitCase
	for _, r := range cases {
		jc := report.JUnitCase{Name: r.run.name, Time: r.elapsed, Skipped: r.skipped}
		if len(r.failed) > 0 {
			jc.Failure, jc.Detail = r.first, strings.Join(r.failed, "\n")
		}
		if r.res != nil {
			jc.Out = fmt.Sprintf("run directory: %s\nverdict: %s: %s\n", r.res.RunDir, r.res.Verdict, r.res.Summary)
		}
		out = append(out, jc)
	}
	return out
}
