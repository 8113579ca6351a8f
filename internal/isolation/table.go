package isolation

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
)

// Cell is one anomaly at one level, as measured.
type Cell struct {
	Anomaly string `json:"anomaly"`
	Title   string `json:"title"`
	Level   Level  `json:"level"`
	// Observed says the checker found the anomaly among the scenario's transactions;
	// Hermitage says whether Hermitage's table has it happen on the server's family
	// (PostgreSQL, MySQL/InnoDB) at this level. Agrees is Observed == Hermitage.
	Observed  bool `json:"observed"`
	Hermitage bool `json:"hermitage"`
	Agrees    bool `json:"agrees"`
	// How says how the level prevented it: "blocked" (a session waited on another's
	// lock), "aborted SQLSTATE ..." (a statement or commit failed), both, "neither
	// blocked nor aborted" (each read saw what the level lets it see), or "not
	// prevented".
	How string `json:"how"`
	// Blocked and SQLStates are the evidence behind How.
	Blocked   bool     `json:"blocked"`
	SQLStates []string `json:"sqlstates,omitempty"`
	// Cycle is the checker's explanation of the anomaly, when observed: the cycle
	// that proves it, one line an edge (for PMP it may be the non-repeatable read the
	// checker names internal, which has no cycle).
	Cycle     string `json:"cycle,omitempty"`
	CycleKind string `json:"cycle_kind,omitempty"`
	// Graph is a cycle the checker drew among the anomaly's sessions, as data, when
	// observed (a lost update is no cycle itself; its G-single cycle is drawn).
	Graph *Cycle `json:"graph,omitempty"`
	// Others are the anomalies the checker found that are not this one (the
	// scenario's transactions may show one the level allows).
	Others []checker.Anomaly `json:"others,omitempty"`
	// Sessions names each session's transaction in the checker's terms ("transaction
	// 4 is T1's"), for reading Cycle and Others.
	Sessions string `json:"sessions"`
	// Steps are the statements as they ran; History the transactions the checker
	// judged.
	Steps   []StepResult   `json:"steps"`
	History []histories.Op `json:"history"`
	// Finding, when the cell disagrees with Hermitage, says so with the statements.
	Finding string `json:"finding,omitempty"`
}

// judge checks the scenario's transactions and fills in the cell.
func (d *driver) judge(ctx context.Context) (Cell, error) {
	c := Cell{Anomaly: d.sc.name, Title: d.sc.title, Level: d.level, Steps: d.steps, History: d.ops,
		Hermitage: slices.Contains(d.db.hermitage(d.sc), d.level)}
	res, err := checker.CheckListAppend(ctx, d.ops, checker.TxnOptions{ConsistencyModels: []string{"serializable"}})
	if err != nil {
		return Cell{}, fmt.Errorf("%s at %s: check: %w", d.sc.name, d.level, err)
	}
	if res.Verdict == checker.Unknown {
		return Cell{}, fmt.Errorf("%s at %s: the checker could not decide: %s", d.sc.name, d.level, res.Summary)
	}
	for _, a := range res.Anomalies {
		target := matchKind(a.Kind, d.sc.kinds) && slices.Equal(d.sessionsOf(a.Ops), d.sc.among)
		if d.sc.internal && a.Kind == "internal" && slices.Equal(d.sessionsOf(a.Ops), d.sc.among[:1]) {
			target = true
		}
		if !c.Observed && target {
			c.Observed, c.Cycle, c.CycleKind = true, a.Explanation, a.Kind
			continue
		}
		c.Others = append(c.Others, a)
	}
	var cycles []Cycle
	if raw, ok := res.Details["cycles"]; ok {
		if err := json.Unmarshal(raw, &cycles); err != nil {
			return Cell{}, fmt.Errorf("%s at %s: the checker's cycles: %w", d.sc.name, d.level, err)
		}
	}
	if c.Observed {
		for i := range cycles {
			if slices.Equal(d.sessionsOf(cycles[i].Ops), d.sc.among) {
				cy := cycles[i]
				for j := range cy.Steps {
					cy.Steps[j].FromSession, cy.Steps[j].ToSession = d.owner[cy.Steps[j].From], d.owner[cy.Steps[j].To]
				}
				c.Graph = &cy
				break
			}
		}
	}
	var names []string
	for idx := int64(0); idx < int64(len(d.ops)); idx++ {
		if n, ok := d.owner[idx]; ok && n >= 1 && n <= len(d.sess) {
			names = append(names, fmt.Sprintf("transaction %d is T%d's", idx, n))
		}
	}
	c.Sessions = strings.Join(names, ", ")
	for i, st := range d.steps {
		if st.Blocked {
			c.Blocked = true
		}
		if st.SQLState != "" && d.sc.steps[i].op != opAbort && !slices.Contains(c.SQLStates, st.SQLState) {
			c.SQLStates = append(c.SQLStates, st.SQLState)
		}
	}
	switch {
	case c.Observed:
		c.How = "not prevented"
	case c.Blocked && len(c.SQLStates) > 0:
		c.How = "blocked, then aborted " + strings.Join(c.SQLStates, ", ")
	case len(c.SQLStates) > 0:
		c.How = "aborted " + strings.Join(c.SQLStates, ", ")
	case c.Blocked:
		c.How = "blocked"
	default:
		c.How = "neither blocked nor aborted"
	}
	c.Agrees = c.Observed == c.Hermitage
	if !c.Agrees {
		want := "prevents"
		if c.Hermitage {
			want = "allows"
		}
		got := "prevented it (" + c.How + ")"
		if c.Observed {
			got = "let it happen: " + c.CycleKind
		}
		var lines []string
		for _, s := range d.steps {
			lines = append(lines, "  "+s.String())
		}
		c.Finding = fmt.Sprintf("Hermitage's table says %s %s %s (%s) at %s; this server %s\n%s",
			d.db.family(), want, d.sc.name, d.sc.title, d.level, got, strings.Join(lines, "\n"))
	}
	return c, nil
}

// Cycle is one cycle of the checker's "cycles" detail: its transactions (by the
// history index of their completion) and its edges, each with the sessions it joins.
type Cycle struct {
	Type  string      `json:"type"`
	Ops   []int64     `json:"ops"`
	Steps []CycleEdge `json:"steps"`
}

// CycleEdge is one dependency of a Cycle: From precedes To by Type (ww, wr, rw) on
// Key.
type CycleEdge struct {
	From        int64  `json:"from"`
	To          int64  `json:"to"`
	Type        string `json:"type"`
	Key         string `json:"key,omitempty"`
	Value       string `json:"value,omitempty"`
	FromSession int    `json:"from_session"`
	ToSession   int    `json:"to_session"`
}

// sessionsOf names the sessions of the transactions whose completions are ops,
// sorted, leaving out the initial and final transactions.
func (d *driver) sessionsOf(ops []int64) []int {
	var s []int
	for _, o := range ops {
		if n, ok := d.owner[o]; ok && n >= 1 && n <= len(d.sess) && !slices.Contains(s, n) {
			s = append(s, n)
		}
	}
	sort.Ints(s)
	return s
}

// matchKind says whether kind is one of kinds or a refinement of one (G-single-item
// of G-single).
func matchKind(kind string, kinds []string) bool {
	for _, k := range kinds {
		if kind == k || strings.HasPrefix(kind, k+"-") {
			return true
		}
	}
	return false
}

// Table is a server's measured table.
type Table struct {
	Server string  `json:"server"` // "PostgreSQL 18.1"
	Levels []Level `json:"levels"`
	// Cells are by anomaly, then level, in Anomalies' and Levels' order.
	Cells []Cell `json:"cells"`
	// Costs are the random workload's, per level, when measured; Contention the
	// hot-key read-modify-write workload's.
	Costs      []Cost       `json:"costs,omitempty"`
	Contention []Contention `json:"contention,omitempty"`
}

// Findings are the cells that disagree with Hermitage.
func (t Table) Findings() []Cell {
	var f []Cell
	for _, c := range t.Cells {
		if !c.Agrees {
			f = append(f, c)
		}
	}
	return f
}

// Cell returns the cell of anomaly at level.
func (t Table) Cell(anomaly string, level Level) (Cell, bool) {
	for _, c := range t.Cells {
		if c.Anomaly == anomaly && c.Level == level {
			return c, true
		}
	}
	return Cell{}, false
}

// Measure drives every scenario at each level on the PostgreSQL server dsn names.
func Measure(ctx context.Context, dsn string, levels []Level) (Table, error) {
	return measure(ctx, postgresDialect{dsn: dsn}, levels)
}

// MeasureMySQL drives every scenario at each level (MySQLLevels) on the MySQL or
// MariaDB server dsn names (a go-sql-driver DSN), and compares each cell with
// Hermitage's table for MySQL/InnoDB.
func MeasureMySQL(ctx context.Context, dsn string, levels []Level) (Table, error) {
	return measure(ctx, mysqlDialect{dsn: dsn}, levels)
}

func measure(ctx context.Context, db dialect, levels []Level) (Table, error) {
	t := Table{Levels: levels}
	for _, sc := range scenarios {
		for _, l := range levels {
			c, err := runScenarioOn(ctx, db, sc, l)
			if err != nil {
				return Table{}, fmt.Errorf("%s at %s: %w", sc.name, l, err)
			}
			t.Cells = append(t.Cells, c)
		}
	}
	return t, nil
}

// Text is the table for a terminal: one row an anomaly, one column a level, each
// cell "prevented (how)" or "OBSERVED"; then the cost rows, the cycles of what was
// observed, and the findings.
func (t Table) Text() string {
	var b strings.Builder
	if t.Server != "" {
		fmt.Fprintf(&b, "%s\n", t.Server)
	}
	cols := []string{"anomaly"}
	for _, l := range t.Levels {
		cols = append(cols, string(l))
	}
	rows := [][]string{cols}
	for _, name := range Anomalies() {
		row := []string{name}
		for _, l := range t.Levels {
			c, ok := t.Cell(name, l)
			if !ok {
				row = append(row, "")
				continue
			}
			s := "prevented: " + c.How
			if c.Observed {
				s = "OBSERVED (" + c.CycleKind + ")"
			}
			if !c.Agrees {
				s += " [differs from Hermitage]"
			}
			row = append(row, s)
		}
		rows = append(rows, row)
	}
	if len(t.Costs) > 0 {
		add := func(label string, f func(Cost) string) {
			row := []string{label}
			for _, l := range t.Levels {
				v := ""
				for _, c := range t.Costs {
					if c.Level == l {
						v = f(c)
					}
				}
				row = append(row, v)
			}
			rows = append(rows, row)
		}
		add("committed/s", func(c Cost) string { return fmt.Sprintf("%.0f", c.CommittedPerSecond) })
		add("latency p50/p99 ms", func(c Cost) string { return fmt.Sprintf("%.1f / %.1f", c.LatencyP50, c.LatencyP99) })
		add("aborts/commit", func(c Cost) string { return fmt.Sprintf("%.2f (%s)", c.AbortsPerCommit, c.abortsText()) })
		add("checked", func(c Cost) string { return fmt.Sprintf("%d txns: %s", c.Transactions, c.Verdict) })
	}
	if len(t.Contention) > 0 {
		row := []string{"hot-key rmw"}
		for _, l := range t.Levels {
			v := ""
			for _, c := range t.Contention {
				if c.Level == l {
					v = c.text()
				}
			}
			row = append(row, v)
		}
		rows = append(rows, row)
	}
	width := make([]int, len(cols))
	for _, r := range rows {
		for i, s := range r {
			width[i] = max(width[i], len(s))
		}
	}
	for _, r := range rows {
		for i, s := range r {
			if i == len(r)-1 {
				b.WriteString(s)
			} else {
				fmt.Fprintf(&b, "%-*s  ", width[i], s)
			}
		}
		b.WriteString("\n")
	}
	for _, c := range t.Cells {
		if c.Observed {
			fmt.Fprintf(&b, "\n%s at %s: %s (%s)\n%s\n", c.Anomaly, c.Level, c.CycleKind, c.Sessions, indent(c.Cycle))
		}
		for _, o := range c.Others {
			fmt.Fprintf(&b, "\n%s at %s, also found (not %s): %s (%s)\n%s\n", c.Anomaly, c.Level, c.Anomaly, o.Kind, c.Sessions, indent(o.Explanation))
		}
	}
	for _, c := range t.Contention {
		if c.Cycle != "" {
			fmt.Fprintf(&b, "\nhot-key read-modify-write at %s: %s\n%s\n", c.Level, c.Summary, indent(c.Cycle))
		}
	}
	for _, c := range t.Findings() {
		fmt.Fprintf(&b, "\nFINDING: %s\n", c.Finding)
	}
	return b.String()
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
