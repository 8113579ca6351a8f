package toxics

import (
	"encoding/hex"
	"strings"
)

// CQL commit points: which requests write, and the text they show.

// cqlRequestMatters tells the upstream framer which long requests to buffer whole:
// those that may write, and the STARTUP and PREPARE that later ones depend on.
func cqlRequestMatters(h cqlHeader) bool {
	switch h.opcode {
	case cqlOpStartup, cqlOpQuery, cqlOpPrepare, cqlOpExecute, cqlOpBatch:
		return true
	}
	return false
}

// cqlClass is what a CQL statement does, as far as commit faults care.
type cqlClass uint8

const (
	cqlRead   cqlClass = iota // reads and session statements (SELECT, USE, LIST ...)
	cqlWrite                  // changes data: a commit of its own
	cqlSchema                 // changes the schema or permissions
)

// classifyCQL tells what one statement does from its first keyword.
func classifyCQL(stmt string) cqlClass {
	first := ""
	if w := cqlLex.words(stmt, 1); len(w) > 0 {
		first = w[0]
	}
	switch first {
	case "INSERT", "UPDATE", "DELETE", "TRUNCATE", "BEGIN":
		// BEGIN opens a batch (BEGIN [UNLOGGED | COUNTER] BATCH), or a transaction in
		// releases that have them: both write.
		return cqlWrite
	case "CREATE", "ALTER", "DROP", "GRANT", "REVOKE":
		return cqlSchema
	}
	return cqlRead
}

// cqlWriteReq is a write found in a request.
type cqlWriteReq struct {
	stmt   string
	stream int16
	def    bool
	txn    uint64 // the request's number among the connection's transactions
}

// Request implements Conn.
func (c *cqlConn) Request(b []byte) (int, *Point) {
	if c.up.phase == cqlEnvelopes && c.upV5 {
		// The client frames its requests only after the server's READY or
		// AUTHENTICATE, which Replies has seen by then.
		c.mu.Lock()
		framed := c.framed
		c.mu.Unlock()
		if framed {
			c.up.phase = cqlSegments
			c.upV5 = false
		}
	}
	u, ok := c.up.next(b)
	if !ok {
		return 0, nil
	}
	var writes []cqlWriteReq
	for i := range u.envs {
		if w, ok := c.request(&u.envs[i]); ok {
			writes = append(writes, w)
		}
	}
	if len(writes) == 0 {
		return u.n, nil
	}
	// Every CQL write is a transaction of its own; a unit of several is numbered by
	// its first, and each wrote.
	p := &Point{Statement: writes[0].stmt, Txn: writes[0].txn, Wrote: true}
	texts := make([]string, 0, len(writes))
	c.last = c.last[:0]
	for _, w := range writes {
		texts = append(texts, w.stmt)
		c.last = append(c.last, w.stream)
		p.Default = p.Default || w.def
	}
	p.Text = strings.Join(texts, "; ")
	return u.n, p
}

// request follows one request envelope and reports it if it writes.
func (c *cqlConn) request(e *cqlEnvelope) (cqlWriteReq, bool) {
	if e.version < 5 && e.flags&cqlFlagCompressed != 0 {
		// A compressed body cannot be judged, and compression was not negotiated
		// (that would have switched to pass-through at the STARTUP): stop guessing.
		c.up.phase = cqlOpaque
		return cqlWriteReq{}, false
	}
	r := cqlReader{b: e.body}
	if e.flags&cqlFlagCustomPayload != 0 {
		r.bytesMap()
	}
	switch e.opcode {
	case cqlOpStartup:
		compression := false
		for n := r.short(); n > 0 && !r.bad; n-- {
			if k := r.str(); strings.EqualFold(k, "COMPRESSION") {
				compression = true
			}
			r.str()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if compression {
			c.compressed = true
			c.up.phase = cqlOpaque
			return cqlWriteReq{}, false
		}
		c.upV5 = e.version == 5
		c.v5 = c.upV5
	case cqlOpQuery:
		c.txns++
		if stmt := r.longString(); !r.bad {
			return cqlStatement(stmt, e.stream, c.txns)
		}
	case cqlOpPrepare:
		if stmt := r.longString(); !r.bad {
			c.mu.Lock()
			if len(c.preparing) < cqlMaxPreparing {
				c.preparing[e.stream] = shorten(stmt, cqlMaxText)
			}
			c.mu.Unlock()
		}
	case cqlOpExecute:
		c.txns++
		id := r.shortBytes()
		if r.bad {
			break
		}
		if stmt, ok := c.ids.get(id); ok {
			return cqlStatement(stmt, e.stream, c.txns)
		}
	case cqlOpBatch:
		c.txns++
		return cqlWriteReq{stmt: c.batchText(&r), stream: e.stream, def: true, txn: c.txns}, true
	}
	return cqlWriteReq{}, false
}

func cqlStatement(stmt string, stream int16, txn uint64) (cqlWriteReq, bool) {
	switch classifyCQL(stmt) {
	case cqlWrite:
		return cqlWriteReq{stmt: stmt, stream: stream, def: true, txn: txn}, true
	case cqlSchema:
		return cqlWriteReq{stmt: stmt, stream: stream, txn: txn}, true
	}
	return cqlWriteReq{}, false
}

// batchText renders a BATCH request as the CQL batch statement it stands for, as far as
// it reads: statements not prepared through this proxy show as their id.
func (c *cqlConn) batchText(r *cqlReader) string {
	var b strings.Builder
	switch r.byte1() {
	case 1:
		b.WriteString("BEGIN UNLOGGED BATCH ")
	case 2:
		b.WriteString("BEGIN COUNTER BATCH ")
	default:
		b.WriteString("BEGIN BATCH ")
	}
	n := r.short()
	for i := 0; i < n && !r.bad; i++ {
		var stmt string
		switch r.byte1() {
		case 0:
			stmt = r.longString()
		case 1:
			id := r.shortBytes()
			if s, ok := c.ids.get(id); ok {
				stmt = s
			} else {
				stmt = "<prepared " + hex.EncodeToString(id) + ">"
			}
		default:
			r.bad = true
		}
		for v := r.short(); v > 0 && !r.bad; v-- {
			r.value()
		}
		if r.bad {
			b.WriteString("...")
			break
		}
		if b.Len()+len(stmt) > cqlMaxText {
			b.WriteString("...")
			break
		}
		b.WriteString(stmt)
		b.WriteString("; ")
	}
	b.WriteString("APPLY BATCH")
	return b.String()
}
