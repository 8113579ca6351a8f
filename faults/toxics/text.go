package toxics

import "sync"

// What the protocols share beyond the Conn contract: arming the cut of a reply found by
// order, and the text of points.

// replyCut is the armed cut of one request whose reply is found by its order among the
// replies (a PostgreSQL cycle up to its ReadyForQuery, a RESP request). It is guarded by
// the mu of the lastArmed that arms it.
type replyCut struct {
	cut *Pending
}

// lastArmed implements Conn.ExpectCut for the protocols that pair replies with requests
// by order: Request sets last to the request of the point it returns, and ExpectCut
// arms that request's cut, once. A second point of one request (another statement of
// the same implicit transaction) is refused: one commit, one cut. mu also guards the
// embedding protocol's queue of requests awaiting their replies.
type lastArmed struct {
	mu   sync.Mutex
	last *replyCut // upstream goroutine only; read under mu by ExpectCut
}

// ExpectCut implements Conn.
func (l *lastArmed) ExpectCut(p *Pending) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil || l.last.cut != nil {
		return false
	}
	l.last.cut = p
	return true
}

// maxBlockText bounds the statements of an open transaction block (PostgreSQL), MULTI
// (RESP) or session transaction (MongoDB) kept for match functions.
const maxBlockText = 64 << 10

// setOf returns a set of command names, for the tables of RESP and MongoDB commands.
func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// shorten cuts s to n bytes, marking the cut with "...".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
