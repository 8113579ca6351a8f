package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// sweepFinal returns a counter run's reconciliation; ok is false when the run has none.
func sweepFinal(r *results.Results) (workloads.Reconciliation, bool) {
	f := r.FinalFigures().Reconciliation
	if f == nil || f.After == nil && f.Acknowledged == 0 {
		return workloads.Reconciliation{}, false
	}
	return *f, true
}

// WriteSweep prints a contention sweep, one row per run (one per worker count): the
// committed transactions per second, latency, the retries and what they bought (retries
// per success counts only the retries of operations that succeeded), the failures (retries
// exhausted or a non-retryable error; operations the run's deadline cut off are counted
// apart), and the counter's reconciliation. Below the table: failures by reason, the
// server's restart counters as deltas over each run when the store has them, and each
// run's `final` line.
func WriteSweep(w io.Writer, runs []*results.Results) {
	if len(runs) == 0 {
		return
	}
	first := runs[0]
	console.Fprintf(w, "%s on %s: %s, retry %s", first.Workload, first.Store, first.Mechanism, first.Retry)
	if first.DurationS > 0 {
		console.Fprintf(w, ", about %.0f s per level", first.DurationS)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workers\ttx/s\tp50 ms\tp99 ms\tretries\tretries/success\tfailed\tlost\textra\tunknown\tcut by deadline\tverdict\t")
	for _, r := range runs {
		o := r.Outcomes
		tps := 0.0
		if r.DurationS > 0 {
			tps = float64(o.Succeeded.Ops) / r.DurationS
		}
		rps := "-"
		if v, ok := o.RetriesPerSuccess(); ok {
			rps = fmt.Sprintf("%.2f", v)
		}
		lost, extra := "-", "-"
		if f, ok := sweepFinal(r); ok && f.After != nil {
			lost = fmt.Sprintf("%d", f.Lost)
			if f.Lost > 0 && f.Acknowledged > 0 {
				lost += fmt.Sprintf(" (%.0f%%)", 100*float64(f.Lost)/float64(f.Acknowledged))
			}
			extra = fmt.Sprintf("%d", f.Extra)
		}
		verdict := r.Verdict.String()
		if r.Interrupted {
			verdict += " (interrupted)"
		}
		console.Fprintf(tw, "%d\t%.0f\t%.2f\t%.2f\t%d\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t\n", r.Workers, tps, r.LatencyMs.P50, r.LatencyMs.P99,
			r.Retries.Total, rps, o.Failed(), lost, extra, o.Unknown.Ops, o.Deadline.Ops, verdict)
	}
	tw.Flush()

	fmt.Fprintln(w, "\ntx/s: committed transactions per second. retries: attempts beyond the first, every outcome;")
	fmt.Fprintln(w, "retries/success: those of committed transactions only, per committed transaction.")
	for _, r := range runs {
		o := r.Outcomes
		console.Fprintf(w, "%d workers: retries by outcome: succeeded %d, failed %d, unknown %d, cut by deadline %d; failures by reason: %s",
			r.Workers, o.Succeeded.Retries(), o.Exhausted.Retries()+o.NonRetryable.Retries(), o.Unknown.Retries(), o.Deadline.Retries(),
			counts(o.FailedByReason()))
		if o.Exhausted.Ops > 0 || o.NonRetryable.Ops > 0 {
			console.Fprintf(w, " (%d exhausted, %d non-retryable)", o.Exhausted.Ops, o.NonRetryable.Ops)
		}
		fmt.Fprintln(w)
	}
	for _, r := range runs {
		WriteCounterFinal(w, r)
	}
	for _, r := range runs {
		if r.RunDir != "" {
			console.Fprintf(w, "run directory %d workers: %s\n", r.Workers, r.RunDir)
		}
	}
}

// WriteCounterFinal prints a counter run's `final` line: the counter before and after,
// the acknowledged increments, lost and extra with their cause, and the server's restart
// counters as deltas over the run. It prints nothing for other workloads.
func WriteCounterFinal(w io.Writer, r *results.Results) {
	f, ok := sweepFinal(r)
	if !ok {
		return
	}
	after := "-"
	if f.After != nil {
		after = fmt.Sprintf("%d", *f.After)
	}
	console.Fprintf(w, "final %d workers: before %d, after %s, acknowledged %d, lost %d, extra %d", r.Workers, f.Before, after, f.Acknowledged, f.Lost, f.Extra)
	if f.Cause != "" {
		console.Fprintf(w, ": %s", f.Cause)
	}
	fmt.Fprintln(w)
	if len(f.ServerRestarts) > 0 {
		console.Fprintf(w, "  server restarts during the run (deltas): %s\n", restartDeltas(f.ServerRestarts))
	}
	if f.ServerRestartsError != "" {
		console.Fprintf(w, "  server restart counters unavailable: %s\n", f.ServerRestartsError)
	}
}

// restartDeltas lists the counters that moved, then how many did not.
func restartDeltas(m map[string]int64) string {
	var moved []string
	still := 0
	for _, k := range sortedKeysOf(m) {
		if m[k] == 0 {
			still++
			continue
		}
		moved = append(moved, fmt.Sprintf("%s +%d", k, m[k]))
	}
	s := strings.Join(moved, ", ")
	if s == "" {
		s = "none moved"
	}
	switch {
	case still == 1:
		s += " (1 other unchanged)"
	case still > 1:
		s += fmt.Sprintf(" (%d others unchanged)", still)
	}
	return s
}
