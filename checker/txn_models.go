package checker

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// This file holds what the transactional checkers know about isolation: which anomaly
// implies which, which consistency model implies which, and which anomalies each model
// forbids. The tables follow the hierarchy Jepsen's Elle uses (Adya's PL levels,
// Bailis et al.'s highly available models, Cerone et al.'s atomic-visibility models,
// Daudjee and Salem's strong variants), so that a verdict names the same models Elle
// names for the same anomalies. From them come the three questions a check asks:
// which anomalies would fail the models asked for, which models a set of anomalies
// rules out, and which of those are the weakest.

// anomalyImplies relates an anomaly to the anomalies its presence proves too: a G0
// cycle is also a G1c cycle (Adya), and one of a process's transactions failing to
// see another of its own also fails real-time order, since a process runs one
// transaction at a time.
var anomalyImplies = map[string][]string{
	"G0":          {"G1c", "G0-process"},
	"G0-process":  {"G1c-process", "G0-realtime"},
	"G0-realtime": {"G1c-realtime"},

	"G1a":          {"G1"},
	"G1b":          {"G1"},
	"G1c":          {"G1", "G1c-process"},
	"G1c-process":  {"G1c-realtime", "G1-process"},
	"G1c-realtime": {"G1-realtime"},
	"G1":           {"G1-process"},
	"G1-process":   {"G1-realtime"},

	"G-single-item":          {"G-single", "G-single-item-process", "G-nonadjacent-item"},
	"G-single-item-process":  {"G-single-process", "G-single-item-realtime", "G-nonadjacent-item-process"},
	"G-single-item-realtime": {"G-single-realtime", "G-nonadjacent-item-realtime"},
	"G-single":               {"G-nonadjacent", "GSIb", "G-single-process"},
	"G-single-process":       {"G-nonadjacent-process", "G-single-realtime"},
	"G-single-realtime":      {"G-nonadjacent-realtime"},

	"G-nonadjacent-item":          {"G-nonadjacent", "G2-item", "G-nonadjacent-item-process"},
	"G-nonadjacent-item-process":  {"G-nonadjacent-process", "G2-item-process", "G-nonadjacent-item-realtime"},
	"G-nonadjacent-item-realtime": {"G2-item-realtime", "G-nonadjacent-realtime"},
	"G-nonadjacent":               {"G2", "G-nonadjacent-process"},
	"G-nonadjacent-process":       {"G2-process", "G-nonadjacent-realtime"},
	"G-nonadjacent-realtime":      {"G2-realtime"},

	"G2":               {"G2-process"},
	"G2-item":          {"G2", "G2-item-process"},
	"G2-item-process":  {"G2-process", "G2-item-realtime"},
	"G2-item-realtime": {"G2-realtime"},
	"G2-process":       {"G2-realtime"},

	"GSIa": {"GSI"},
	"GSIb": {"GSI"},

	// Reads that no single order of appends explains saw state that never existed
	// as committed: a dirty read.
	"incompatible-order": {"G1a"},
	// A transaction that read what it only wrote later is a cycle of one
	// transaction with itself, read after write.
	"future-read": {"G1c"},
	// A committed append that follows an aborted one in a key's version order: the
	// aborted write was visible to a committed transaction.
	"dirty-update": {"G1a"},
	// indoubt's own class: a read saw an element that no transaction of the history
	// appended, so no committed transaction wrote what it saw.
	"garbage-read": {"G1a"},
	// Two committed transactions that read the same version of a key and both wrote
	// it: write skew on one item, and so G2-item.
	"lost-update": {"write-skew", "G2-item"},
	"write-skew":  {"G2"},

	// The axiomatic levels' cycles (txn_axiom.go): a cycle of session order and
	// write-read alone closes under every level's axiom, and each level's axiom
	// forces all the edges of the weaker ones'.
	axCausalityCycle: {axRCCycle},
	axRCCycle:        {axRACycle},
	axRACycle:        {axCCCycle},
	// A read after the transaction's own write that does not see it.
	axNotOwnWrite: {"internal"},
	// A cycle of read atomic's axiom without session order is one with it.
	axSessionlessCycle: {axRACycle},

	// No version order avoids a cycle a model forbids (txn_search_order.go): the
	// same cycles are forbidden by the stronger models, and by serializability
	// where snapshot isolation forbids them.
	"PL-SI-cycle-every-order":                             {"PL-3-cycle-every-order", "strong-session-snapshot-isolation-cycle-every-order"},
	"PL-3-cycle-every-order":                              {"strong-session-serializable-cycle-every-order"},
	"strong-session-snapshot-isolation-cycle-every-order": {"strong-snapshot-isolation-cycle-every-order", "strong-session-serializable-cycle-every-order"},
	"strong-session-serializable-cycle-every-order":       {"PL-SS-cycle-every-order"},
	"strong-snapshot-isolation-cycle-every-order":         {"PL-SS-cycle-every-order"},
}

// anomalySeverity orders anomalies that imply one another not at all but are worse
// than one another, so that the cycle search looks for the worst first: a pure write
// cycle before one with reads, data cycles before those that need process or
// real-time order.
var anomalySeverity = map[string][]string{
	"G0":           {"G1c"},
	"G0-process":   {"G1c-process"},
	"G0-realtime":  {"G1c-realtime"},
	"G1c":          {"G-single", "G2-item"},
	"G1c-process":  {"G-single-process", "G2-item-process"},
	"G1c-realtime": {"G-single-realtime", "G2-item-realtime"},
	"G2":           {"G0-process"},
	"G2-process":   {"G0-realtime"},
}

// canonicalModel maps the friendly name of a model to the name the tables use.
var canonicalModel = map[string]string{
	"consistent-view":                 "PL-2+",
	"conflict-serializable":           "PL-3",
	"cursor-stability":                "PL-CS",
	"forward-consistent-view":         "PL-FCV",
	"monotonic-snapshot-read":         "PL-MSR",
	"monotonic-view":                  "PL-2L",
	"read-committed":                  "PL-2",
	"read-uncommitted":                "PL-1",
	"repeatable-read":                 "PL-2.99",
	"serializable":                    "PL-3",
	"snapshot-isolation":              "PL-SI",
	"strict-serializable":             "PL-SS",
	"strong-serializable":             "PL-SS",
	"update-serializable":             "PL-3U",
	"strong-session-read-uncommitted": "strong-session-PL-1",
	"strong-session-read-committed":   "strong-session-PL-2",
	"strong-read-uncommitted":         "strong-PL-1",
	"strong-read-committed":           "strong-PL-2",
	// Causal consistency has one definition: the axiomatic one.
	"causal": axModelCC,
}

// askAlso are the models a name asks for besides the one it names: the axiomatic
// level of the same name (Biswas and Enea's, Cerone et al.'s), so that a history
// checked for read committed or read atomic fails where either family of
// definitions says it does. By its canonical name (PL-2) or its axiomatic one a
// model is checked alone.
var askAlso = map[string][]string{
	"read-committed": {axModelRC},
	"read-atomic":    {axModelRA},
}

// friendlyModel is canonicalModel the other way round; of the names of one model it
// keeps the one people use.
var friendlyModel = func() map[string]string {
	m := map[string]string{}
	for f, c := range canonicalModel {
		if _, ok := m[c]; !ok || f < m[c] {
			m[c] = f
		}
	}
	m["PL-3"] = "serializable"
	m["PL-SS"] = "strict-serializable"
	return m
}()

// modelImplies relates a model (canonical name) to the weaker models every history
// that satisfies it also satisfies.
var modelImplies = map[string][]string{
	// The axiomatic levels of Biswas and Enea (txn_axiom.go). They order a
	// session's transactions, every one that took part, which Adya's levels (and
	// Elle's tables after them) do not, and Elle's strong session models only among
	// committed transactions: only the models that order them as a session runs
	// them imply one (a sequential or linearizable order).
	axModelCC:                           {axModelRA, "writes-follow-reads", "PRAM"},
	axModelRA:                           {axModelRC},
	"causal-cerone":                     {"read-atomic"},
	"PL-2+":                             {"PL-CS", "PL-2L"},
	"PL-CS":                             {"PL-2"},
	"PL-FCV":                            {"PL-2+"},
	"PL-2":                              {"PL-1"},
	"PL-3":                              {"PL-2.99", "PL-3U", "PL-SI", "view-serializable"},
	"PL-3U":                             {"PL-FCV"},
	"monotonic-atomic-view":             {"PL-2"},
	"PL-2L":                             {"PL-2"},
	"PL-MSR":                            {"PL-2"},
	"parallel-snapshot-isolation":       {"causal-cerone", "update-atomic"},
	"prefix":                            {"causal-cerone"},
	"read-atomic":                       {"monotonic-atomic-view"},
	"PL-2.99":                           {"PL-CS", "monotonic-atomic-view"},
	"update-atomic":                     {"read-atomic"},
	"session-serializable":              {"1SR"},
	"PL-SI":                             {"PL-FCV", "monotonic-atomic-view", "PL-MSR", "parallel-snapshot-isolation", "prefix"},
	"PL-SS":                             {"PL-3", "linearizable", "PL-SI", "strong-snapshot-isolation", "strong-session-serializable", "session-serializable"},
	"strong-session-PL-1":               {"PL-1"},
	"strong-session-PL-2":               {"PL-2", "strong-session-PL-1"},
	"strong-PL-1":                       {"strong-session-PL-1"},
	"strong-PL-2":                       {"strong-session-PL-2", "strong-PL-1"},
	"strong-session-serializable":       {"PL-3", "strong-session-snapshot-isolation"},
	"strong-session-snapshot-isolation": {"PL-SI", "strong-session-PL-2"},
	"strong-snapshot-isolation":         {"strong-session-snapshot-isolation", "strong-PL-2"},
	"linearizable":                      {"sequential"},
	"sequential":                        {axModelCC},
	"PRAM":                              {"monotonic-reads", "monotonic-writes", "read-your-writes"},
}

// modelForbids relates a model (canonical name) to the anomalies it forbids beyond
// those of the models it implies. A model "-cycle-exists" anomaly is the proof that a
// cycle it forbids exists somewhere in a strongly connected component, when the
// search for the cycle itself ran out of time.
var modelForbids = map[string][]string{
	// Reads no commit order explains fail every axiomatic level: of an aborted
	// write (G1a), of a value never written (garbage-read), of an intermediate
	// write (G1b), of the transaction's own later write (future-read), of another
	// value than its own write (not-own-write).
	axModelRC:                           {"G1a", "G1b", "garbage-read", "future-read", axNotOwnWrite, axRCCycle},
	axModelRA:                           {axRACycle},
	axModelCC:                           {axCCCycle},
	"causal-cerone":                     {"internal", "G1a"},
	"PL-CS":                             {"G1", "G-cursor", "lost-update"},
	"PL-2L":                             {"G1", "G-monotonic"},
	"PL-MSR":                            {"G1", "G-MSR"},
	"PL-2+":                             {"G1", "G-single", axSessionlessCycle},
	"PL-FCV":                            {"G1", "G-SIb"},
	"parallel-snapshot-isolation":       {"internal", "G1a"},
	"PL-3":                              {"G1", "G2", "predicate-read-miss", "PL-3-cycle-exists", "internal", "PL-3-cycle-every-order"},
	"PL-2":                              {"G1", "PL-2-cycle-exists"},
	"PL-1":                              {"G0", "duplicate-elements", "cyclic-versions", "PL-1-cycle-exists"},
	"prefix":                            {"internal", "G1a"},
	"PL-SI":                             {"internal", "G1", "G-SI", "G-nonadjacent", "PL-SI-cycle-exists", "PL-SI-cycle-every-order"},
	"read-atomic":                       {"internal", "G1a", "future-read", axSessionlessCycle},
	"PL-2.99":                           {"G1", "G2-item", "PL-2.99-cycle-exists", "lost-update", axSessionlessCycle},
	"update-atomic":                     {"lost-update"},
	"PL-SS":                             {"G1", "G1c-realtime", "G2-realtime", "PL-SS-cycle-exists", "PL-SS-cycle-every-order"},
	"strong-session-PL-1":               {"strong-session-PL-1-cycle-exists", "G0-process"},
	"strong-session-PL-2":               {"strong-session-PL-2-cycle-exists", "G1c-process"},
	"strong-PL-1":                       {"strong-PL-1-cycle-exists", "G0-realtime"},
	"strong-PL-2":                       {"strong-PL-2-cycle-exists", "G1c-realtime"},
	"strong-session-snapshot-isolation": {"internal", "G1-process", "G-nonadjacent-process", "strong-session-snapshot-isolation-cycle-exists", "strong-session-snapshot-isolation-cycle-every-order"},
	"strong-snapshot-isolation":         {"internal", "G1-realtime", "G-nonadjacent-realtime", "strong-snapshot-isolation-cycle-exists", "strong-snapshot-isolation-cycle-every-order"},
	"strong-session-serializable":       {"G1-process", "G2-process", "strong-session-serializable-cycle-exists", "strong-session-serializable-cycle-every-order"},
	"PL-3U":                             {"G1", "G-update"},
}

// reverse returns the edges of g the other way round.
func reverse(g map[string][]string) map[string][]string {
	r := map[string][]string{}
	for a, bs := range g {
		for _, b := range bs {
			r[b] = append(r[b], a)
		}
	}
	return r
}

var (
	anomalyImpliedBy = reverse(anomalyImplies)
	modelImpliedBy   = reverse(modelImplies)
	modelsForbidding = reverse(modelForbids)
)

// closure returns the names reachable from start in g, start included, as a set.
func closure(g map[string][]string, start ...string) map[string]bool {
	seen := map[string]bool{}
	stack := append([]string(nil), start...)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		stack = append(stack, g[n]...)
	}
	return seen
}

// knownModels is every model name the tables know, friendly and canonical.
var knownModels = func() map[string]bool {
	m := map[string]bool{}
	for f, c := range canonicalModel {
		m[f], m[c] = true, true
	}
	for a, bs := range modelImplies {
		m[a] = true
		for _, b := range bs {
			m[b] = true
		}
	}
	for a := range modelForbids {
		m[a] = true
	}
	return m
}()

// forbidsNothing reports whether model m (canonical), with every model it implies,
// forbids no anomaly the checkers can find: such a model (the session guarantees on
// their own, view serializability, one-copy serializability) would call every
// history valid, so it is refused rather than checked.
func forbidsNothing(m string) bool {
	for w := range closure(modelImplies, m) {
		if len(modelForbids[w]) > 0 {
			return false
		}
	}
	return true
}

// TxnConsistencyModels lists the consistency models the transactional checkers know,
// by their friendly names where they have one, sorted: the values
// TxnOptions.ConsistencyModels accepts (their canonical Adya names, such as PL-2.99,
// are accepted too).
var TxnConsistencyModels = func() []string {
	seen := map[string]bool{}
	for m := range knownModels {
		if forbidsNothing(canonical(m)) {
			continue
		}
		if f, ok := friendlyModel[m]; ok {
			m = f
		}
		seen[m] = true
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}()

// TxnAnomalies lists the anomaly names the transactional checkers know, sorted: the
// values TxnOptions.Anomalies accepts.
var TxnAnomalies = func() []string {
	seen := map[string]bool{"cycle-search-timeout": true, "empty-transaction-graph": true}
	for a, bs := range anomalyImplies {
		seen[a] = true
		for _, b := range bs {
			seen[b] = true
		}
	}
	for _, as := range modelForbids {
		for _, a := range as {
			seen[a] = true
		}
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}()

// canonical returns the canonical name of model m.
func canonical(m string) string {
	if c, ok := canonicalModel[m]; ok {
		return c
	}
	return m
}

// friendly returns the friendly name of canonical model m.
func friendly(m string) string {
	if f, ok := friendlyModel[m]; ok {
		return f
	}
	return m
}

// checkModelNames refuses a model name the tables do not know, naming the known ones.
func checkModelNames(ms []string) error {
	for _, m := range ms {
		if !knownModels[m] {
			return fmt.Errorf("unknown consistency model %q (known: %s)", m, strings.Join(TxnConsistencyModels, ", "))
		}
		if forbidsNothing(canonical(m)) {
			return fmt.Errorf("consistency model %q forbids nothing the transactional checkers can observe, so it would call every history valid: refused (known: %s)", m, strings.Join(TxnConsistencyModels, ", "))
		}
	}
	return nil
}

// checkAnomalyNames refuses an anomaly name the tables do not know.
func checkAnomalyNames(as []string) error {
	for _, a := range as {
		if !slices.Contains(TxnAnomalies, a) {
			return fmt.Errorf("unknown anomaly %q (known: %s)", a, strings.Join(TxnAnomalies, ", "))
		}
	}
	return nil
}

// prohibitedAnomalies returns the anomalies that would fail a history checked for
// models and for the named anomalies: every anomaly a model (or a weaker model it
// implies) forbids, every named one, and every anomaly that implies one of those.
func prohibitedAnomalies(models, anomalies []string) map[string]bool {
	var cm []string
	for _, m := range models {
		cm = append(cm, canonical(m))
		cm = append(cm, askAlso[m]...)
	}
	var direct []string
	for m := range closure(modelImplies, cm...) {
		direct = append(direct, modelForbids[m]...)
	}
	direct = append(direct, anomalies...)
	return closure(anomalyImpliedBy, direct...)
}

// impossibleModels returns the canonical models that the anomalies rule out: every
// model that forbids one of them or one they imply, and every stronger model.
func impossibleModels(anomalies []string) map[string]bool {
	var forbidding []string
	for a := range closure(anomalyImplies, anomalies...) {
		forbidding = append(forbidding, modelsForbidding[a]...)
	}
	return closure(modelImpliedBy, forbidding...)
}

// weakestModels returns the models of an upward-closed set that imply no other model
// of the set: the weakest ones ruled out, which name what a history fails.
func weakestModels(impossible map[string]bool) map[string]bool {
	out := map[string]bool{}
	for m := range impossible {
		weakest := true
		for w := range closure(modelImplies, m) {
			if w != m && impossible[w] {
				weakest = false
				break
			}
		}
		if weakest {
			out[m] = true
		}
	}
	return out
}

// boundary returns, as sorted friendly names, the weakest models the anomalies rule
// out (Elle's :not) and the other models they rule out (its :also-not).
func boundary(anomalies []string) (not, alsoNot []string) {
	imp := impossibleModels(anomalies)
	weak := weakestModels(imp)
	for m := range imp {
		if weak[m] {
			not = append(not, friendly(m))
		} else {
			alsoNot = append(alsoNot, friendly(m))
		}
	}
	sort.Strings(not)
	sort.Strings(alsoNot)
	return dedupSorted(not), dedupSorted(alsoNot)
}

// dedupSorted removes adjacent repeats from a sorted slice.
func dedupSorted(s []string) []string {
	return slices.Compact(s)
}

// anomalyDepth orders anomalies for the cycle search, fewest implications above them
// first: the length of the longest chain of implication or severity that leads to an
// anomaly, 0 for one nothing leads to.
var anomalyDepth = func() map[string]int {
	g := map[string][]string{}
	for _, src := range []map[string][]string{anomalyImplies, anomalySeverity} {
		for a, bs := range src {
			g[a] = append(g[a], bs...)
		}
	}
	depth := map[string]int{}
	var visit func(string, int)
	visit = func(a string, d int) {
		if old, ok := depth[a]; ok && old >= d {
			return
		}
		depth[a] = d
		for _, b := range g[a] {
			visit(b, d+1)
		}
	}
	into := reverse(g)
	for a := range g {
		if len(into[a]) == 0 {
			visit(a, 0)
		}
	}
	for _, as := range modelForbids {
		for _, a := range as {
			if _, ok := depth[a]; !ok {
				depth[a] = 0
			}
		}
	}
	return depth
}()

// lessAnomaly orders anomaly names by depth, then by name.
func lessAnomaly(a, b string) bool {
	if da, db := anomalyDepth[a], anomalyDepth[b]; da != db {
		return da < db
	}
	return a < b
}
