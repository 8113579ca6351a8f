package toxics

import (
	"strconv"
	"strings"
)

// What a PostgreSQL transaction changed, from the server's own words.
//
// The kind of a statement says whether it can change data; its CommandComplete says
// whether it did: INSERT, UPDATE, DELETE, MERGE and COPY answer with the number of rows
// they touched ("UPDATE 0", "INSERT 0 1"). So the replies to a transaction's statements,
// read on their way to the client, prove what its commit changed:
//
//   - rows, when one of its counted writes answered a count above zero (and no ROLLBACK
//     TO SAVEPOINT, whose tag is "ROLLBACK", may have undone it);
//   - nothing, when every write it sent was a counted one and each answered zero, and
//     every other reply is one that never changes data (SELECT, FETCH, SET, ...): a
//     replay's INSERT ... ON CONFLICT DO NOTHING answered "INSERT 0 0";
//   - not known otherwise: a write whose reply carries no count (DDL, CALL, a
//     data-modifying WITH or a SELECT INTO, both answered "SELECT n"), or a reply the
//     proxy did not see.
//
// The statements are counted upstream, as the client sends them (txnWrites); the
// replies downstream, in order (pgTags): a transaction's replies all come before its
// COMMIT's, so when the COMMIT's reply arrives the tags of its statements have passed.

// txnWrites is what the statements of one transaction, by their kind, can change.
type txnWrites struct {
	counted int  // writes whose reply counts the rows they touched
	opaque  bool // a write whose reply does not count what it changed
}

// add counts one statement of the transaction.
func (w *txnWrites) add(s string, cls stmtClass) {
	if !writes(s, cls) {
		return
	}
	if ws := pgLex.words(s, 1); len(ws) == 1 && countedVerb(ws[0]) {
		w.counted++
		return
	}
	w.opaque = true
}

func countedVerb(w string) bool {
	switch w {
	case "INSERT", "UPDATE", "DELETE", "MERGE", "COPY":
		return true
	}
	return false
}

// maxShownTags bounds the tags an event shows; the counts go on past it.
const maxShownTags = 16

// pgTags gathers the CommandComplete tags of the transaction whose replies are passing.
type pgTags struct {
	shown    []string
	counted  int  // tags of counted writes
	rows     bool // one of them counted rows
	other    bool // a tag that may hide a change (CALL, CREATE TABLE, ...)
	rollback bool // ROLLBACK TO SAVEPOINT undid part of the transaction
}

// add takes the tag of one statement's CommandComplete.
func (t *pgTags) add(tag string) {
	if len(t.shown) < maxShownTags {
		t.shown = append(t.shown, shorten(tag, 64))
	}
	f := strings.Fields(tag)
	if len(f) == 0 {
		t.other = true
		return
	}
	switch f[0] {
	case "INSERT", "UPDATE", "DELETE", "MERGE", "COPY":
		n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if len(f) < 2 || err != nil {
			t.other = true
			return
		}
		t.counted++
		t.rows = t.rows || n > 0
	case "ROLLBACK":
		t.rollback = true
	case "SELECT", "FETCH", "MOVE", "SHOW", "SET", "RESET", "SAVEPOINT", "RELEASE", "DECLARE",
		"CLOSE", "LOCK", "PREPARE", "DEALLOCATE", "LISTEN", "UNLISTEN":
	default:
		t.other = true
	}
}

// changed says what the transaction's replies prove its commit changed, given what its
// statements could change: true (rows), false (nothing), nil (not known). It is nil for
// a transaction that sent no write, whose kind already says it changed nothing.
func (t *pgTags) changed(w txnWrites) *bool {
	if w.counted == 0 && !w.opaque {
		return nil
	}
	yes, no := true, false
	switch {
	case t.rollback:
		return nil
	case t.rows:
		return &yes
	case t.other || w.opaque || t.counted < w.counted:
		return nil
	}
	return &no
}

// tags returns the tags shown, a copy the caller may keep.
func (t *pgTags) tags() []string {
	return append([]string(nil), t.shown...)
}
