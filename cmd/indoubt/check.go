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

Usage: indoubt check [flags] FILE

Examples:
  indoubt check runs/20261130-120000.000-budget-postgres/history.jsonl
  indoubt check --format jepsen-log --model cas-register etcd_000.log
  indoubt check --format jepsen-edn --model cas-register --initial 0 history.edn
  indoubt check --format jepsen-log --skip-bad-lines --model cas-register jepsen.log
  indoubt check --format jepsen-edn --fail-means compare-failed --model cas-register h.edn

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

	var h *histories.Header
	var ops []histories.Op
	switch *format {
	case "indoubt":
		var err error
		if h, ops, err = histories.ReadFile(path, *partial); err != nil {
			return err
		}
		if !slices.ContainsFunc(ops, histories.Op.IsClient) {
			return fmt.Errorf("check %s: the history has a header but no operations: nothing to check", path)
		}
	case "jepsen-edn", "jepsen-log":
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("open history: %w", err)
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
	res, err := checker.Check(ctx, h, ops, opt)
	if err != nil && res.Verdict != 0 {
		// Only the visualization failed: the verdict stands, with a warning.
		fmt.Fprintf(stderr, "indoubt: warning: %s\n", oneLine(err.Error()))
		err = nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %v", path, err)
	}
	if *jsonOut {
		b, _ := json.MarshalIndent(res, "", "  ")
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
		}
	}
	if code := res.Verdict.ExitCode(); code != 0 {
		return verdictExit{code}
	}
	return nil
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
