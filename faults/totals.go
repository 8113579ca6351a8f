package faults

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/faults/toxics"
)

// Totals counts the commit faults that fired, by what their ground truth proves. Add
// each event as it arrives; the zero value counts nothing yet. Not safe for concurrent
// use: guard it with the lock that serialises the events.
type Totals struct {
	// Cut counts cut-after-commit faults: every one committed on the server.
	Cut int64
	// Drop counts dropped commits: none reached the server.
	Drop int64
	// Changed counts the cuts whose proof of commit also shows that the commit
	// changed something: a row count above 0 ("UPDATE 1", or among the replies to a
	// transaction's statements: Txn.Changed), a CQL [applied]=true.
	Changed int64
	// NoEffect counts the cuts whose proof shows that the commit changed nothing
	// ("UPDATE 0", a transaction whose writes all answered 0, [applied]=false):
	// committed, yet nothing to apply twice.
	NoEffect int64
}

// Add counts one event.
func (t *Totals) Add(e toxics.Event) {
	switch e.Kind {
	case toxics.CommitDrop:
		t.Drop++
	case toxics.CommitCut:
		t.Cut++
		changed, known := tagChanged(e.Tag)
		if e.Txn != nil && e.Txn.Changed != nil {
			// The replies to the transaction's statements (a COMMIT's own says nothing).
			changed, known = *e.Txn.Changed, true
		}
		switch {
		case !known:
		case changed:
			t.Changed++
		default:
			t.NoEffect++
		}
	}
}

// String reads "3 cut (1 proven applied, 1 committed without a visible effect, 1
// committed, the reply does not say what changed), 2 dropped (not applied)".
func (t Totals) String() string {
	unknown := t.Cut - t.Changed - t.NoEffect
	return fmt.Sprintf("%d cut (%d proven applied, %d committed without a visible effect, %d committed, the reply does not say what changed), %d dropped (not applied)",
		t.Cut, t.Changed, t.NoEffect, unknown, t.Drop)
}

// tagChanged reads a cut's proof of commit: a PostgreSQL command tag, whose last word
// is the row count of INSERT, UPDATE, DELETE and MERGE, or a CQL lightweight
// transaction's [applied] column. known is false for replies that say nothing of what
// changed (COMMIT, EXEC, a script's result, a MongoDB reply).
func tagChanged(tag string) (changed, known bool) {
	switch {
	case strings.Contains(tag, "[applied]=true"):
		return true, true
	case strings.Contains(tag, "[applied]=false"):
		return false, true
	}
	f := strings.Fields(tag)
	if len(f) < 2 {
		return false, false
	}
	switch f[0] {
	case "INSERT", "UPDATE", "DELETE", "MERGE":
	default:
		return false, false
	}
	n, err := strconv.Atoi(f[len(f)-1])
	if err != nil {
		return false, false
	}
	return n > 0, true
}
