package results

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/workloads"
)

// figureDefs are the named figures of a run that suites bound and compare shows. Each
// reads results.json's values; ok is false when the run has no such figure (a balance
// for a counter run). Counts are exact even when results.json lists fewer items
// (--max-anomalies).
var figureDefs = []struct {
	name, doc string
	get       func(r *Results) (float64, bool)
}{
	{"invoked", "operations invoked (final reads included)", func(r *Results) (float64, bool) { return float64(r.Ops.Invoked), true }},
	{"ok", "operations that ended ok", func(r *Results) (float64, bool) { return float64(r.Ops.OK), true }},
	{"fail", "operations that ended fail", func(r *Results) (float64, bool) { return float64(r.Ops.Fail), true }},
	{"info", "operations that ended info (outcome unknown)", func(r *Results) (float64, bool) { return float64(r.Ops.Info), true }},
	{"throughput", "completed operations per second", func(r *Results) (float64, bool) { return r.Throughput, true }},
	{"duration_s", "length of the run in seconds", func(r *Results) (float64, bool) { return r.DurationS, true }},
	{"p50_ms", "median latency in ms", func(r *Results) (float64, bool) { return r.LatencyMs.P50, true }},
	{"p95_ms", "95th percentile latency in ms", func(r *Results) (float64, bool) { return r.LatencyMs.P95, true }},
	{"p99_ms", "99th percentile latency in ms", func(r *Results) (float64, bool) { return r.LatencyMs.P99, true }},
	{"max_ms", "largest latency in ms", func(r *Results) (float64, bool) { return r.LatencyMs.Max, true }},
	{"retries", "attempts beyond the first, all outcomes", func(r *Results) (float64, bool) { return float64(r.Retries.Total), true }},
	{"retries_per_success", "retries of the operations that succeeded per success", func(r *Results) (float64, bool) {
		return r.Outcomes.RetriesPerSuccess()
	}},
	{"failed", "operations that failed (retries exhausted or non-retryable)", func(r *Results) (float64, bool) { return float64(r.Outcomes.Failed()), true }},
	{"conflicts", "compare-and-set rounds lost inside store mechanisms", func(r *Results) (float64, bool) { return float64(r.Conflicts), true }},
	{"faults", "faults the proxy fired, all kinds", func(r *Results) (float64, bool) {
		var n int64
		for _, v := range r.Faults.ByKind {
			n += v
		}
		return float64(n), true
	}},
	{"cuts", "commits the proxy cut after the server applied them", func(r *Results) (float64, bool) { return float64(r.Faults.ByKind["commit-cut"]), true }},
	{"drops", "commits the proxy dropped before the server saw them", func(r *Results) (float64, bool) { return float64(r.Faults.ByKind["commit-drop"]), true }},
	{"anomalies", "anomalies the checker found", func(r *Results) (float64, bool) { return float64(r.AnomalyTotal()), true }},
	{"double_applied", "operations the ground truth proves took effect more than once", func(r *Results) (float64, bool) {
		if r.Evidence == nil {
			return 0, true
		}
		return float64(r.Evidence.AppliedTwiceTotal()), true
	}},
	{"committed_twice", "operations committed twice with a reply that does not show what changed", func(r *Results) (float64, bool) {
		if r.Evidence == nil {
			return 0, true
		}
		return float64(r.Evidence.CommittedTwiceTotal()), true
	}},
	{"disagreements", "places where the checker and the ground truth disagree", func(r *Results) (float64, bool) {
		if r.Evidence == nil {
			return 0, true
		}
		return float64(len(r.Evidence.Disagreements)), true
	}},
	{"applied", "operations acknowledged as applied (budget: decrements)", func(r *Results) (float64, bool) { return ptr(r.FinalFigures().Applied) }},
	{"rejected", "operations acknowledged as rejected by the workload's rule", func(r *Results) (float64, bool) { return ptr(r.FinalFigures().Rejected) }},
	{"final", "the final value read back (a balance, a counter)", func(r *Results) (float64, bool) { return ptr(r.FinalFigures().Value) }},
	{"lost", "counter: acknowledged increments missing from the final value", func(r *Results) (float64, bool) {
		if f := r.FinalFigures().Reconciliation; f != nil {
			return float64(f.Lost), true
		}
		return 0, false
	}},
	{"extra", "counter: increments in the final value that were never acknowledged", func(r *Results) (float64, bool) {
		if f := r.FinalFigures().Reconciliation; f != nil {
			return float64(f.Extra), true
		}
		return 0, false
	}},
	{"lost_writes", "acknowledged writes a fault lost (a failover, a partition, a power loss)", func(r *Results) (float64, bool) { return float64(r.LostTotal()), true }},
	{"process_faults", "process faults applied to launched servers (kill, pause, restart, failover, power loss)", func(r *Results) (float64, bool) {
		var n int
		for _, f := range r.ProcessFaults {
			if f.Error == "" {
				n++
			}
		}
		return float64(n), true
	}},
	{"partitions", "partitions made between the nodes of a topology", func(r *Results) (float64, bool) { return float64(len(r.Partitions)), true }},
	{"in_doubt", "transfer, two-rows: transaction branches a coordinator crash left prepared until recovery", func(r *Results) (float64, bool) {
		if r.TwoPhase == nil {
			return 0, false
		}
		if r.TwoPhase.Crash == nil {
			return 0, true
		}
		return float64(len(r.TwoPhase.Crash.InDoubt)), true
	}},
	{"abandoned", "transfer, two-rows: transactions whose outcome the client was not told (recovery decided)", func(r *Results) (float64, bool) {
		if r.TwoPhase == nil {
			return 0, false
		}
		return float64(r.TwoPhase.Transactions.Abandoned), true
	}},
}

func ptr(v *int64) (float64, bool) {
	if v == nil {
		return 0, false
	}
	return float64(*v), true
}

// Figure returns the named figure of a run; ok is false when the name is unknown or the
// run has no such figure.
func Figure(r *Results, name string) (v float64, ok bool) {
	for _, d := range figureDefs {
		if d.name == name {
			return d.get(r)
		}
	}
	return 0, false
}

// FigureNames lists the figures Figure knows, in a stable order, each with what it means.
func FigureNames() [][2]string {
	out := make([][2]string, len(figureDefs))
	for i, d := range figureDefs {
		out[i] = [2]string{d.name, d.doc}
	}
	return out
}

// IsFigure reports whether name is a figure Figure knows.
func IsFigure(name string) bool {
	for _, d := range figureDefs {
		if d.name == name {
			return true
		}
	}
	return false
}

// Bound is a condition on one figure: OP NUMBER, where OP is one of == != < <= > >=,
// for example "> 0" or "== 0"; several conditions joined with "and" must all hold
// ("> 0 and < 500").
type Bound struct {
	Text  string
	terms []boundTerm
}

type boundTerm struct {
	op string
	v  float64
}

var boundRE = regexp.MustCompile(`^\s*(==|!=|<=|>=|<|>)\s*(-?[0-9]+(?:\.[0-9]+)?)\s*$`)

// ParseBound reads a bound; the error says what form it wants.
func ParseBound(s string) (Bound, error) {
	b := Bound{Text: strings.TrimSpace(s)}
	for _, part := range strings.Split(s, " and ") {
		m := boundRE.FindStringSubmatch(part)
		if m == nil {
			return Bound{}, fmt.Errorf("bound %q: want OP NUMBER (OP one of == != < <= > >=), optionally joined with \"and\", e.g. \"> 0\"", s)
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		b.terms = append(b.terms, boundTerm{m[1], v})
	}
	return b, nil
}

// Holds reports whether v satisfies every condition of the bound.
func (b Bound) Holds(v float64) bool {
	const eps = 1e-9
	for _, t := range b.terms {
		var ok bool
		switch t.op {
		case "==":
			ok = math.Abs(v-t.v) < eps
		case "!=":
			ok = math.Abs(v-t.v) >= eps
		case "<":
			ok = v < t.v
		case "<=":
			ok = v <= t.v
		case ">":
			ok = v > t.v
		case ">=":
			ok = v >= t.v
		}
		if !ok {
			return false
		}
	}
	return true
}

// FormatFigure shows a figure: whole numbers without decimals.
func FormatFigure(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// AnomalyTotal is the number of anomalies the checker found, which results.json may list
// fewer of.
func (r *Results) AnomalyTotal() int {
	return max(r.AnomalyCount, len(r.Anomalies))
}

// AppliedTwiceTotal is the number of operations proven applied more than once.
func (e *Evidence) AppliedTwiceTotal() int { return max(e.AppliedTwiceCount, len(e.AppliedTwice)) }

// CommittedTwiceTotal is the number of operations committed twice.
func (e *Evidence) CommittedTwiceTotal() int {
	return max(e.CommittedTwiceCount, len(e.CommittedTwice))
}

// ReplaysTotal is the number of operations proven replayed.
func (e *Evidence) ReplaysTotal() int { return max(e.ReplaysCount, len(e.Replays)) }

// RequestsTotal is the number of API request sentences, listed or not.
func (e *Evidence) RequestsTotal() int { return max(e.RequestsCount, len(e.Requests)) }

// AmbiguousTotal is the number of operations a fault hit.
func (e *Evidence) AmbiguousTotal() int { return max(e.AmbiguousCount, len(e.Ambiguous)) }

// DefaultMaxAnomalies is how many anomalies and ground-truth items results.json and the
// console list by default.
const DefaultMaxAnomalies = 20

// Trim bounds the lists of anomalies and of ground-truth items to n each, after
// recording their exact counts, so that results.json of a faulted run stays small.
// n < 0 keeps everything. The operations the kept items name are the first ones, in the
// checker's and the evidence's order.
func (r *Results) Trim(n int) {
	// Counts already recorded (a results.json read back) stay: trimming twice keeps them.
	r.AnomalyCount = r.AnomalyTotal()
	if len(r.AnomalyKinds) == 0 && len(r.Anomalies) > 0 {
		r.AnomalyKinds = map[string]int{}
		for _, a := range r.Anomalies {
			r.AnomalyKinds[a.Kind]++
		}
	}
	if e := r.Evidence; e != nil {
		if len(e.TimesApplied) == 0 && len(e.AppliedTwice) > 0 {
			e.TimesApplied = map[int]int{}
			for _, a := range e.AppliedTwice {
				e.TimesApplied[max(a.Times, 2)]++
			}
		}
		e.AppliedTwiceCount, e.CommittedTwiceCount, e.AmbiguousCount, e.ReplaysCount = e.AppliedTwiceTotal(), e.CommittedTwiceTotal(), e.AmbiguousTotal(), e.ReplaysTotal()
		e.RequestsCount = e.RequestsTotal()
	}
	if n < 0 {
		return
	}
	r.Anomalies = r.Anomalies[:min(n, len(r.Anomalies))]
	if e := r.Evidence; e != nil {
		e.AppliedTwice = e.AppliedTwice[:min(n, len(e.AppliedTwice))]
		e.CommittedTwice = e.CommittedTwice[:min(n, len(e.CommittedTwice))]
		e.Ambiguous = e.Ambiguous[:min(n, len(e.Ambiguous))]
		e.Replays = e.Replays[:min(n, len(e.Replays))]
		e.Requests = e.Requests[:min(n, len(e.Requests))]
	}
}

// Grouped says how many times the operations proven applied more than once took effect:
// "2× 120, 3× 30, 4× 13", over every such operation, listed or not.
func (e *Evidence) Grouped() string {
	by := e.TimesApplied
	if len(by) == 0 {
		by = map[int]int{}
		for _, a := range e.AppliedTwice {
			by[max(a.Times, 2)]++
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		parts = append(parts, fmt.Sprintf("%d× %d", k, by[k]))
	}
	return strings.Join(parts, ", ")
}

// AnomalyCountOf returns how many anomalies a checker found: its Details["anomalies"]
// when it bounds its list (the budget and counter checkers list at most 100), else the
// length of the list.
func AnomalyCountOf(v checker.Result) int {
	n := len(v.Anomalies)
	if raw, ok := v.Details["anomalies"]; ok {
		var all int
		if json.Unmarshal(raw, &all) == nil && all > n {
			n = all
		}
	}
	return n
}

// FinalFigures returns the figures of r's final state, none when it has no final state.
func (r *Results) FinalFigures() workloads.Figures {
	if r.Final == nil {
		return workloads.Figures{}
	}
	return r.Final.Figures()
}
