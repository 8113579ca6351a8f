package report

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
)

// What an isolation verdict leaves unsaid: what the store promises at the level the
// history was checked for, and whether an acknowledged write was lost (a lost-update
// cycle says two transactions read the same state and both wrote, not that a write
// vanished).

// levelPromises is, per store and consistency model named as a store's isolation
// level, what the store promises at that level: PostgreSQL's documentation, and
// MariaDB's InnoDB as Hermitage measured MySQL and docs/mysql.md measured MariaDB 10.11.
var levelPromises = map[string]map[string]string{
	"postgres": {
		"read-committed": "PostgreSQL's READ COMMITTED promises no dirty reads or writes, each statement seeing what was committed before it began: lost updates and read skew are allowed",
		"repeatable-read": "PostgreSQL's REPEATABLE READ is snapshot isolation: one snapshot per transaction and no lost update, but write skew (G2-item) is allowed, which repeatable-read as checked here forbids; " +
			"check with --consistency-models snapshot-isolation for what PostgreSQL promises",
		"snapshot-isolation": "PostgreSQL's REPEATABLE READ is snapshot isolation: one snapshot per transaction, no lost update; write skew (G2-item) is allowed",
		"serializable":       "PostgreSQL's SERIALIZABLE promises the effect of some serial order of the committed transactions (serializable snapshot isolation)",
	},
	"mysql": {
		"read-committed": "InnoDB's READ COMMITTED (MySQL, MariaDB) promises no dirty reads or writes; Hermitage measured it as monotonic atomic view",
		"repeatable-read": "InnoDB's REPEATABLE READ (MySQL, MariaDB with innodb_snapshot_isolation off, its default) is not repeatable read as checked here: its reads share a snapshot, but lost updates (P4) are let through, as Hermitage measured; " +
			"it promises read committed",
		"serializable": "InnoDB's SERIALIZABLE is REPEATABLE READ with every read a locking read: serializable",
	},
}

// levelPromise says what r's store promises at each consistency model r's history was
// checked for that names one of its levels; "" when none is known.
func levelPromise(r *results.Results) string {
	if r.Txn == nil {
		return ""
	}
	var out []string
	for _, m := range r.Txn.Models {
		if p := levelPromises[r.Store][m]; p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ". ")
}

// appendTally finds acknowledged appends of a list-append history missing from a later
// read: per key, the values appended by transactions that completed ok, the time the
// last of them was acknowledged, and the reads (their invocation time and list).
type appendTally struct {
	acked    map[string][]string // key → values appended, acknowledged
	lastAck  map[string]int64
	reads    map[string][]tallyRead
	notTally bool // a value not a list-append transaction
}

type tallyRead struct {
	invoked int64
	list    map[string]bool
}

// add records one completed operation, invoked at invoked.
func (t *appendTally) add(invoked int64, done histories.Op) {
	if done.Type != histories.OK || len(done.Value) == 0 {
		return
	}
	var mops [][]json.RawMessage
	if json.Unmarshal(done.Value, &mops) != nil {
		t.notTally = true
		return
	}
	if t.acked == nil {
		t.acked, t.lastAck, t.reads = map[string][]string{}, map[string]int64{}, map[string][]tallyRead{}
	}
	for _, m := range mops {
		if len(m) != 3 {
			continue
		}
		var f string
		_ = json.Unmarshal(m[0], &f)
		key := string(m[1])
		switch f {
		case "append":
			t.acked[key] = append(t.acked[key], string(m[2]))
			t.lastAck[key] = max(t.lastAck[key], done.Time)
		case "r":
			var l []json.RawMessage
			if json.Unmarshal(m[2], &l) != nil {
				continue
			}
			set := map[string]bool{}
			for _, v := range l {
				set[string(v)] = true
			}
			t.reads[key] = append(t.reads[key], tallyRead{invoked, set})
		}
	}
}

// maxLostShown bounds the lost appends a sentence names.
const maxLostShown = 3

// sentences say whether any acknowledged append was lost: for each key, a read begun
// after its last acknowledged append must hold every one of them.
func (t *appendTally) sentences() []string {
	if t.notTally || len(t.acked) == 0 {
		return nil
	}
	var lost []string
	checked, unread := 0, 0
	keys := make([]string, 0, len(t.acked))
	for k := range t.acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var after []tallyRead
		for _, r := range t.reads[k] {
			if r.invoked > t.lastAck[k] {
				after = append(after, r)
			}
		}
		if len(after) == 0 {
			unread++
			continue
		}
		checked++
		// The read that holds the most of them: a read missing one another read has
		// is not what says it was lost.
		best := slices.MaxFunc(after, func(a, b tallyRead) int { return len(a.list) - len(b.list) })
		for _, v := range t.acked[k] {
			if !best.list[v] {
				lost = append(lost, fmt.Sprintf("%s to key %s", v, k))
			}
		}
	}
	var out []string
	switch {
	case len(lost) > 0:
		shown := lost[:min(len(lost), maxLostShown)]
		more := ""
		if len(lost) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(lost)-len(shown))
		}
		out = append(out, fmt.Sprintf("%d acknowledged %s missing from every read begun after %s acknowledged: %s%s",
			len(lost), plural(len(lost), "append is", "appends are"), plural(len(lost), "it was", "they were"), strings.Join(shown, ", "), more))
	case checked > 0:
		out = append(out, fmt.Sprintf("no acknowledged write was lost: a read of each of the %d %s written, begun after its last acknowledged append, holds every one", checked, plural(checked, "key", "keys")))
	}
	if unread > 0 {
		out = append(out, fmt.Sprintf("for %d %s no read began after the last acknowledged append: whether a write was lost there is not known", unread, plural(unread, "key", "keys")))
	}
	return out
}

// IsolationNotes are the sentences an isolation verdict needs beside its anomalies:
// what the store promises at the level checked, and, for list-append, whether any
// acknowledged append was lost, from ops (the history; nil when not at hand).
func IsolationNotes(r *results.Results, ops []histories.Op) []string {
	if r.Txn == nil {
		return nil
	}
	var out []string
	if p := levelPromise(r); p != "" {
		out = append(out, p)
	}
	var t appendTally
	pairs, err := histories.Pair(ops)
	if err != nil {
		return out
	}
	for _, o := range pairs {
		if o.Complete != nil {
			t.add(o.Invoke.Time, *o.Complete)
		}
	}
	return append(out, t.sentences()...)
}

// LostWriteNotes are the sentences of IsolationNotes that say whether an acknowledged
// write was lost, without the store's promise (which WriteSummary prints itself).
func LostWriteNotes(r *results.Results, ops []histories.Op) []string {
	notes := IsolationNotes(r, ops)
	if p := levelPromise(r); p != "" && len(notes) > 0 && notes[0] == p {
		notes = notes[1:]
	}
	return notes
}
