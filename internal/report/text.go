package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/results"
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
func RowOf(r *results.Results) Row {
	row := Row{
		Store: r.Store, Mechanism: r.Mechanism, TxPerSec: r.Throughput,
		Verdict: r.Verdict.String(), RunDir: r.RunDir,
		Applied: "-", Rejected: "-", Final: "-",
	}
	if r.Interrupted {
		row.Verdict += " (interrupted)"
	}
	fig := r.FinalFigures()
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
func WriteSummary(w io.Writer, r *results.Results) { WriteSummaryNotes(w, r, nil) }

// WriteSummaryNotes is WriteSummary with the sentences a caller holding the history
// adds beside the verdict (LostWriteNotes: whether an acknowledged write was lost).
func WriteSummaryNotes(w io.Writer, r *results.Results, notes []string) {
	WriteTable(w, []*results.Results{r})
	console.Fprintf(w, "\nops: %d invoked, %d ok, %d fail, %d info   latency ms: p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n",
		r.Ops.Invoked, r.Ops.OK, r.Ops.Fail, r.Ops.Info, r.LatencyMs.P50, r.LatencyMs.P95, r.LatencyMs.P99, r.LatencyMs.Max)
	if r.Retries.Total > 0 {
		console.Fprintf(w, "retries: %d (ok %d, fail %d, info %d, deadline %d) by reason: %s\n", r.Retries.Total,
			r.Retries.ByOutcome.OK, r.Retries.ByOutcome.Fail, r.Retries.ByOutcome.Info, r.Retries.ByOutcome.Deadline,
			counts(r.Retries.ByReason))
	}
	if r.Conflicts > 0 {
		per := ""
		if fig := r.FinalFigures(); fig.PerApplied != "" && fig.Applied != nil && *fig.Applied != 0 {
			per = fmt.Sprintf(" (%.2f per %s)", float64(r.Conflicts)/float64(*fig.Applied), fig.PerApplied)
		}
		console.Fprintf(w, "CAS conflicts: %d%s\n", r.Conflicts, per)
	}
	if len(r.Errors) > 0 {
		console.Fprintf(w, "errors (last attempt): %s\n", counts(r.Errors))
	}
	writeFaults(w, r)
	WriteVerdict(w, r)
	if pr := levelPromise(r); pr != "" {
		console.Fprintf(w, "  the store's level: %s\n", pr)
	}
	for _, n := range notes {
		console.Fprintf(w, "  %s\n", n)
	}
	writeRequests(w, r.Evidence)
	if r.RunDir != "" {
		console.Fprintf(w, "run directory: %s\n", r.RunDir)
	}
}

// writeFaults prints the faults: what the proxy fired, when the run went through it
// (with process faults alone there is no proxy, and "fired: none" would mislead), then
// the process faults' timeline, one line each, and the first acknowledged writes lost.
func writeFaults(w io.Writer, r *results.Results) {
	proxy := proxySchedule(r)
	if len(proxy) > 0 && (r.Proxied || len(r.ProcessFaults) == 0) || len(r.Faults.ByKind) > 0 {
		if c := r.Faults.Commits; c != nil {
			console.Fprintf(w, "faults: %s  fired: %s\ncommit faults: %s\n", strings.Join(proxy, " "), counts(r.Faults.ByKind), c)
		} else {
			console.Fprintf(w, "faults: %s  fired: %s  truth: %s\n", strings.Join(proxy, " "), counts(r.Faults.ByKind), counts(r.Faults.ByTruth))
		}
	}
	if len(r.ProcessFaults) > 0 {
		console.Fprintf(w, "process faults:\n")
		for _, f := range r.ProcessFaults {
			console.Fprintf(w, "  %s\n", f)
		}
	}
	if len(r.Partitions) > 0 || len(r.SplitBrain) > 0 {
		fmt.Fprintf(w, "partitions between nodes:\n")
		for _, p := range r.Partitions {
			fmt.Fprintf(w, "  %s\n", p)
		}
		for _, s := range r.SplitBrain {
			fmt.Fprintf(w, "  %s\n", s)
		}
	}
	if r.Leaders != nil {
		console.Fprintf(w, "%s\n", r.Leaders)
	}
	if len(r.LostWrites) == 0 {
		return
	}
	n := r.LostTotal()
	console.Fprintf(w, "lost writes: %d acknowledged %s missing from the final state\n", n, plural(int(n), "write", "writes"))
	rows := lostRows(r)
	for _, l := range rows[:min(ConsoleExamples, len(rows))] {
		console.Fprintf(w, "  %s\n", l)
	}
	if len(rows) > ConsoleExamples {
		console.Fprintf(w, "  ... and %d more in results.json\n", len(rows)-ConsoleExamples)
	}
}

// proxySchedule is the schedule without the process faults: what the proxy was asked
// to do.
func proxySchedule(r *results.Results) []string {
	procs := map[string]bool{}
	for _, f := range r.ProcessFaults {
		procs[f.Fault] = true
	}
	// Partitions between nodes and links are the runner's, not the proxy's.
	for _, p := range r.Partitions {
		procs[p.Fault] = true
	}
	var out []string
	for _, s := range r.Faults.Schedule {
		if strings.HasPrefix(s, "coordinator-crash") {
			continue // the coordinator's, not the proxy's: see the two-phase commit section
		}
		if !procs[s] && !strings.Contains(s, "link=") {
			out = append(out, s)
		}
	}
	return out
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
	var parts []string
	for _, k := range sortedKeysOf(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// WriteTable prints the stand's table, one row per run, with each run's throughput as a
// ratio to the fastest.
func WriteTable(w io.Writer, runs []*results.Results) {
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
		console.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Store, row.Mechanism, row.TxPerSec, ratio,
			row.Applied, row.Rejected, row.Final, row.Retries, row.Ambiguous, row.Verdict)
	}
	tw.Flush()
}

// Headline is the verdict's first line: the checker's summary, which names the anomaly
// it proved first, then what the proxy's ground truth proves beside it ("invalid: read
// 4-1 returned balance 877 ...; the proxy proves 12 operations took effect more than
// once"). The checker decides; the ground truth is evidence.
func Headline(r *results.Results) string {
	line := fmt.Sprintf("%s: %s", r.Verdict, r.Summary)
	e := r.Evidence
	if e == nil {
		return line
	}
	var also []string
	if n := e.AppliedTwiceTotal(); n > 0 {
		also = append(also, fmt.Sprintf("the proxy proves %d %s took effect more than once", n, plural(n, "operation", "operations")))
	}
	if n := e.ReplaysTotal(); n > 0 && r.Verdict == checker.Valid {
		also = append(also, fmt.Sprintf("%d %s retried after a cut commit changed nothing (replays)", n, plural(n, "operation", "operations")))
	}
	if len(also) == 0 {
		return line
	}
	return line + "; " + strings.Join(also, "; ")
}

// KindCounts says how many anomalies of each kind the checker found, every kind, most
// first: "828 premature-rejection, 3 lost-update".
func KindCounts(r *results.Results) string {
	kinds := r.AnomalyKinds
	if len(kinds) == 0 {
		kinds = map[string]int{}
		for _, a := range r.Anomalies {
			kinds[a.Kind]++
		}
	}
	ks := make([]string, 0, len(kinds))
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		return kinds[ks[i]] > kinds[ks[j]] || kinds[ks[i]] == kinds[ks[j]] && ks[i] < ks[j]
	})
	var parts []string
	sum := 0
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
		sum += kinds[k]
	}
	switch {
	case len(parts) == 0:
		return fmt.Sprintf("%d anomalies", r.AnomalyTotal())
	case sum < r.AnomalyTotal():
		// The checker listed only some: their kinds, not counts of all.
		return fmt.Sprintf("%d anomalies (%s)", r.AnomalyTotal(), strings.Join(ks, ", "))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ConsoleExamples is how many examples of each group the console shows under the
// verdict's first line.
const ConsoleExamples = 3

// WriteVerdict prints the verdict: its first line (Headline), then the checker's
// anomalies by kind, a few examples of each, every example followed by what the
// proxy's ground truth proves of the operations it names; then the operations the
// ground truth proves applied more than once that no example named, the replays, those
// committed by a cut and retried with nothing proven either way, and where the checker
// and the ground truth disagree. Counts are exact; the examples come from what
// results.json lists (--max-anomalies).
func WriteVerdict(w io.Writer, r *results.Results) {
	console.Fprintf(w, "verdict: %s\n", Headline(r))
	for _, m := range r.Models {
		console.Fprintf(w, "  %s (%s): %s: %s\n", m.Name, m.Model, m.Verdict, m.Summary)
	}
	more := func(listed, shown, total int) {
		if total > shown {
			where := "in results.json"
			if listed < total {
				where = fmt.Sprintf("(results.json lists %d; %s)", listed, ListAllHint(r))
			}
			console.Fprintf(w, "    ... and %d more %s\n", total-shown, where)
		}
	}
	shown := map[string]bool{} // op ids whose ground truth was printed under an anomaly
	writeAnomalies(w, r, more, shown)
	e := r.Evidence
	if e == nil {
		return
	}
	group := func(total int, head string, list []results.AmbiguousOp) {
		if total == 0 {
			return
		}
		console.Fprintf(w, "  ground truth: %s\n", head)
		k, above := 0, 0
		for _, a := range list {
			switch {
			case shown[a.OpID]:
				above++ // printed under the checker's anomaly that names it
			case k < ConsoleExamples:
				console.Fprintf(w, "    %s\n", a.Sentence)
				k++
			}
		}
		if above > 0 {
			fmt.Fprintf(w, "    (%d shown under the checker's anomalies above)\n", above)
		}
		more(len(list), k+above, total)
	}
	n := e.AppliedTwiceTotal()
	group(n, fmt.Sprintf("%d %s took effect more than once: %s", n, plural(n, "operation", "operations"), e.Grouped()), e.AppliedTwice)
	n = e.ReplaysTotal()
	group(n, fmt.Sprintf("%d %s committed by a cut and retried changed nothing the second time (replays)", n, plural(n, "operation", "operations")), e.Replays)
	n = e.CommittedTwiceTotal()
	group(n, fmt.Sprintf("%d %s committed by a cut and retried, a second application possible but not proven", n, plural(n, "operation", "operations")), e.CommittedTwice)
	for _, d := range e.Disagreements {
		console.Fprintf(w, "  ground truth vs checker: %s\n", d)
	}
}

// writeAnomalies prints the checker's anomalies by kind, each example followed by the
// ground truth's claims about the operations it names (recorded in shown).
func writeAnomalies(w io.Writer, r *results.Results, more func(listed, shown, total int), shown map[string]bool) {
	if r.AnomalyTotal() == 0 {
		return
	}
	kinds := r.AnomalyKinds
	if len(kinds) == 0 {
		kinds = map[string]int{}
		for _, a := range r.Anomalies {
			kinds[a.Kind]++
		}
	}
	sum := 0
	for _, n := range kinds {
		sum += n
	}
	if sum < r.AnomalyTotal() {
		console.Fprintf(w, "  checker: %d anomalies; it lists the first %d, by kind:\n", r.AnomalyTotal(), sum)
	}
	for _, kind := range sortedKeysOf(kinds) {
		n := kinds[kind]
		if kind == results.LostWriteKind && len(r.LostWrites) > 0 {
			// Found by reconciling the final state, and listed with the faults above.
			console.Fprintf(w, "  reconciliation: %d %s (lost writes above)\n", n, kind)
			continue
		}
		console.Fprintf(w, "  checker: %d %s\n", n, kind)
		k, listed := 0, 0
		for _, a := range r.Anomalies {
			if a.Kind != kind {
				continue
			}
			listed++
			if k < ConsoleExamples {
				// A cycle's explanation has a line an edge: kept, indented under
				// its first, as indoubt check shows it.
				console.Fprintf(w, "    %s\n", console.BoundedLines(a.Explanation, "      ", "results.json"))
				for _, c := range ClaimsAbout(r.Evidence, a) {
					console.Fprintf(w, "      the proxy: %s\n", c.Sentence)
					shown[c.OpID] = true
				}
				k++
			}
		}
		more(listed, k, n)
	}
}

// ClaimsAbout returns what the ground truth proves of the operations anomaly a names
// (by the history index of their invocation): applied more than once, replayed, or
// committed and retried; one claim per operation, the strongest first.
func ClaimsAbout(e *results.Evidence, a checker.Anomaly) []results.AmbiguousOp {
	if e == nil {
		return nil
	}
	var out []results.AmbiguousOp
	seen := map[string]bool{}
	for _, list := range [][]results.AmbiguousOp{e.AppliedTwice, e.Replays, e.CommittedTwice} {
		for _, c := range list {
			if !seen[c.OpID] && slices.Contains(a.Ops, c.Invoke) {
				seen[c.OpID] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// writeRequests prints what became of the API requests a cut hit, as the judge proved
// it (evidence.requests): the first ConsoleExamples, and how many more there are.
func writeRequests(w io.Writer, e *results.Evidence) {
	if e == nil || len(e.Requests) == 0 {
		return
	}
	n := e.RequestsTotal()
	console.Fprintf(w, "  ground truth: %d API %s whose cut response the history proves handled more than once or replayed\n", n, plural(n, "request", "requests"))
	shown := min(len(e.Requests), ConsoleExamples)
	for _, s := range e.Requests[:shown] {
		console.Fprintf(w, "    %s\n", s)
	}
	if n > shown {
		where := "in results.json"
		if len(e.Requests) < n {
			where = fmt.Sprintf("(results.json lists %d; --max-anomalies)", len(e.Requests))
		}
		console.Fprintf(w, "    ... and %d more %s\n", n-shown, where)
	}
}
