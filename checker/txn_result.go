package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// txnAnalysis is one check's findings: the dependency edges while they are gathered,
// then the anomalies of every kind.
type txnAnalysis struct {
	h     *txnHistory
	c     *txnCheck
	ex    txnExplainer
	from  []int32
	to    []int32
	bits  []edgeBits
	found map[string]*foundAnomalies
	// cycleExists are the proofs that a model's cycle exists, kept apart: they are
	// reported only where no other anomaly rules that model out already.
	cycleExists []txnAnomaly
	edges       int
	components  int
	largest     int
	// join, when set, waits for findings made concurrently and merges them in.
	join func()
	// graph, when set, is the dependency graph, built by the model (and from, to
	// and bits left empty).
	graph *txnGraph
	// complete are the models asked for that a search for a version order decided
	// (txn_search_order.go), though the inferred graph alone would not have.
	complete []string
	// searches are the figures of those searches, for Details.
	searches []orderFigures
}

// aside runs find on another core, into an analysis of its own, and sets join to wait
// for it and merge its findings in: the anomalies that need no graph are found while the
// graph is built and its cycles searched.
func (an *txnAnalysis) aside(find func(side *txnAnalysis)) {
	side := newTxnAnalysis(an.h, an.c, an.ex)
	done := make(chan struct{})
	go func() {
		defer close(done)
		find(side)
	}()
	var once sync.Once
	an.join = func() {
		once.Do(func() {
			<-done
			an.merge(side)
		})
	}
}

// merge adds the findings of o.
func (an *txnAnalysis) merge(o *txnAnalysis) {
	for kind, f := range o.found {
		into := an.found[kind]
		if into == nil {
			into = &foundAnomalies{}
			an.found[kind] = into
		}
		into.count += f.count
		room := max(0, maxListed-len(into.items))
		into.items = append(into.items, f.items[:min(room, len(f.items))]...)
	}
}

// txnExplainer explains the dependencies of a model.
type txnExplainer interface {
	// explainEdge says why transaction a precedes b by relation rel (ww, wr or rw),
	// calling them an and bn, with the data of the step.
	explainEdge(h *txnHistory, a, b int32, rel edgeBits, an, bn string) (string, cycleStep)
}

// txnAnomaly is one anomaly found: the transactions involved (in cycle order for a
// cycle), what happened, and a cycle's data.
type txnAnomaly struct {
	kind  string
	txns  []int32
	text  string
	cycle *cycleData
	model string // for a cycle-exists proof: the model (canonical) it rules out
}

// foundAnomalies are the anomalies of one kind: all counted, the first few kept.
type foundAnomalies struct {
	count int
	items []txnAnomaly
}

// maxListed bounds the anomalies of one kind a Result lists; Details counts them all.
const maxListed = 100

// cycleData is a cycle as data, for results.json and report pages: its transactions
// by the history index of their completion, and each edge.
type cycleData struct {
	Type  string      `json:"type"`
	Ops   []int64     `json:"ops"`
	Steps []cycleStep `json:"steps"`
}

// cycleStep is one edge of a cycle: from which transaction to which, by what relation,
// and for a data dependency the key, the values and the micro-ops (their positions in
// each transaction's value) that prove it.
type cycleStep struct {
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Type    string `json:"type"`
	Key     string `json:"key,omitempty"`     // the key as JSON
	Value   string `json:"value,omitempty"`   // the version read or overwritten, as JSON
	Value2  string `json:"value2,omitempty"`  // the version written after it, as JSON
	FromMop int    `json:"from_mop"`          // -1 when none
	ToMop   int    `json:"to_mop"`            // -1 when none
	Process *int32 `json:"process,omitempty"` // process order: the process
}

func newTxnAnalysis(h *txnHistory, c *txnCheck, ex txnExplainer) *txnAnalysis {
	return &txnAnalysis{h: h, c: c, ex: ex, found: map[string]*foundAnomalies{}}
}

// edge records that a precedes b by rel. Self edges and failed transactions, which no
// dependency can involve, are left out.
func (an *txnAnalysis) edge(a, b int32, rel edgeBits) {
	if a == b || an.h.txns[a].status == txnFail || an.h.txns[b].status == txnFail {
		return
	}
	an.from, an.to, an.bits = grown(an.from, 1), grown(an.to, 1), grown(an.bits, 1)
	an.from = append(an.from, a)
	an.to = append(an.to, b)
	an.bits = append(an.bits, rel)
}

// add records an anomaly of kind.
func (an *txnAnalysis) add(kind string, a txnAnomaly) {
	a.kind = kind
	f := an.found[kind]
	if f == nil {
		f = &foundAnomalies{}
		an.found[kind] = f
	}
	f.count++
	if len(f.items) < maxListed {
		f.items = append(f.items, a)
	}
}

// name names a transaction in a sentence: by the history index of its completion, or
// of its invocation when it never completed.
func (h *txnHistory) name(id int32) string {
	t := h.txns[id]
	switch {
	case t.comp >= 0 && t.status == txnOK:
		return fmt.Sprintf("transaction %d", t.comp)
	case t.comp >= 0:
		return fmt.Sprintf("transaction %d (%s)", t.comp, t.status)
	}
	return fmt.Sprintf("transaction %d (invoked, never completed)", t.inv)
}

// findCycles builds the dependency graph and searches its strongly connected
// components.
func (an *txnAnalysis) findCycles(ctx context.Context, h *txnHistory, c *txnCheck) {
	g := an.graph
	if g != nil {
		an.edges = g.count
	} else {
		an.edges = len(an.from)
		g = an.buildGraph()
	}
	if g.empty() {
		an.add("empty-transaction-graph", txnAnomaly{
			text: "no dependency between any two transactions could be inferred: nothing in the history orders them, so nothing can be checked"})
	}
	var comps [][]int32
	var comp []int32
	if !g.acyclic {
		comps, comp = g.sccs(func() bool { return ctx.Err() != nil })
	}
	an.components = len(comps)
	for _, cc := range comps {
		an.largest = max(an.largest, len(cc))
	}
	budget := c.opt.CycleSearchTimeout
	if budget == 0 {
		budget = time.Second
	}
	for _, r := range searchComponents(ctx, g, comps, comp, budget) {
		for _, cy := range r.cycles {
			an.add(cy.kind, an.explainCycle(cy))
		}
		for _, e := range r.exists {
			name := e.spec.model + "-cycle-exists"
			an.cycleExists = append(an.cycleExists, txnAnomaly{kind: name, txns: e.txns, model: e.spec.model,
				text: fmt.Sprintf("a cycle that %s forbids exists among these %d transactions, a strongly connected component of the %s edges",
					friendly(e.spec.model), len(e.txns), e.spec.subgraphText())})
		}
		if t := r.timeout; t != nil {
			text := fmt.Sprintf("the search for a %s cycle among the %d transactions of one strongly connected component ran out of time", t.class, t.size)
			if len(t.notFound) > 0 {
				text += fmt.Sprintf(" (it had found none of: %s)", strings.Join(t.notFound, ", "))
			}
			an.add("cycle-search-timeout", txnAnomaly{text: text})
		}
	}
}

// explainCycle turns a cycle into an anomaly with one line per edge.
func (an *txnAnalysis) explainCycle(cy sccCycle) txnAnomaly {
	h := an.h
	k := len(cy.txns)
	names := make([]string, k)
	bind := make([]string, k)
	for i, id := range cy.txns {
		names[i] = fmt.Sprintf("T%d", i+1)
		bind[i] = fmt.Sprintf("%s = %s", names[i], h.name(id))
	}
	data := &cycleData{Type: cy.kind}
	lines := []string{fmt.Sprintf("a cycle of %d transactions, %s:", k, strings.Join(bind, ", "))}
	for i, a := range cy.txns {
		b := cy.txns[(i+1)%k]
		an1, bn := names[i], names[(i+1)%k]
		var line string
		var step cycleStep
		switch rel := cy.labels[i]; rel {
		case relRealtime:
			line = fmt.Sprintf("%s completed at index %d before %s was invoked at index %d", an1, h.txns[a].comp, bn, h.txns[b].inv)
			step = cycleStep{Type: rel.String(), FromMop: -1, ToMop: -1}
		case relProcess:
			p := h.txns[a].process
			line = fmt.Sprintf("process %d ran %s, then %s", p, an1, bn)
			step = cycleStep{Type: rel.String(), FromMop: -1, ToMop: -1, Process: &p}
		default:
			line, step = an.ex.explainEdge(h, a, b, rel, an1, bn)
			if line == "" {
				line = fmt.Sprintf("%s depends on %s (%s)", bn, an1, rel)
			}
		}
		step.From, step.To = h.at(a), h.at(b)
		data.Steps = append(data.Steps, step)
		lines = append(lines, fmt.Sprintf("%s < %s: %s", an1, bn, line))
		data.Ops = append(data.Ops, h.at(a))
	}
	return txnAnomaly{txns: cy.txns, text: strings.Join(lines, "\n"), cycle: data}
}

// result turns the findings into a Result, in the manner of Elle's result map: the
// anomalies the check was asked about decide; those that leave it undecided make it
// Unknown; the models named are those every anomaly found rules out.
func (an *txnAnalysis) result(h *txnHistory, c *txnCheck) Result {
	all := map[string]bool{}
	for k := range an.found {
		all[k] = true
	}
	var others []string
	for k := range an.found {
		others = append(others, k)
	}
	// A cycle-exists proof adds nothing where other anomalies rule its model out.
	ruled := impossibleModels(others)
	for _, e := range an.cycleExists {
		all[e.kind] = true
		if !ruled[e.model] {
			an.add(e.kind, e)
		}
	}
	var allKinds []string
	for k := range all {
		allKinds = append(allKinds, k)
	}
	not, alsoNot := boundary(allKinds)
	var reported []string
	bad := false
	for k := range an.found {
		if c.reportable[k] {
			reported = append(reported, k)
			bad = bad || c.prohibited[k]
		}
	}
	sort.Strings(reported)
	res := Result{Checker: h.model, Anomalies: []Anomaly{}}
	details := map[string]any{
		"transactions": len(h.txns),
		"events":       h.events,
		"edges":        an.edges,
		"components":   an.components,
	}
	if an.largest > 0 {
		details["largest_component"] = an.largest
	}
	if len(an.searches) > 0 {
		details["version_order_search"] = an.searches
	}
	asked := c.opt.ConsistencyModels
	if len(asked) == 0 && len(c.opt.Anomalies) == 0 {
		asked = []string{"strict-serializable"}
	}
	switch {
	case len(reported) == 0:
		res.Verdict = Valid
		what := strings.Join(asked, ", ")
		if len(c.opt.Anomalies) > 0 {
			what = strings.TrimPrefix(what+", "+strings.Join(c.opt.Anomalies, ", "), ", ")
		}
		res.Summary = fmt.Sprintf("%d transactions, none of the anomalies %s forbids", len(h.txns), what)
		inc := slices.DeleteFunc(incompleteModels(h.model, c.opt), func(m string) bool { return slices.Contains(an.complete, m) })
		if len(an.complete) > 0 {
			res.Summary += " (" + completeText(an.complete) + ")"
			details["complete_for"] = an.complete
		}
		if len(inc) > 0 {
			why := "whose anomalies are found only where the reads reveal them"
			if h.model == ListAppendModel {
				// The reads give each key's order up to the longest one; the order among
				// the appends after it is not searched (docs/checking.md).
				why += ", the order among a key's appends that no read saw not searched"
			}
			res.Summary += fmt.Sprintf(" (not complete for this model: %s, %s)", strings.Join(inc, ", "), why)
			details["not_complete_for"] = inc
		}
	default:
		if bad {
			res.Verdict = Invalid
		} else {
			res.Verdict = Unknown
		}
		counts := map[string]int{}
		var parts []string
		var cycles []*cycleData
		for _, k := range reported {
			f := an.found[k]
			counts[k] = f.count
			parts = append(parts, fmt.Sprintf("%s %d", k, f.count))
			for _, a := range f.items {
				res.Anomalies = append(res.Anomalies, Anomaly{Kind: k, Ops: an.opsOf(a.txns), Explanation: a.text})
				if a.cycle != nil {
					cycles = append(cycles, a.cycle)
				}
			}
		}
		details["anomaly_types"] = reported
		details["counts"] = counts
		details["not"] = not
		details["also_not"] = alsoNot
		if len(cycles) > 0 {
			details["cycles"] = cycles
		}
		if res.Verdict == Invalid {
			res.Summary = fmt.Sprintf("violates %s: %s, among %d transactions", andList(not), strings.Join(parts, ", "), len(h.txns))
		} else {
			res.Summary = fmt.Sprintf("undecided: %s, among %d transactions", strings.Join(parts, ", "), len(h.txns))
			if len(not) > 0 {
				res.Summary += fmt.Sprintf(" (what was found still rules out %s)", andList(not))
			}
		}
	}
	res.Details = map[string]json.RawMessage{}
	for k, v := range details {
		b, _ := json.Marshal(v)
		res.Details[k] = b
	}
	return res
}

// opsOf returns the history indices naming transactions.
func (an *txnAnalysis) opsOf(txns []int32) []int64 {
	ops := make([]int64, 0, len(txns))
	for _, id := range txns {
		ops = append(ops, an.h.at(id))
	}
	return ops
}

// andList joins names with commas and "and".
func andList(s []string) string {
	switch len(s) {
	case 0:
		return "no model"
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
