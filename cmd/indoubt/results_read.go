package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

// cut is s cut at most bytes.
func cut(s string, most int) string {
	if len(s) > most {
		s = s[:most] + "..."
	}
	return s
}

// checkReplaceable errs when path cannot be written by atomicfile.Replace: a directory,
// or a directory that a new file cannot be made in. It follows no link and creates
// nothing at path (a report.html that a run directory links elsewhere is replaced, not
// written through).
func checkReplaceable(path string) error {
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() && fi.Mode()&os.ModeSymlink == 0 {
		return fmt.Errorf("%s is %s, not a regular file", path, rundir.FileKind(fi.Mode()))
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	f.Close()
	return os.Remove(f.Name())
}

// checkRunFiles errs unless dir's history.jsonl is a regular file, and its faults.jsonl
// too when there is one: a FIFO or a device in their place would block the report
// forever, or never end.
func checkRunFiles(dir string) error {
	for _, name := range []string{"history.jsonl", "faults.jsonl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		switch {
		case err != nil && name == "history.jsonl":
			return fmt.Errorf("%s has no history.jsonl to draw the report from: %v", dir, err)
		case err != nil:
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s: %s is %s, not a regular file", dir, name, rundir.FileKind(fi.Mode()))
		}
	}
	return nil
}

// rejudgeLimits bound the judgement report and compare make of a run directory from
// elsewhere, whatever its check.json asks.
var rejudgeLimits = rundir.Limits{Timeout: 20 * time.Second, MaxMemory: 1 << 30}

// judged returns what report and compare render of run directory dir, whose
// results.json r says: r with every section the judge decides computed again from the
// directory's files (package judge), so a results.json that says valid over a history
// with a duplicate is not believed. The sentence, when not empty, is a warning: the
// judgement differs from r's verdict, or could not be made (then r is rendered as it
// is, and the sentence says it is unconfirmed). The judge runs within rejudgeLimits, or
// the run's own tighter ones.
func judged(ctx context.Context, dir string, r *results.Results) (*results.Results, string) {
	limits := rejudgeLimits
	if c, ok, err := rundir.ReadCheck(dir); err == nil && ok {
		if c.Limits.Timeout > 0 && c.Limits.Timeout < limits.Timeout {
			limits.Timeout = c.Limits.Timeout
		}
		if c.Limits.MaxMemory > 0 && c.Limits.MaxMemory < limits.MaxMemory {
			limits.MaxMemory = c.Limits.MaxMemory
		}
	}
	jctx, cancel := context.WithTimeout(ctx, limits.Timeout+5*time.Second)
	defer cancel()
	j, err := judge.Dir(jctx, dir, judge.Options{Limits: &limits})
	if err != nil {
		return r, fmt.Sprintf("could not be judged again from its files (%s): shown as its results.json says, unconfirmed", cut(oneLine(err.Error()), 200))
	}
	v := j.Results.Verdict
	if v == checker.Unknown && r.Verdict != checker.Unknown {
		return r, fmt.Sprintf("judged again from its files within %s: unknown (%s); shown as its results.json says, unconfirmed", limits, cut(oneLine(j.Results.Summary), 200))
	}
	out := judge.Onto(r, j.Results)
	out.RunDir = r.RunDir
	out.Trim(rundir.MaxAnomalies(dir))
	if v != r.Verdict {
		return out, fmt.Sprintf("results.json says %s, but the run directory judged again from its files is %s (%s): shown as judged; results.json does not hold to its history", r.Verdict, v, cut(oneLine(j.Results.Summary), 200))
	}
	return out, ""
}

// removeLink removes path when it is a symbolic link, so that what is written there
// next is a file of its own directory.
func removeLink(path string) error {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return os.Remove(path)
	}
	return nil
}
