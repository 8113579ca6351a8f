package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/report"
)

const checkHelp = `indoubt check: re-check a recorded history and print the verdict.

indoubt's own histories (history.jsonl of a run directory) name their workload, model
and parameters in their header, so they need no flags. Public Jepsen histories need
--format and --model.

A file with nothing of its format in it (empty, another format, random bytes) is
refused, and so is one line that is not of the format among lines that are, unless
--skip-bad-lines says to skip them (a whole Jepsen log, with other loggers' lines).

What a failed cas means differs: for --format jepsen-edn it is Jepsen's meaning, the
operation did not take place and constrains nothing (Knossos drops it); for
jepsen-log, porcupine's etcd convention, and indoubt's own, it is "the compare did not
match". --fail-means chooses explicitly; the verdict line says which was used.

A history written by any program (schemas/history.schema.json) is checked the same
way. --faults joins the events of 'indoubt proxy --events' (or a run's faults.jsonl) to
it and prints the proxy's ground truth beside the verdict: each fault is joined to the
operation on that connection (the history's conn: the client's local address) whose
invocation..completion holds the fault's time; a fault on a connection the history
never names (a retry's) joins the operation then running, if only one was. Proxy events carry wall-clock times, so
such a history must record time in Unix nanoseconds. --final gives the final state
when the history has no final read (exactly-once, bank, budget, counter), as the JSON
value the model's read would return: {"p-1":1,...}, {"alice":10,...}, {"balance":n},
{"value":n}.

Usage: indoubt check [flags] FILE

Examples:
  indoubt check runs/20261130-120000.000-budget-postgres/history.jsonl
  indoubt check --format jepsen-log --model cas-register etcd_000.log
  indoubt check --format jepsen-edn --model cas-register --initial 0 history.edn
  indoubt check --format jepsen-log --skip-bad-lines --model cas-register jepsen.log
  indoubt check --format jepsen-edn --fail-means compare-failed --model cas-register h.edn
  indoubt check --faults faults.jsonl history.jsonl
  indoubt check --final final.json --faults faults.jsonl payments.jsonl

Exit codes: 0 valid, 1 invalid, 2 unknown (checker ran out of time), 3 could not read
the history.
`

func checkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", checkHelp, stdout)
	var (
		format  = fs.String("format", "indoubt", "history format: indoubt (JSONL), jepsen-edn, jepsen-log")
		model   = fs.String("model", "", "model, overriding the header: "+strings.Join(checker.Models, ", "))
		initial = fs.String("initial", "", "register models: initial value of every register (default: absent)")
		budget  = fs.String("budget", "", "budget model: initial balance, overriding the header")
		timeout = fs.Duration("timeout", 0, "longest the search may take; then the verdict is unknown (default: none)")
		partial = fs.Bool("partial", false, "indoubt format: accept a history cut short by a crash (drop a truncated last line)")
		viz     = fs.String("html", "", "register models: write porcupine's visualization to this file")
		jsonOut = fs.Bool("json", false, "print the result as JSON")
		skipBad = fs.Bool("skip-bad-lines", false, "Jepsen formats: skip lines (log) or values (EDN) that are not ops instead of refusing the file")
		failMns = fs.String("fail-means", "", "register models: what a failed cas means, not-applied (Jepsen; default for jepsen-edn) or compare-failed (porcupine; default otherwise)")
		faultsF = fs.String("faults", "", "the proxy's fault events (indoubt proxy --events, or a run's faults.jsonl): join them to the history and print the ground truth")
		finalF  = fs.String("final", "", "a JSON file holding the final state, for a history without a final read (exactly-once, bank, budget, counter)")
	)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("check: want one history file (see indoubt check --help)")
	}
	path := fs.Arg(0)
	if *timeout < 0 {
		return fmt.Errorf("check: --timeout must not be negative (got %v)", *timeout)
	}
	if err := checkWritable(*viz); err != nil {
		return fmt.Errorf("check: --html: %v", err)
	}
	var opt checker.Options
	opt.Model, opt.Timeout, opt.VisualizePath = *model, *timeout, *viz
	if *initial != "" && *initial != "absent" && *initial != "nil" {
		v, err := strconv.ParseInt(*initial, 10, 64)
		if err != nil {
			return fmt.Errorf("check: --initial %q is not an integer", *initial)
		}
		opt.Initial = &v
	}
	if *budget != "" {
		v, err := strconv.ParseInt(*budget, 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("check: --budget %q is not a non-negative integer", *budget)
		}
		opt.Budget = &v
	}

	// Each format is read the way the tool its histories come from reads it.
	opt.FailMeans = checker.FailCompareFailed
	if *format == "jepsen-edn" {
		opt.FailMeans = checker.FailNotApplied
	}
	if *failMns != "" {
		opt.FailMeans = checker.FailMeaning(*failMns)
		if !slices.Contains(checker.FailMeanings, opt.FailMeans) {
			return fmt.Errorf("check: unknown --fail-means %q (want one of %v)", *failMns, checker.FailMeanings)
		}
	}
	if *skipBad && *format == "indoubt" {
		return fmt.Errorf("check: --skip-bad-lines is for the Jepsen formats; an indoubt history with a bad line is damaged (--partial accepts a truncated last line)")
	}

	if *finalF != "" {
		b, err := os.ReadFile(*finalF)
		if err != nil {
			return fmt.Errorf("check: --final: %w", err)
		}
		if !json.Valid(b) {
			return fmt.Errorf("check: --final %s: not a JSON value", *finalF)
		}
		opt.Final = b
	}
	var events []evidence.FaultEvent
	var clock evidence.Clock
	if *faultsF != "" {
		f, err := os.Open(*faultsF)
		if err != nil {
			return fmt.Errorf("check: --faults: %w", err)
		}
		events, clock, err = evidence.ReadEvents(f, *faultsF)
		f.Close()
		if err != nil {
			return fmt.Errorf("check: --faults: %w", err)
		}
	}

	var h *histories.Header
	var ops []histories.Op
	var res checker.Result
	var err error
	streamed := false
	switch *format {
	case "indoubt":
		if *faultsF == "" {
			// Nothing else needs the events: check them as they are read.
			var fatal error
			if res, err, fatal = checkIndoubt(ctx, path, *partial, opt); fatal != nil {
				return fatal
			}
			streamed = true
			break
		}
		if h, ops, err = histories.ReadFile(path, *partial); err != nil {
			return err
		}
		if !slices.ContainsFunc(ops, histories.Op.IsClient) {
			return fmt.Errorf("check %s: the history has a header but no operations: nothing to check", path)
		}
	case "jepsen-edn", "jepsen-log":
		f, oerr := os.Open(path)
		if oerr != nil {
			return fmt.Errorf("open history: %w", oerr)
		}
		defer f.Close()
		jopt := histories.JepsenOptions{SkipBadLines: *skipBad}
		if *format == "jepsen-edn" {
			ops, err = histories.ReadJepsenEDN(f, path, jopt)
		} else {
			ops, err = histories.ReadJepsenLog(f, path, jopt)
		}
		if err != nil {
			return err
		}
		if opt.Model == "" {
			return fmt.Errorf("check: Jepsen histories name no model: give --model register or --model cas-register")
		}
	default:
		return fmt.Errorf("check: unknown --format %q (want indoubt, jepsen-edn or jepsen-log)", *format)
	}
	if !streamed {
		if *faultsF != "" {
			if err := evidence.CheckClock(ops, clock); err != nil {
				return fmt.Errorf("check %s: --faults %s: %v", path, *faultsF, err)
			}
		}
		res, err = checker.Check(ctx, h, ops, opt)
	}
	if err != nil && res.Verdict != 0 {
		// Only the visualization failed: the verdict stands, with a warning.
		fmt.Fprintf(stderr, "indoubt: warning: %s\n", oneLine(err.Error()))
		err = nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %v", path, err)
	}
	var truth *groundTruth
	if *faultsF != "" {
		ev, _ := evidence.Join(events, evidence.SpansFromHistory(ops, events), ops, nil, res.Verdict == checker.Invalid)
		truth = &groundTruth{Evidence: ev, Commits: evidence.Tally(events), File: *faultsF}
	}
	if *jsonOut {
		out := any(res)
		if truth != nil {
			out = struct {
				checker.Result
				GroundTruth *groundTruth `json:"ground_truth"`
			}{res, truth}
		}
		b, _ := json.MarshalIndent(out, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		checked := res.Checker
		if res.Checker == checker.RegisterModel || res.Checker == checker.CASRegisterModel {
			checked += ", a failed cas read as " + string(opt.FailMeans)
		}
		fmt.Fprintf(stdout, "%s: %s (%s): %s\n", path, res.Verdict, checked, res.Summary)
		for i, a := range res.Anomalies {
			if i == 20 {
				fmt.Fprintf(stdout, "  ... and %d more anomalies (--json lists them)\n", len(res.Anomalies)-20)
				break
			}
			fmt.Fprintf(stdout, "  %s: %s\n", a.Kind, a.Explanation)
			if truth != nil {
				for _, s := range truth.about(a, ops) {
					fmt.Fprintf(stdout, "    the proxy: %s\n", s)
				}
			}
		}
		if truth != nil {
			truth.write(stdout)
		}
	}
	if code := res.Verdict.ExitCode(); code != 0 {
		return verdictExit{code}
	}
	return nil
}

// checkIndoubt checks an indoubt history as it reads it, so that a long history need not
// fit in memory (checker.CheckStream). Its errors come in the order reading the whole
// file first gave them: the file's own (a bad line anywhere), then a history without
// operations, then the checker's. The checker's result and error are returned as
// checker.Check returns them (a visualization error comes with a verdict); fatal is
// an error of the file, to return as it is.
func checkIndoubt(ctx context.Context, path string, partial bool, opt checker.Options) (res checker.Result, err, fatal error) {
	f, err := os.Open(path)
	if err != nil {
		return checker.Result{}, nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	rd, err := histories.NewReader(f, path)
	if err != nil {
		return checker.Result{}, nil, err
	}
	rd.Partial = partial
	var readErr error
	clients := false
	next := func() (histories.Op, error) {
		op, err := rd.Next()
		if err != nil && err != io.EOF {
			readErr = err
		}
		if err == nil && op.IsClient() {
			clients = true
		}
		return op, err
	}
	res, err = checker.CheckStream(ctx, rd.Header(), next, opt)
	if err != nil && res.Verdict == 0 && readErr == nil {
		// The checker stopped early: the rest of the file is read for an error of its
		// own, which comes first.
		for {
			if _, nerr := next(); nerr != nil {
				break
			}
		}
	}
	switch {
	case readErr != nil:
		return checker.Result{}, nil, readErr
	case !clients && (err != nil || ctx.Err() == nil):
		return checker.Result{}, nil, fmt.Errorf("check %s: the history has a header but no operations: nothing to check", path)
	}
	return res, err, nil
}

// groundTruth is what the proxy's events prove about a checked history.
type groundTruth struct {
	File     string              `json:"file"`
	Commits  report.CommitCounts `json:"commits"`
	Evidence *report.Evidence    `json:"evidence"`
	shown    map[string]bool     // sentences already printed under an anomaly
}

// about returns the proxy's sentences on the operations of anomaly a: what it proves
// applied or committed twice first, then what it did to them.
func (g *groundTruth) about(a checker.Anomaly, ops []histories.Op) []string {
	ids := map[string]bool{}
	byIndex := map[int64]string{}
	for _, op := range ops {
		if op.OpID != "" {
			byIndex[op.Index] = op.OpID
		}
	}
	for _, i := range a.Ops {
		if id := byIndex[i]; id != "" {
			ids[id] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	if g.shown == nil {
		g.shown = map[string]bool{}
	}
	defer func() {
		for _, s := range out {
			g.shown[s] = true
		}
	}()
	for _, list := range [][]report.AmbiguousOp{g.Evidence.AppliedTwice, g.Evidence.CommittedTwice} {
		for _, x := range list {
			if ids[x.OpID] && !seen[x.OpID] {
				seen[x.OpID] = true
				out = append(out, x.Sentence)
			}
		}
	}
	for _, x := range g.Evidence.Ambiguous {
		if ids[x.OpID] && !seen[x.OpID] {
			out = append(out, x.Sentence)
		}
	}
	return out
}

// write prints the ground truth after the verdict.
func (g *groundTruth) write(w io.Writer) {
	e := g.Evidence
	fmt.Fprintf(w, "ground truth (%s): %d fault events, %d joined to operations of the history\n", g.File, e.Events, e.Joined)
	fmt.Fprintf(w, "  commit faults: %s\n", g.Commits)
	g.list(w, "applied twice", "operations the proxy proves committed, that the client then applied again", e.AppliedTwice)
	g.list(w, "committed twice", "operations whose first commit's reply does not show what it changed", e.CommittedTwice)
	for _, d := range e.Disagreements {
		fmt.Fprintf(w, "  ground truth vs checker: %s\n", d)
	}
}

// list prints one list of the ground truth, leaving out the sentences already printed
// under an anomaly.
func (g *groundTruth) list(w io.Writer, name, what string, ops []report.AmbiguousOp) {
	if len(ops) == 0 {
		return
	}
	var rest []string
	for _, a := range ops {
		if !g.shown[a.Sentence] {
			rest = append(rest, a.Sentence)
		}
	}
	shown := ""
	if n := len(ops) - len(rest); n > 0 {
		shown = fmt.Sprintf(" (%d shown above)", n)
	}
	fmt.Fprintf(w, "  %s: %d %s%s\n", name, len(ops), what, shown)
	for i, s := range rest {
		if i == 20 {
			fmt.Fprintf(w, "    ... and %d more (--json lists them)\n", len(rest)-20)
			break
		}
		fmt.Fprintf(w, "    %s\n", s)
	}
}

// checkWritable refuses an output path that cannot be written (no such directory, a
// directory, no permission) before a long check runs, so that a typo costs nothing.
// An empty path is no output. A file it creates to find out is removed again.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	f.Close()
	if os.IsNotExist(statErr) {
		os.Remove(path)
	}
	return nil
}
