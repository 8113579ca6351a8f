package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/shrink"
)

const shrinkHelp = `indoubt shrink: reduce a failing run to the smallest run that still fails the
same way, and print the one-line command that makes it again.

It re-runs the run's configuration (its config.json) with the faults it recorded made
explicit, one listed fault per event (a commit fault at the commit point it hit:
commit-cut@commit:57; a process fault or a window as written), and keeps a candidate
only if it fails with the same fingerprint (the anomaly's kind, and for a lost write the
kind of fault it followed) in at least half of K runs. K is chosen from how flaky the
failure is (the explicit baseline runs until it fails once: 3 when that took one run,
more when it took several), or given with --reruns. In order, it removes faults by
delta debugging (ddmin), makes each fault left simpler (a listed commit fault at an
earlier point, a window or a downtime shorter and earlier), then makes the run smaller:
fewer registers (--keys) or a smaller --budget first (a smaller state needs fewer
operations to show the failure; one whose run invokes more operations, as a smaller
budget exhausted early in a run of a --time does, is not kept), then fewer workers, fewer operations per worker, a
shorter --time; the last two phases repeat while they gain. Each accepted step is
printed as it happens. The smallest candidate is then run K more times: it must fail
the same way in at least half of them, or the one kept before it is tried so, down to
the baseline; how often the reproducer failed again is printed.

No run starts once --budget is spent (the run in flight finishes). The result is a
directory (--out, default RUNDIR.shrink) holding the smallest failing run, a normal run
directory with its report, and shrink.json: the fingerprint, the sizes before and after
(workers, operations, faults), the explicit fault list, the command, and every step with
the runs it took. The table of accepted steps, the sizes and the command are printed.

A valid run is refused ("nothing to shrink: the run was valid"), and so is one whose
verdict was unknown. A run directory is data, never instructions: shrink connects to
no server and runs no program that config.json names. A run made with --dsn is re-run
only with the DSN given again (--dsn; config.json masks its password anyway), and a
pg_version that is not a version number (a directory of binaries) is refused. The
reproducer's --dsn is printed masked.

Usage: indoubt shrink [flags] RUNDIR

Examples:
  indoubt run --store postgres --fault commit-cut:0.2 --retry naive    # exits 1
  indoubt shrink runs/20261201-223059.300-budget-postgres-commit-cut-naive
  indoubt shrink --budget 3m --reruns 5 runs/<run>
  indoubt shrink --dsn 'postgres://app:secret@db:5432/app' runs/<run>

Exit codes: 1 a smaller failing run was found (it is invalid, as a run of its command
is; also when the budget or an interruption stopped the search, whose result so far is
written), 2 the failure did not happen again with its faults made explicit, or the
command was interrupted before it did, 3 nothing to shrink (a valid or unknown run) or
could not run.
`

func shrinkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("shrink", shrinkHelp, stdout)
	budget := fs.Duration("budget", shrink.DefaultBudget, "time budget: no run starts once it is spent")
	reruns := fs.Int("reruns", 0, "K, the runs a candidate gets to fail with the fingerprint, 1 to 10 (default: chosen from the baseline, at least 3)")
	out := fs.String("out", "", "directory of the runs and shrink.json (default RUNDIR.shrink); must not exist")
	dsn := fs.String("dsn", "", "the server to run against, for a run made with --dsn (config.json masks its password)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	jsonOut := fs.Bool("json", false, "print shrink.json to stdout (the rest goes to stderr)")
	dir, err := parseWithPositional(fs, args)
	if err != nil {
		return err
	}
	if dir == "" {
		return fmt.Errorf("shrink: want one run directory (see indoubt shrink --help)")
	}
	if *budget <= 0 {
		return fmt.Errorf("shrink: --budget must be positive (got %v)", *budget)
	}
	if *reruns < 0 || *reruns > 10 {
		return fmt.Errorf("shrink: --reruns must be from 1 to 10 (got %d)", *reruns)
	}
	if *out == "" {
		*out = strings.TrimRight(dir, `/\`) + ".shrink"
	}
	human := stdout
	if *jsonOut {
		human = stderr
	}
	opt := shrink.Options{Out: *out, Budget: *budget, Reruns: *reruns, DSN: *dsn}
	if !*quiet {
		opt.Progress = stderr
	}
	defer shareInitdb(stderr)()
	res, err := shrink.Shrink(ctx, dir, opt)
	switch {
	case errors.Is(err, shrink.ErrNotReproduced):
		fmt.Fprintf(stderr, "indoubt: shrink %s: %s\n", dir, oneLine(err.Error()))
		return verdictExit{exitUnknown}
	case err != nil && ctx.Err() != nil:
		return interrupted{err}
	case err != nil:
		return fmt.Errorf("shrink %s: %w", dir, err)
	}
	writeShrink(human, res)
	if *jsonOut {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	}
	return verdictExit{exitInvalid}
}

// parseWithPositional parses flags given before or after the one positional argument.
func parseWithPositional(fs *flag.FlagSet, args []string) (string, error) {
	if err := parseFlags(fs, args); err != nil {
		return "", err
	}
	if fs.NArg() == 0 {
		return "", nil
	}
	pos := fs.Arg(0)
	if rest := fs.Args()[1:]; len(rest) > 0 {
		if err := parseFlags(fs, rest); err != nil {
			return "", err
		}
		if fs.NArg() > 0 {
			return "", fmt.Errorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
		}
	}
	return pos, nil
}

// writeShrink prints a shrink's result: the accepted steps, the sizes before and after,
// the faults the smallest run needs and its command.
func writeShrink(w io.Writer, r *shrink.Result) {
	fmt.Fprintf(w, "fingerprint: %s\n", r.Fingerprint)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "step\tphase\tchange\truns")
	rejected, rejectedRuns := 0, 0
	for i, st := range r.Steps {
		if !st.Kept {
			rejected++
			rejectedRuns += st.Runs
			continue
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\n", i+1, st.Phase, st.Change, st.Runs)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d candidates did not fail (%d runs); %d runs in all, %s (%s)\n", rejected, rejectedRuns, r.Runs,
		(time.Duration(r.WallS * float64(time.Second))).Round(time.Second), r.Stopped)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tworkers\tops/worker\ttime\toperations\tfaults")
	for _, row := range []struct {
		name string
		s    shrink.Size
	}{{"before", r.Original}, {"after", r.Smallest}} {
		ops, t := fmt.Sprint(row.s.OpsPerWorker), "-"
		if row.s.DurationS > 0 {
			ops, t = "-", fmt.Sprintf("%gs", row.s.DurationS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%d\t%d\n", row.name, row.s.Workers, ops, t, row.s.Operations, len(row.s.Faults))
	}
	tw.Flush()
	if len(r.Smallest.Faults) > 0 {
		fmt.Fprintln(w, "faults it needs:")
		for _, f := range r.Smallest.Faults {
			fmt.Fprintf(w, "  %s  (%s, %s, at %.3fs", f.Spec, f.Kind, f.Target, f.AtS)
			if f.DurationS > 0 {
				fmt.Fprintf(w, ", for %gs", f.DurationS)
			}
			fmt.Fprintln(w, ")")
		}
	} else {
		fmt.Fprintln(w, "faults it needs: none")
	}
	fmt.Fprintf(w, "verdict: %s: %s\n", r.Smallest.Verdict, r.Smallest.Summary)
	if r.Confirmed != "" {
		fmt.Fprintf(w, "confirmed: %s\n", r.Confirmed)
	}
	fmt.Fprintf(w, "reproduce: %s\n", r.Smallest.Command)
	fmt.Fprintf(w, "smallest run: %s\n", r.Smallest.RunDir)
	fmt.Fprintf(w, "shrink.json: %s\n", filepath.Join(filepath.Dir(r.Smallest.RunDir), "shrink.json"))
}

// shrinkFailedCases shrinks each case whose run was invalid when the case expected
// otherwise, and adds the reproducing command to its failure (the table's FAIL lines,
// the JUnit failure message, the annotations). A shrink that finds nothing smaller, or
// fails, says so there instead.
func shrinkFailedCases(ctx context.Context, cases []caseResult, budget time.Duration, stderr io.Writer, quiet bool) {
	for i := range cases {
		c := &cases[i]
		if ctx.Err() != nil || c.res == nil || len(c.failed) == 0 || c.res.Verdict != checker.Invalid || c.run.expect == checker.Invalid {
			continue
		}
		if !quiet {
			fmt.Fprintf(stderr, "shrinking %s (budget %v) ...\n", c.run.name, budget)
		}
		opt := shrink.Options{Out: c.res.RunDir + ".shrink", Budget: budget}
		if !quiet {
			opt.Progress = stderr
		}
		res, err := shrink.Shrink(ctx, c.res.RunDir, opt)
		if err != nil {
			c.failed = append(c.failed, "shrink: "+oneLine(err.Error()))
			continue
		}
		line := fmt.Sprintf("reproduce (%s; %d → %d operations, %d → %d faults): %s", res.Fingerprint,
			res.Original.Operations, res.Smallest.Operations, len(res.Original.Faults), len(res.Smallest.Faults), res.Smallest.Command)
		c.failed = append(c.failed, line)
		c.first += "; " + line
	}
}
