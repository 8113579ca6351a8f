package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// runDirFlags are the flags `indoubt check RUNDIR` takes: the run directory says the
// rest (its history's header, its faults.jsonl, its check.json).
var runDirFlags = []string{"json", "timeout", "max-memory", "html", "max-anomalies"}

// isRunDir reports whether path is a run directory: a directory holding history.jsonl.
func isRunDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// runDirArgs checks the flags given with a run directory; set names the flags given.
func runDirArgs(a *checkArgs, set map[string]bool) error {
	for name := range set {
		if !slices.Contains(runDirFlags, name) {
			return fmt.Errorf("check: --%s is not for a run directory, which says it itself; give %s for it", name, filepath.Join(a.path, rundir.HistoryFile))
		}
	}
	fi, err := os.Stat(filepath.Join(a.path, rundir.HistoryFile))
	if err != nil {
		return fmt.Errorf("check: %s is a directory without %s: not a run directory", a.path, rundir.HistoryFile)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("check: %s: %s is %s, not a regular file", a.path, rundir.HistoryFile, rundir.FileKind(fi.Mode()))
	}
	a.dir, a.timeoutSet, a.memorySet = a.path, set["timeout"], set["max-memory"]
	return nil
}

// flagsSet names the flags given on the command line.
func flagsSet(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// checkRunDir judges a run directory from its files alone (package judge), as the run
// judged it: under the limits its check.json names, unless --timeout or --max-memory
// say otherwise (and then it says so). It prints the verdict, the anomalies, the
// proxy's ground truth and the final state; with --json, the run's results.json with
// every section the judge decides computed again.
func (a checkArgs) checkRunDir(ctx context.Context, stdout, stderr io.Writer) error {
	c, ok, err := rundir.ReadCheck(a.dir)
	if err != nil {
		return fmt.Errorf("check: %v", err)
	}
	limits := rundir.Limits{Timeout: a.opt.Timeout, MaxMemory: a.opt.MaxMemory}
	if ok {
		limits = c.Limits
		if a.timeoutSet {
			limits.Timeout = a.opt.Timeout
		}
		if a.memorySet {
			limits.MaxMemory = a.opt.MaxMemory
		}
	}
	j, err := judge.Dir(ctx, a.dir, judge.Options{Limits: &limits, VisualizePath: a.opt.VisualizePath})
	if err != nil {
		return fmt.Errorf("check %s: %v", a.dir, err)
	}
	if j.CheckErr != nil {
		if fi, serr := os.Stat(a.opt.VisualizePath); serr == nil && fi.Mode().IsRegular() {
			os.Remove(a.opt.VisualizePath)
		}
		console.Fprintf(stderr, "indoubt: warning: %s\n", oneLine(j.CheckErr.Error()))
	}
	if other, ok := j.OtherLimits(); ok {
		console.Fprintf(stderr, "indoubt: %s: the verdict may differ from the run's\n", other)
	}
	res := j.Results
	if run, err := rundir.ReadResults(a.dir); err == nil {
		res = judge.Onto(run, res)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("check: %v", err)
	} else {
		res.RunDir = a.dir
	}
	res.Trim(cmp.Or(a.maxAnomalies, rundir.MaxAnomalies(a.dir)))
	if a.jsonOut {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", console.JSON(b))
	} else {
		a.printRunDir(stdout, j, res)
	}
	if code := res.Verdict.ExitCode(); code != 0 {
		return verdictExit{code}
	}
	return nil
}

// printRunDir prints a run directory's judgement: the verdict line, the anomalies with
// what the proxy says of their operations, the ground truth, and the final state.
func (a checkArgs) printRunDir(w io.Writer, j *judge.Judgement, res *results.Results) {
	var truth *groundTruth
	if res.Evidence != nil {
		truth = &groundTruth{File: filepath.Join(a.dir, rundir.FaultsFile), Evidence: res.Evidence, Unjoined: evidence.Unjoined(j.Events, j.Spans, j.Ops)}
		if res.Faults.Commits != nil {
			truth.Commits = *res.Faults.Commits
		}
	}
	checked := j.Checked
	checked.Anomalies = res.Anomalies
	a.path = a.dir
	a.maxAnomalies = -1 // Trim bounded res.Anomalies already
	a.printCheck(w, checked, j.Ops, truth)
	for _, n := range report.IsolationNotes(res, j.Ops) {
		console.Fprintf(w, "  %s\n", n)
	}
	if res.AnomalyTotal() > 0 {
		console.Fprintf(w, "  anomalies by kind: %s\n", report.KindCounts(res))
		if n := len(res.Anomalies); n < res.AnomalyTotal() {
			console.Fprintf(w, "  (%d of %d listed; --max-anomalies -1 lists them all)\n", n, res.AnomalyTotal())
		}
	}
	for _, l := range res.LostWrites {
		console.Fprintf(w, "  lost: %s\n", l.Explanation)
	}
	if res.Leaders != nil {
		console.Fprintf(w, "  %s\n", res.Leaders)
	}
	if res.Final == nil {
		return
	}
	if r := res.Final.Figures().Reconciliation; r != nil {
		after := "unread"
		if r.After != nil {
			after = fmt.Sprint(*r.After)
		}
		line := fmt.Sprintf("final state: before %d, after %s, acknowledged %d, lost %d, extra %d", r.Before, after, r.Acknowledged, r.Lost, r.Extra)
		if r.Cause != "" {
			line += ": " + r.Cause
		}
		console.Fprintf(w, "%s\n", line)
	}
}
