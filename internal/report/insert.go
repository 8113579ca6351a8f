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
	"github.com/indoubt/indoubt/workloads/insert"
)

// insertCell gathers the runs of one key shape at one worker count (one per round).
type insertCell struct {
	key     insert.Key
	workers int
	runs    []*results.Results
	finals  []insert.Final
}

// mean averages f over the cell's runs that have the figure (ok false: none has it).
func (c *insertCell) mean(f func(r *results.Results, fin insert.Final) (float64, bool)) (float64, bool) {
	var sum float64
	var n int
	for i, r := range c.runs {
		if v, ok := f(r, c.finals[i]); ok {
			sum += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

func insertTPS(r *results.Results, _ insert.Final) (float64, bool) {
	if r.DurationS <= 0 {
		return 0, false
	}
	return float64(r.Outcomes.Succeeded.Ops) / r.DurationS, true
}

func ptrFigure(p func(insert.Final) *int64) func(*results.Results, insert.Final) (float64, bool) {
	return func(_ *results.Results, f insert.Final) (float64, bool) {
		if v := p(f); v != nil {
			return float64(*v), true
		}
		return 0, false
	}
}

// WriteInsertTable prints the primary-key table of insert runs (runner.InsertTable):
// per key shape and worker count, averaged over the rounds, the inserts per second and
// their ratio to identity at the same count, latency, the index's size after the run and
// after REINDEX, WAL bytes and full-page images per insert, sequence gaps, and under
// faults the duplicated rows and the unique violations that proved a commit. Below it:
// who generated each key, the gaps' cause and the duplicates named.
func WriteInsertTable(w io.Writer, runs []*results.Results) {
	cells, rounds := insertCells(runs)
	if len(cells) == 0 {
		return
	}
	first := cells[0].runs[0]
	console.Fprintf(w, "insert on %s (%s), retry %s, %d round(s), about %.0f s per run; figures are means over the rounds\n",
		first.Store, cells[0].finals[0].Server, first.Retry, rounds, first.DurationS)
	identity := map[int]float64{}
	for _, c := range cells {
		if c.key == insert.Identity {
			identity[c.workers], _ = c.mean(insertTPS)
		}
	}
	faulted := len(first.Faults.Schedule) > 0
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "key\tside\tworkers\ttx/s\tvs identity\tp50 ms\tp99 ms\tindex KiB\tafter REINDEX\tindex B/row\tWAL B/insert\tFPI\tFPI/1k inserts\tgaps\t"
	if faulted {
		head += "duplicates\talready applied\t"
	}
	fmt.Fprintln(tw, head+"verdict\t")
	for _, c := range cells {
		fmt.Fprintln(tw, c.row(identity[c.workers], faulted)+worstVerdict(c.runs).String()+"\t")
	}
	tw.Flush()
	writeInsertNotes(w, cells, faulted)
}

// insertCells gathers the insert runs into cells, in the order of insert.Keys and then
// by worker count, and says how many rounds the fullest cell had.
func insertCells(runs []*results.Results) (cells []*insertCell, rounds int) {
	find := func(k insert.Key, n int) *insertCell {
		for _, c := range cells {
			if c.key == k && c.workers == n {
				return c
			}
		}
		c := &insertCell{key: k, workers: n}
		cells = append(cells, c)
		return c
	}
	for _, r := range runs {
		f, ok := r.Final.(insert.Final)
		if !ok {
			continue
		}
		c := find(f.Key, r.Workers)
		c.runs = append(c.runs, r)
		c.finals = append(c.finals, f)
		rounds = max(rounds, len(c.runs))
	}
	sort.SliceStable(cells, func(i, j int) bool {
		ki, kj := slices.Index(insert.Keys, cells[i].key), slices.Index(insert.Keys, cells[j].key)
		if ki != kj {
			return ki < kj
		}
		return cells[i].workers < cells[j].workers
	})
	return cells, rounds
}

// row is the cell's line of the table, every column but the verdict, each ending in a
// tab; identity is identity's tx/s at the same worker count (0: none ran).
func (c *insertCell) row(identity float64, faulted bool) string {
	side := "server"
	if c.finals[0].ClientSide {
		side = "client"
	}
	tps, _ := c.mean(insertTPS)
	ratio := "-"
	if identity > 0 {
		ratio = fmt.Sprintf("%.2f", tps/identity)
	}
	p50, _ := c.mean(func(r *results.Results, _ insert.Final) (float64, bool) { return r.LatencyMs.P50, true })
	p99, _ := c.mean(func(r *results.Results, _ insert.Final) (float64, bool) { return r.LatencyMs.P99, true })
	walPer := c.figure(func(_ *results.Results, f insert.Final) (float64, bool) { return f.WALPerInsert, f.WALPerInsert > 0 }, "%.0f")
	fpi := c.figure(ptrFigure(func(f insert.Final) *int64 { return f.Measures.FPI }), "%.0f")
	fpiPer := c.figure(func(_ *results.Results, f insert.Final) (float64, bool) {
		if f.Measures.FPI == nil || f.Measures.Rows == 0 {
			return 0, false
		}
		return 1000 * float64(*f.Measures.FPI) / float64(f.Measures.Rows), true
	}, "%.2f")
	// Time-bounded runs insert different numbers of rows: bytes per row compare.
	perRow := c.figure(func(_ *results.Results, f insert.Final) (float64, bool) {
		if f.Measures.IndexBytes == nil || f.Measures.Rows == 0 {
			return 0, false
		}
		return float64(*f.Measures.IndexBytes) / float64(f.Measures.Rows), true
	}, "%.1f")
	gaps := c.figure(ptrFigure(func(f insert.Final) *int64 { return f.Measures.Gaps }), "%.0f")
	row := fmt.Sprintf("%s\t%s\t%d\t%.0f\t%s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t",
		c.key, side, c.workers, tps, ratio, p50, p99,
		c.kib(func(f insert.Final) *int64 { return f.Measures.IndexBytes }),
		c.kib(func(f insert.Final) *int64 { return f.Measures.Reindexed }),
		perRow, walPer, fpi, fpiPer, gaps)
	if faulted {
		var dups, already int64
		for _, f := range c.finals {
			dups += f.Duplicates
			already += f.AlreadyApplied
		}
		row += fmt.Sprintf("%d\t%d\t", dups, already)
	}
	return row
}

// figure is the mean of f over the cell in format, "-" when no run has the figure.
func (c *insertCell) figure(f func(*results.Results, insert.Final) (float64, bool), format string) string {
	if v, ok := c.mean(f); ok {
		return fmt.Sprintf(format, v)
	}
	return "-"
}

// kib is the mean byte count p gives, in KiB, "-" when no run has it.
func (c *insertCell) kib(p func(insert.Final) *int64) string {
	if v, ok := c.mean(ptrFigure(p)); ok {
		return fmt.Sprintf("%.0f", v/1024)
	}
	return "-"
}

// writeInsertNotes prints below the table who generated each key, the duplicates named
// by op, the gaps' cause under faults, and the figures a run could not measure.
func writeInsertNotes(w io.Writer, cells []*insertCell, faulted bool) {
	seen := map[insert.Key]bool{}
	for _, c := range cells {
		for _, f := range c.finals {
			if !seen[f.Key] {
				seen[f.Key] = true
				console.Fprintf(w, "  %s: %s\n", f.Key, f.Generated)
			}
			if f.Duplicates > 0 {
				ids := make([]string, 0, len(f.DuplicateOps))
				for id, n := range f.DuplicateOps {
					ids = append(ids, fmt.Sprintf("%s (%d rows)", id, n))
				}
				sort.Strings(ids)
				console.Fprintf(w, "  %s, %d workers: %d duplicated rows, e.g. op %s\n", f.Key, c.workers, f.Duplicates, strings.Join(ids[:min(len(ids), 3)], ", "))
			}
			if f.GapsCause != "" && faulted {
				console.Fprintf(w, "  %s, %d workers: %s\n", f.Key, c.workers, f.GapsCause)
			}
			if f.MeasureError != "" {
				console.Fprintf(w, "  %s, %d workers: figures missing: %s\n", f.Key, c.workers, f.MeasureError)
			}
		}
	}
}

// worstVerdict is the worst verdict among runs: invalid, then unknown, then valid.
func worstVerdict(runs []*results.Results) checker.Verdict {
	worst := checker.Valid
	for _, r := range runs {
		if r.Verdict == checker.Invalid || (r.Verdict == checker.Unknown && worst == checker.Valid) {
			worst = r.Verdict
		}
	}
	return worst
}
