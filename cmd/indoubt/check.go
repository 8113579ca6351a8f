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
	var res checker.Result
	var err error
	switch *format {
	case "indoubt":
		res, err = checkIndoubt(ctx, path, *partial, opt)
		if err != nil {
			return err
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
	if *format != "indoubt" {
		if res, err = checker.Check(ctx, h, ops, opt); err != nil {
			return fmt.Errorf("check %s: %v", path, err)
		}
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

// checkIndoubt checks an indoubt history as it reads it, so that a long history need not
// fit in memory (checker.CheckStream). Its errors come in the order reading the whole
// file first gave them: the file's own (a bad line anywhere), then a history without
// operations, then the checker's.
func checkIndoubt(ctx context.Context, path string, partial bool, opt checker.Options) (checker.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return checker.Result{}, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	rd, err := histories.NewReader(f, path)
	if err != nil {
		return checker.Result{}, err
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
	res, err := checker.CheckStream(ctx, rd.Header(), next, opt)
	if err != nil && readErr == nil {
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
		return checker.Result{}, readErr
	case !clients && (err != nil || ctx.Err() == nil):
		return checker.Result{}, fmt.Errorf("check %s: the history has a header but no operations: nothing to check", path)
	case err != nil:
		return checker.Result{}, fmt.Errorf("check %s: %v", path, err)
	}
	return res, nil
}
