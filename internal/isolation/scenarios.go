// Package isolation measures Hermitage's table on a real PostgreSQL: for each
// isolation level, the interleavings that provoke each anomaly are driven statement by
// statement over two or three sessions, the transactions they made are judged by the
// transactional checker (checker.CheckListAppend), and the table says, per anomaly and
// level, whether the anomaly was prevented or observed (with the cycle the checker
// found), and how it was prevented: a session blocked on a lock, a transaction aborted
// with an SQLSTATE, or neither. The random list-append workload at each level gives
// the cost columns: throughput, latency and conflict aborts per committed transaction.
//
// The table is Hermitage's test (id int PRIMARY KEY, value int) with one column more:
// versions, every value the row has held in order, which each UPDATE extends in the
// same statement (SET value = 11, versions = versions || 11). It changes nothing of
// what the statements lock, block on or see, and gives the checker each row's exact
// version order: a read of a row is a list-append read of its versions, a write an
// append, so the checker infers every write-write, write-read and read-write
// dependency instead of guessing them from single values.
//
// Hermitage (ept/hermitage) is the reference: its table for PostgreSQL says READ
// COMMITTED prevents G0, G1a, G1b, G1c and OTV, REPEATABLE READ everything but G2-item
// and G2, and SERIALIZABLE everything. A cell that differs is a Finding, reported with
// the statements and results that show it.
package isolation

import (
	"fmt"
	"strings"
)

// Level is an isolation level as the runner names it.
type Level string

// The levels PostgreSQL implements.
const (
	ReadCommitted  Level = "read-committed"
	RepeatableRead Level = "repeatable-read"
	Serializable   Level = "serializable"
)

// Levels are PostgreSQL's levels, weakest first.
var Levels = []Level{ReadCommitted, RepeatableRead, Serializable}

func (l Level) sql() string { return strings.ToUpper(strings.ReplaceAll(string(l), "-", " ")) }

// op is what a step does.
type op int

const (
	opRead   op = iota // SELECT value WHERE id = key
	opWrite            // UPDATE ... SET value = v WHERE id = key
	opInsert           // INSERT (key, v)
	opPred             // SELECT id, value WHERE <predicate>
	opCommit
	opAbort
)

// step is one statement of one session. Sessions are numbered from 1; a session's
// first step opens its transaction at the level under test.
type step struct {
	s     int
	op    op
	key   int
	value int
	// pred is a predicate read's WHERE clause and match the same in Go; absent are
	// the keys the read reads as absent when it does not return them (see predicate
	// reads in scenario).
	pred   string
	match  func(v int) bool
	absent []int
}

// scenario is one of Hermitage's interleavings. Before it, the table holds (1, 10)
// and (2, 20), written by a transaction of its own; after it, one transaction reads
// every key.
//
// A predicate read is judged as reads of items: each row it returns is a read of
// that key's value, and each key of absent it does not return is a read of that key
// as absent. That is sound because every value the scenario writes to a key of absent
// matches the predicate (validate checks it) and the key starts absent: a predicate
// read that missed the key saw it before its insert.
type scenario struct {
	name  string // Hermitage's name of the anomaly
	title string
	steps []step
	// kinds are the checker's anomaly kinds that are this anomaly (a kind matches
	// itself and its refinements: G-single matches G-single-item), among the sessions
	// of among exactly.
	kinds []string
	among []int
	// internal also counts the checker's "internal" anomaly of session among[0]: two
	// reads of one key in a transaction that disagree with no write of its own between
	// them. The checker judges a transaction's first read of a key in its dependency
	// graph and names a later read that disagrees this way, with no cycle to draw: it
	// is how a predicate read that changed inside a transaction (PMP) appears in items.
	internal bool
	// hermitage are the levels at which Hermitage's table says PostgreSQL lets the
	// anomaly happen.
	hermitage []Level
}

func r(s, k int) step      { return step{s: s, op: opRead, key: k} }
func w(s, k, v int) step   { return step{s: s, op: opWrite, key: k, value: v} }
func ins(s, k, v int) step { return step{s: s, op: opInsert, key: k, value: v} }
func commit(s int) step    { return step{s: s, op: opCommit} }
func abort(s int) step     { return step{s: s, op: opAbort} }
func eq30(v int) bool      { return v == 30 }
func mod3(v int) bool      { return v%3 == 0 }
func pred(s int, where string, m func(int) bool, absent ...int) step {
	return step{s: s, op: opPred, pred: where, match: m, absent: absent}
}

// Scenarios are the anomalies in Hermitage's order.
var scenarios = []scenario{
	{name: "G0", title: "write cycles (dirty writes)", kinds: []string{"G0"}, among: []int{1, 2},
		steps: []step{w(1, 1, 11), w(2, 1, 12), w(1, 2, 21), commit(1), w(2, 2, 22), commit(2)}},
	{name: "G1a", title: "aborted reads", kinds: []string{"G1a"}, among: []int{1, 2},
		steps: []step{w(1, 1, 101), r(2, 1), abort(1), r(2, 1), commit(2)}},
	{name: "G1b", title: "intermediate reads", kinds: []string{"G1b"}, among: []int{1, 2},
		steps: []step{w(1, 1, 101), r(2, 1), w(1, 1, 11), commit(1), r(2, 1), commit(2)}},
	{name: "G1c", title: "circular information flow", kinds: []string{"G1c"}, among: []int{1, 2},
		steps: []step{w(1, 1, 11), w(2, 2, 22), r(1, 2), r(2, 1), commit(1), commit(2)}},
	{name: "OTV", title: "observed transaction vanishes", kinds: []string{"G1c", "G-single", "G2-item", "G2"}, among: []int{1, 3},
		steps: []step{w(1, 1, 11), w(1, 2, 19), w(2, 1, 12), commit(1), r(3, 1), w(2, 2, 18), r(3, 2), commit(2), r(3, 2), r(3, 1), commit(3)}},
	{name: "PMP", title: "predicate-many-preceders", kinds: []string{"G-single", "G2"}, among: []int{1, 2}, internal: true,
		hermitage: []Level{ReadCommitted},
		steps:     []step{pred(1, "value = 30", eq30, 3), ins(2, 3, 30), commit(2), pred(1, "value % 3 = 0", mod3, 3), commit(1)}},
	{name: "P4", title: "lost update", kinds: []string{"lost-update"}, among: []int{1, 2},
		hermitage: []Level{ReadCommitted},
		steps:     []step{r(1, 1), r(2, 1), w(1, 1, 11), w(2, 1, 12), commit(1), commit(2)}},
	{name: "G-single", title: "single anti-dependency cycles (read skew)", kinds: []string{"G-single"}, among: []int{1, 2},
		hermitage: []Level{ReadCommitted},
		steps:     []step{r(1, 1), r(2, 1), r(2, 2), w(2, 1, 12), w(2, 2, 18), commit(2), r(1, 2), commit(1)}},
	{name: "G2-item", title: "item anti-dependency cycles (write skew)", kinds: []string{"G2-item"}, among: []int{1, 2},
		hermitage: []Level{ReadCommitted, RepeatableRead},
		steps:     []step{r(1, 1), r(1, 2), r(2, 1), r(2, 2), w(1, 1, 11), w(2, 2, 21), commit(1), commit(2)}},
	{name: "G2", title: "anti-dependency cycles (write skew on a predicate)", kinds: []string{"G2-item", "G2"}, among: []int{1, 2},
		hermitage: []Level{ReadCommitted, RepeatableRead},
		steps:     []step{pred(1, "value % 3 = 0", mod3, 3, 4), pred(2, "value % 3 = 0", mod3, 3, 4), ins(1, 3, 30), ins(2, 4, 42), commit(1), commit(2)}},
}

// validate checks what the judging of predicate reads relies on: every value
// written to a key a predicate read may read as absent matches that predicate, and
// values are unique per key.
func (sc scenario) validate() error {
	seen := map[[2]int]bool{{1, 10}: true, {2, 20}: true}
	for _, st := range sc.steps {
		if st.op == opWrite || st.op == opInsert {
			if seen[[2]int{st.key, st.value}] {
				return fmt.Errorf("%s writes %d to key %d twice", sc.name, st.value, st.key)
			}
			seen[[2]int{st.key, st.value}] = true
		}
	}
	for _, p := range sc.steps {
		if p.op != opPred {
			continue
		}
		for _, st := range sc.steps {
			if (st.op == opWrite || st.op == opInsert) && contains(p.absent, st.key) && !p.match(st.value) {
				return fmt.Errorf("%s writes %d to key %d, which its predicate %q does not match", sc.name, st.value, st.key, p.pred)
			}
		}
		for _, k := range p.absent {
			if k == 1 || k == 2 {
				return fmt.Errorf("%s reads key %d as absent, which exists from the start", sc.name, k)
			}
		}
	}
	return nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// sessions is the number of sessions sc drives.
func (sc scenario) sessions() int {
	n := 0
	for _, st := range sc.steps {
		n = max(n, st.s)
	}
	return n
}

// Anomalies are the names of the anomalies Run measures, in order.
func Anomalies() []string {
	var n []string
	for _, sc := range scenarios {
		n = append(n, sc.name)
	}
	return n
}
