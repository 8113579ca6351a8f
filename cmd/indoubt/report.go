package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

const reportHelp = `indoubt report: re-render report.html from recorded run directories (their
results.json, history.jsonl and faults.jsonl), and summary.html for several runs.

Usage: indoubt report [flags] RUNDIR...

Examples:
  indoubt report runs/20261201-021055.177-budget-postgres-commit-cut-naive
  indoubt report --summary runs/stand.html runs/*-budget-*

Every run directory (its results.json and history.jsonl) is read and every output path
checked before any page is rendered. Each page is written whole or not at all: on a
disk without room it is left as it was.

Exit codes: 0 rendered, 3 a run directory could not be read or an output written.
`

func reportCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", reportHelp, stdout)
	summary := fs.String("summary", "", "where to write summary.html for several runs (default: summary.html in the first run's parent)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("report: want one or more run directories (see indoubt report --help)")
	}
	// Every run directory is read, and every output checked, before any page is
	// rendered: a bad last argument must not leave the first ones re-rendered.
	var all []*results.Results
	for _, dir := range fs.Args() {
		r, err := readResults(dir)
		if err != nil {
			return fmt.Errorf("report: %v", err)
		}
		if err := checkRunFiles(dir); err != nil {
			return fmt.Errorf("report: %v", err)
		}
		if err := checkReplaceable(filepath.Join(dir, "report.html")); err != nil {
			return fmt.Errorf("report: %v", err)
		}
		all = append(all, r)
	}
	summaryPath := *summary
	// The default summary.html sits beside the runs, in a directory that may have come
	// with them: a link there is replaced, not followed. --summary is the user's own
	// path, written as given (a link followed, a device written in place).
	beside := summaryPath == "" && len(all) > 1
	if beside {
		summaryPath = filepath.Join(filepath.Dir(filepath.Clean(fs.Arg(0))), "summary.html")
	}
	if len(all) > 1 {
		check := checkWritable
		if beside {
			check = checkReplaceable
		}
		if err := check(summaryPath); err != nil {
			return fmt.Errorf("report: --summary: %v", err)
		}
	}
	for i, r := range all {
		if ctx.Err() != nil {
			return fmt.Errorf("report: %w", ctx.Err())
		}
		r, why := judged(ctx, fs.Arg(i), r)
		if ctx.Err() != nil {
			// The signal ended the judgement: nothing more is drawn.
			return fmt.Errorf("report: %s: %w", fs.Arg(i), ctx.Err())
		}
		if why != "" {
			console.Fprintf(stderr, "indoubt: warning: %s: %s\n", fs.Arg(i), why)
		}
		all[i] = r
		path := filepath.Join(fs.Arg(i), "report.html")
		if err := report.WriteHTML(path, r); err != nil {
			return fmt.Errorf("report: %s: %v", fs.Arg(i), err)
		}
		console.Fprintf(stdout, "%s\n", path)
	}
	if len(all) > 1 {
		if beside {
			if err := removeLink(summaryPath); err != nil {
				return fmt.Errorf("report: %v", err)
			}
		}
		if err := report.WriteSummaryHTML(summaryPath, all); err != nil {
			return fmt.Errorf("report: %v", err)
		}
		console.Fprintf(stdout, "%s\n", summaryPath)
	}
	return nil
}

// readResults reads a run directory's results.json; the run directory recorded in it is
// where it is now.
func readResults(dir string) (*results.Results, error) {
	r, err := rundir.ReadResults(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s is not a run directory: %v", dir, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %v", dir, err)
	}
	r.RunDir = dir
	return r, nil
}
