package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
)

const compareHelp = `indoubt compare: print two recorded runs' figures side by side, with the
ratio of the second to the first (throughput, latency, retries, faults, ground truth,
final state). The figures are those suites bound (docs/suites.md).

Usage: indoubt compare RUN_A RUN_B

Example:
  indoubt compare runs/*-postgres-commit-cut-naive runs/*-postgres-commit-cut-idempotent

Exit codes: 0 compared, 3 a run directory could not be read.
`

func compareCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", compareHelp, stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return fmt.Errorf("compare: want two run directories (see indoubt compare --help)")
	}
	a, err := readResults(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("compare: %v", err)
	}
	b, err := readResults(fs.Arg(1))
	if err != nil {
		return fmt.Errorf("compare: %v", err)
	}
	for _, r := range []**results.Results{&a, &b} {
		var why string
		if *r, why = judged(ctx, (*r).RunDir, *r); ctx.Err() != nil {
			return fmt.Errorf("compare: %s: %w", (*r).RunDir, ctx.Err())
		}
		if why != "" {
			console.Fprintf(stderr, "indoubt: warning: %s: %s\n", (*r).RunDir, why)
		}
	}
	writeComparison(stdout, a, b)
	return nil
}

// writeComparison prints the runs' settings, verdicts and every figure either run has.
func writeComparison(w io.Writer, a, b *results.Results) {
	console.Fprintf(w, "A: %s\nB: %s\n\n", a.RunDir, b.RunDir)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tA\tB\tB/A")
	for _, row := range [][3]string{
		{"store", a.Store, b.Store},
		{"workload", string(a.Workload), string(b.Workload)},
		{"mechanism", a.Mechanism, b.Mechanism},
		{"retry", a.Retry, b.Retry},
		{"faults", fmt.Sprint(a.Faults.Schedule), fmt.Sprint(b.Faults.Schedule)},
		{"workers", fmt.Sprint(a.Workers), fmt.Sprint(b.Workers)},
		{"verdict", a.Verdict.String(), b.Verdict.String()},
	} {
		console.Fprintf(tw, "%s\t%s\t%s\t\n", row[0], row[1], row[2])
	}
	for _, f := range results.FigureNames() {
		va, oka := results.Figure(a, f[0])
		vb, okb := results.Figure(b, f[0])
		if !oka && !okb {
			continue
		}
		sa, sb, ratio := "-", "-", "-"
		if oka {
			sa = results.FormatFigure(va)
		}
		if okb {
			sb = results.FormatFigure(vb)
		}
		switch {
		case oka && okb && va != 0:
			ratio = fmt.Sprintf("%.2fx", vb/va)
		case oka && okb && vb == 0:
			ratio = "="
		}
		console.Fprintf(tw, "%s\t%s\t%s\t%s\n", f[0], sa, sb, ratio)
	}
	tw.Flush()
	console.Fprintf(w, "\nA verdict: %s\nB verdict: %s\n", report.Headline(a), report.Headline(b))
}
