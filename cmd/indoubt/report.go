package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
)

const reportHelp = `indoubt report: re-render report.html from recorded run directories (their
results.json, history.jsonl and faults.jsonl), and summary.html for several runs.

Usage: indoubt report [flags] RUNDIR...

Examples:
  indoubt report runs/20261201-021055.177-budget-postgres-commit-cut-naive
  indoubt report --summary runs/stand.html runs/*-budget-*

Each page is written whole or not at all: on a disk without room it is left as it was.

Exit codes: 0 rendered, 3 a run directory could not be read or a page could not be
written.
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
	var all []*results.Results
	for _, dir := range fs.Args() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r, err := readResults(dir)
		if err != nil {
			return err
		}
		path := filepath.Join(dir, "report.html")
		if err := report.WriteHTML(path, r); err != nil {
			return fmt.Errorf("report: %s: %v", dir, err)
		}
		console.Fprintf(stdout, "%s\n", path)
		all = append(all, r)
	}
	if len(all) > 1 {
		path := *summary
		if path == "" {
			path = filepath.Join(filepath.Dir(filepath.Clean(fs.Arg(0))), "summary.html")
		}
		if err := report.WriteSummaryHTML(path, all); err != nil {
			return fmt.Errorf("report: %v", err)
		}
		console.Fprintf(stdout, "%s\n", path)
	}
	return nil
}

// readResults reads a run directory's results.json; the run directory recorded in it is
// where it is now.
func readResults(dir string) (*results.Results, error) {
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return nil, fmt.Errorf("%s is not a run directory: %v", dir, err)
	}
	var r results.Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: results.json: %v", dir, results.JSONError(err))
	}
	r.RunDir = dir
	return &r, nil
}
