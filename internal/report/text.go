package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/indoubt/indoubt/workloads"
)

// Row is one line of the stand's table, taken from a run's results.
type Row struct {
	Store, Mechanism string
	TxPerSec         float64
	Applied          string
	Rejected         string
	Final            string
	Retries          string
	// Ambiguous is "info (cuts/drops)": operations that ended unknown, and the commit
	// faults fired, which a retry may have resolved.
	Ambiguous string
	Verdict   string
	RunDir    string
}

// RowOf reads the stand's columns out of results. Workload-specific columns come from
// the figures of the final state (budget: applied, rejected, balance; counter:
// acknowledged, after).
func RowOf(r *Results) Row {
	row := Row{
		Store: r.Store, Mechanism: r.Mechanism, TxPerSec: r.Throughput,
		Verdict: r.Verdict.String(), RunDir: r.RunDir,
		Applied: "-", Rejected: "-", Final: "-",
	}
	if r.Interrupted {
		row.Verdict += " (interrupted)"
	}
	fig := figuresOf(r)
	row.Applied, row.Rejected, row.Final = num(fig.Applied), num(fig.Rejected), num(fig.Value)
	row.Retries = fmt.Sprintf("%d", r.Retries.Total)
	if r.Conflicts > 0 {
		row.Retries = fmt.Sprintf("%d/%d", r.Retries.Total, r.Conflicts)
		var applied float64
		if _, err := fmt.Sscan(row.Applied, &applied); err == nil && applied > 0 {
			row.Retries += fmt.Sprintf(" (%.1f/applied)", float64(r.Conflicts)/applied)
		}
	}
	// Operations that ended unknown, then the faults fired: under a retry policy a cut
	// is retried and its operation ends ok, so 0 (418/0) is no contradiction.
	cut, drop := r.Faults.ByKind["commit-cut"], r.Faults.ByKind["commit-drop"]
	row.Ambiguous = fmt.Sprintf("%d (%d/%d)", r.Ops.Info, cut, drop)
	return row
}

// WriteSummary prints the one-screen summary of one run: the stand's row, then counts,
// latency, retries, faults and anomalies.
func WriteSummary(w io.Writer, r *Results) {
	WriteTable(w, []*Results{r})
	fmt.Fprintf(w, "\nops: %d invoked, %d ok, %d fail, %d info   latency ms: p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n",
		r.Ops.Invoked, r.Ops.OK, r.Ops.Fail, r.Ops.Info, r.LatencyMs.P50, r.LatencyMs.P95, r.LatencyMs.P99, r.LatencyMs.Max)
	if r.Retries.Total > 0 {
		fmt.Fprintf(w, "retries: %d (ok %d, fail %d, info %d, deadline %d) by reason: %s\n", r.Retries.Total,
			r.Retries.ByOutcome.OK, r.Retries.ByOutcome.Fail, r.Retries.ByOutcome.Info, r.Retries.ByOutcome.Deadline,
			counts(r.Retries.ByReason))
	}
	if r.Conflicts > 0 {
		per := ""
		if fig := figuresOf(r); fig.PerApplied != "" && fig.Applied != nil && *fig.Applied != 0 {
			per = fmt.Sprintf(" (%.2f per %s)", float64(r.Conflicts)/float64(*fig.Applied), fig.PerApplied)
		}
		fmt.Fprintf(w, "CAS conflicts: %d%s\n", r.Conflicts, per)
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "errors (last attempt): %s\n", counts(r.Errors))
	}
	if len(r.Faults.Schedule) > 0 {
		if c := r.Faults.Commits; c != nil {
			fmt.Fprintf(w, "faults: %s  fired: %s\ncommit faults: %s\n", strings.Join(r.Faults.Schedule, " "), counts(r.Faults.ByKind), c)
		} else {
			fmt.Fprintf(w, "faults: %s  fired: %s  truth: %s\n", strings.Join(r.Faults.Schedule, " "), counts(r.Faults.ByKind), counts(r.Faults.ByTruth))
		}
	}
	fmt.Fprintf(w, "verdict: %s: %s\n", r.Verdict, r.Summary)
	for i, a := range r.Anomalies {
		if i == 10 {
			fmt.Fprintf(w, "  ... and %d more anomalies in results.json\n", len(r.Anomalies)-10)
			break
		}
		fmt.Fprintf(w, "  %s: %s\n", a.Kind, a.Explanation)
	}
	if e := r.Evidence; e != nil {
		if len(e.AppliedTwice) > 0 {
			fmt.Fprintf(w, "ground truth: %d operations applied more than once:\n", len(e.AppliedTwice))
			for i, a := range e.AppliedTwice {
				if i == 10 {
					fmt.Fprintf(w, "  ... and %d more in results.json\n", len(e.AppliedTwice)-10)
					break
				}
				fmt.Fprintf(w, "  %s\n", a.Sentence)
			}
		}
		if len(e.CommittedTwice) > 0 {
			fmt.Fprintf(w, "ground truth: %d operations committed twice (the first commit's reply does not show what it changed):\n", len(e.CommittedTwice))
			for i, a := range e.CommittedTwice {
				if i == 5 {
					fmt.Fprintf(w, "  ... and %d more in results.json\n", len(e.CommittedTwice)-5)
					break
				}
				fmt.Fprintf(w, "  %s\n", a.Sentence)
			}
		}
		for _, d := range e.Disagreements {
			fmt.Fprintf(w, "ground truth vs checker: %s\n", d)
		}
	}
	if r.RunDir != "" {
		fmt.Fprintf(w, "run directory: %s\n", r.RunDir)
	}
}

// figuresOf returns the figures of r's final state, none when it has no final state.
func figuresOf(r *Results) workloads.Figures {
	if r.Final == nil {
		return workloads.Figures{}
	}
	return r.Final.Figures()
}

// num shows a figure, "-" when there is none.
func num(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%d", *v)
}

func counts(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// WriteTable prints the stand's table, one row per run, with each run's throughput as a
// ratio to the fastest.
func WriteTable(w io.Writer, runs []*Results) {
	var fastest float64
	for _, r := range runs {
		if r.Throughput > fastest {
			fastest = r.Throughput
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "store\tmechanism\ttx/s\tvs fastest\tapplied\trejected\tfinal\tretries/conflicts\tended unknown (cuts/drops fired)\tverdict")
	for _, r := range runs {
		row := RowOf(r)
		ratio := "-"
		if fastest > 0 {
			ratio = fmt.Sprintf("%.2fx", r.Throughput/fastest)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Store, row.Mechanism, row.TxPerSec, ratio,
			row.Applied, row.Rejected, row.Final, row.Retries, row.Ambiguous, row.Verdict)
	}
	tw.Flush()
}
