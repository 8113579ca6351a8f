package toxics

import (
	"strings"
)

// Postgres is the PostgreSQL frontend/backend protocol (3.x) for the commit toxics.
//
// Commit points (upstream, client to server):
//   - a COMMIT or END that ends an open transaction block, as a simple query or as the
//     Execute of a prepared statement;
//   - a statement outside a transaction block (autocommit), as a simple query (all its
//     statements form one implicit transaction: one point) or as an Execute; it counts
//     by default when it writes (INSERT, UPDATE, DELETE, MERGE, COPY FROM, DDL, CALL,
//     a data-modifying WITH), and with a match function when its SQL matches;
//   - PREPARE TRANSACTION that ends an open block (the first phase of two-phase commit:
//     once the server has prepared, the transaction survives the connection and only
//     COMMIT PREPARED or ROLLBACK PREPARED end it);
//   - COMMIT PREPARED (the second phase).
//
// Prepared statements are followed from Parse to Bind to Execute by name (pgx parses
// "stmtcache_<hash>" once per connection and then only binds and executes it).
//
// Whether a block is open is known from the replies when nothing is in flight (the
// status of the last ReadyForQuery: 'I' idle, 'T' in a block, 'E' in a failed block),
// and predicted from the BEGIN, COMMIT and ROLLBACK statements forwarded since, for
// clients that pipeline. A COMMIT in a failed block only rolls back: not a point.
//
// Proof of commit (downstream, server to client), for a request whose cut was armed:
// CommandComplete "COMMIT" or "PREPARE TRANSACTION"; or, for an autocommit statement, its CommandComplete
// followed by ReadyForQuery 'I' with no ErrorResponse between (with the extended
// protocol the implicit commit happens at Sync, so only that ReadyForQuery proves it).
// The cut drops from the first CommandComplete of the request's reply on. An
// ErrorResponse, CommandComplete "ROLLBACK", or a ReadyForQuery that is not 'I' ends an
// armed cut unfired: nothing was committed.
//
// What a cut commit changed is read from the replies to its transaction's statements,
// which pass before the COMMIT's: their CommandComplete tags ("UPDATE 1", "INSERT 0 0")
// go into the event (Txn.Tags), with what they prove (Txn.Changed; see pgtags.go).
//
// Holding replies until ReadyForQuery happens only for a request whose cut was armed,
// so a client that waits for CommandComplete before it sends Sync stalls only then.
//
// Encrypted connections (SSLRequest answered 'S', GSSENCRequest answered 'G', or TLS
// sent directly) pass through unparsed and are never faulted: clients of a faulting
// proxy connect with sslmode=disable.
type Postgres struct{}

// Name returns "postgres".
func (Postgres) Name() string { return "postgres" }

// NewConn implements Protocol.
func (Postgres) NewConn() Conn {
	return &pgConn{
		up:      pgFramer{upstream: true, matters: pgRequestMatters},
		down:    pgFramer{matters: pgReplyMatters},
		stmts:   map[string]string{},
		portals: map[string]string{},
	}
}

func pgRequestMatters(t byte) bool {
	switch t {
	case 'Q', 'P', 'B', 'E', 'S', 'C', 'D', 'H', 'F':
		return true
	}
	return false
}

func pgReplyMatters(t byte) bool {
	return t == 'C' || t == 'Z' || t == 'E'
}

type txState uint8

const (
	txIdle txState = iota
	txOpen
	txFailed
)

// pgCycle is a request that ends with one ReadyForQuery: a simple query, a function
// call, or the extended-protocol messages up to a Sync.
type pgCycle struct {
	replyCut
	// downstream only, while cut is armed
	holding bool
	tag     string
}

type pgConn struct {
	up, down pgFramer

	// Upstream goroutine only.
	stmts      map[string]string // prepared statement name -> SQL
	portals    map[string]string // portal name -> SQL
	tx         txState           // predicted from the statements forwarded
	blockText  strings.Builder   // statements run in the open block
	blockWrote bool              // one of them can change data
	blockW     txnWrites         // what they can change, for reading their replies
	txns       uint64            // transactions seen start: the number of the last
	open       *pgCycle          // extended-protocol messages since the last Sync
	implicit   bool              // the open cycle has run a statement outside a block

	// Downstream goroutine only.
	ready bool // the ReadyForQuery that ends the startup has passed

	lastArmed            // its mu guards the fields below
	queue     []*pgCycle // sent, awaiting their ReadyForQuery
	status    byte       // status of the last ReadyForQuery that left the queue empty
	fresh     bool       // status not yet taken into tx by the upstream side
	tags      pgTags     // replies of the transaction in progress (pgtags.go)
}

// txNow returns the transaction state for the next statement: the server's own word
// when nothing is in flight and it has not been read yet, else the prediction.
func (c *pgConn) txNow() txState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh && len(c.queue) == 0 {
		c.fresh = false
		switch c.status {
		case 'I':
			c.tx = txIdle
		case 'T':
			c.tx = txOpen
		case 'E':
			c.tx = txFailed
		}
	}
	return c.tx
}

func (c *pgConn) push(cy *pgCycle) {
	c.mu.Lock()
	c.queue = append(c.queue, cy)
	c.mu.Unlock()
}

// Request implements Conn.
func (c *pgConn) Request(b []byte) (int, *Point) {
	f, ok := c.up.next(b)
	if !ok {
		return 0, nil
	}
	if f.kind != frameMessage || f.typ == 0 {
		return f.n, nil
	}
	switch f.typ {
	case 'Q':
		var p *Point
		if sql, _, ok := cstring(f.body); ok {
			// Judge before queueing the query: the server's status counts only
			// while nothing is in flight.
			p = c.query(sql)
		}
		cy := c.open
		if cy == nil {
			cy = &pgCycle{}
		}
		c.open, c.implicit = nil, false
		c.push(cy)
		if p != nil {
			c.last = &cy.replyCut
		}
		return f.n, p
	case 'P':
		name, rest, ok := cstring(f.body)
		if !ok {
			break
		}
		if sql, _, ok := cstring(rest); ok {
			c.stmts[name] = sql
		}
		c.openCycle()
	case 'B':
		portal, rest, ok := cstring(f.body)
		if !ok {
			break
		}
		if name, _, ok := cstring(rest); ok {
			c.portals[portal] = c.stmts[name]
		}
		c.openCycle()
	case 'E':
		portal, _, ok := cstring(f.body)
		cy := c.openCycle()
		if !ok {
			break
		}
		p := c.execute(c.portals[portal])
		if p != nil {
			c.last = &cy.replyCut
		}
		return f.n, p
	case 'C':
		if len(f.body) > 0 {
			if name, _, ok := cstring(f.body[1:]); ok {
				switch f.body[0] {
				case 'S':
					delete(c.stmts, name)
				case 'P':
					delete(c.portals, name)
				}
			}
		}
		c.openCycle()
	case 'D', 'H':
		c.openCycle()
	case 'S':
		cy := c.openCycle()
		c.open, c.implicit = nil, false
		c.push(cy)
	case 'F':
		cy := c.open
		if cy == nil {
			cy = &pgCycle{}
		}
		c.open, c.implicit = nil, false
		c.push(cy)
	}
	return f.n, nil
}

func (c *pgConn) openCycle() *pgCycle {
	if c.open == nil {
		c.open = &pgCycle{}
	}
	return c.open
}

// query runs a simple query's statements through the transaction state and returns its
// commit point, if it has one. All statements outside a block form one implicit
// transaction, committed at the end of the query: one point for the query.
func (c *pgConn) query(sql string) *Point {
	tx := c.txNow()
	var p *Point
	prefix := ""
	implicit := uint64(0) // the number of the query's implicit transaction, once it starts
	var iw txnWrites      // what the implicit transaction's statements can change
	for _, s := range splitSQL(sql) {
		switch step, cls, block := c.step(&tx, s); step {
		case stepBlockCommit:
			prefix = block.text
			p = pointOr(p, true, block)
		case stepPreparedCommit:
			p = pointOr(p, true, block)
		case stepImplicit:
			if implicit == 0 {
				c.txns++
				implicit = c.txns
			}
			iw.add(s, cls)
			p = pointOr(p, cls == stmtWrite, pgTxn{seq: implicit, wrote: writes(s, cls), writes: iw})
		}
	}
	c.tx = tx
	if p == nil {
		return nil
	}
	p.Statement = sql
	p.Text = prefix + sql
	return p
}

// execute runs one prepared statement (Execute) through the transaction state. In the
// extended protocol the statements outside a block up to the Sync form one implicit
// transaction; its first statement is the point.
func (c *pgConn) execute(sql string) *Point {
	tx := c.txNow()
	var p *Point
	switch step, cls, block := c.step(&tx, sql); step {
	case stepBlockCommit:
		p = &Point{Statement: sql, Text: block.text + sql, Default: true, Txn: block.seq, Wrote: block.wrote, writes: block.writes}
	case stepPreparedCommit:
		p = &Point{Statement: sql, Text: sql, Default: true, Txn: block.seq, Wrote: block.wrote}
	case stepImplicit:
		if !c.implicit {
			c.txns++
			var w txnWrites
			w.add(sql, cls)
			p = &Point{Statement: sql, Text: sql, Default: cls == stmtWrite, Txn: c.txns, Wrote: writes(sql, cls), writes: w}
		}
		c.implicit = true
	}
	c.tx = tx
	return p
}

// pgTxn is what a commit point says of the transaction it commits.
type pgTxn struct {
	text   string // the statements of a block before its COMMIT, each followed by "; "
	seq    uint64
	wrote  bool
	writes txnWrites
}

// writes reports whether a statement of class cls can change data: a write, or a
// SELECT that creates a table (SELECT INTO) or moves a sequence.
func writes(s string, cls stmtClass) bool {
	return cls == stmtWrite || cls == stmtOther && hasWord(s, "INTO", "NEXTVAL", "SETVAL")
}

// txStep is what one statement is to the commit points, as step finds it.
type txStep uint8

const (
	stepNone           txStep = iota // no commit: a block opens, rolls back, or grows
	stepBlockCommit                  // COMMIT or PREPARE TRANSACTION ends an open block
	stepPreparedCommit               // COMMIT PREPARED outside a block
	stepImplicit                     // a statement outside a block: its own implicit transaction
)

// step moves tx over one statement s, keeping the open block's text, and says what s is
// to the commit points; for stepBlockCommit it also returns the block s ends, and for
// stepPreparedCommit the transaction of the COMMIT PREPARED. The simple and the extended
// protocol share it and differ only in how they make points.
func (c *pgConn) step(tx *txState, s string) (txStep, stmtClass, pgTxn) {
	cls := classify(s)
	switch {
	case cls == stmtBegin:
		if *tx == txIdle {
			*tx = txOpen
			c.blockText.Reset()
			c.blockWrote = false
			c.blockW = txnWrites{}
			c.txns++
		}
	case cls == stmtCommit, cls == stmtPrepareTxn:
		step, block := stepNone, pgTxn{}
		if *tx == txOpen {
			step, block = stepBlockCommit, pgTxn{text: c.blockText.String(), seq: c.txns, wrote: c.blockWrote, writes: c.blockW}
		}
		*tx = txIdle
		c.blockText.Reset()
		return step, cls, block
	case cls == stmtRollback:
		*tx = txIdle
		c.blockText.Reset()
	case cls == stmtCommitPrepare:
		if *tx == txIdle {
			// A transaction of its own, prepared elsewhere: what it wrote is not
			// known here, so it counts as writing.
			c.txns++
			return stepPreparedCommit, cls, pgTxn{seq: c.txns, wrote: true}
		}
	case *tx == txIdle:
		return stepImplicit, cls, pgTxn{}
	default:
		c.addBlockText(s)
		c.blockWrote = c.blockWrote || writes(s, cls)
		c.blockW.add(s, cls)
	}
	return stepNone, cls, pgTxn{}
}

// pointOr adds to the point of a simple query one transaction it commits: the point
// counts by default if any does, is numbered by the first and wrote if any wrote.
func pointOr(p *Point, def bool, t pgTxn) *Point {
	if p == nil {
		p = &Point{Txn: t.seq}
	}
	p.Default = p.Default || def
	p.Wrote = p.Wrote || t.wrote
	if t.seq == p.Txn {
		p.writes = t.writes
	}
	return p
}

func (c *pgConn) addBlockText(s string) {
	if c.blockText.Len()+len(s)+2 > maxBlockText {
		return
	}
	c.blockText.WriteString(s)
	c.blockText.WriteString("; ")
}

// Reply implements Conn.
func (c *pgConn) Reply(b []byte) (int, Verdict) {
	f, ok := c.down.next(b)
	if !ok {
		return 0, Verdict{}
	}
	if f.kind != frameMessage {
		return f.n, Verdict{}
	}
	switch f.typ {
	case 'C', 'E', 'Z':
	default:
		return f.n, Verdict{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.typ == 'Z' {
		status := byte(0)
		if len(f.body) > 0 {
			status = f.body[0]
		}
		if !c.ready {
			c.ready = true
			if len(c.queue) == 0 {
				c.status, c.fresh = status, true
			}
			return f.n, Verdict{}
		}
		var cy *pgCycle
		if len(c.queue) > 0 {
			cy = c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
		}
		if len(c.queue) == 0 {
			c.status, c.fresh = status, true
		}
		v := Verdict{}
		if cy != nil && cy.cut != nil {
			p := cy.cut
			cy.cut = nil
			v = Verdict{Action: Release, Pending: p}
			if cy.holding && status == 'I' {
				v = c.cut(p, cy.tag)
			}
		}
		if status == 'I' {
			// No transaction is open: the next reply starts another one.
			c.tags = pgTags{}
		}
		return f.n, v
	}
	if f.typ == 'C' {
		switch tag, _, _ := cstring(f.body); tag {
		case "BEGIN", "START TRANSACTION":
			c.tags = pgTags{}
		case "COMMIT", "PREPARE TRANSACTION":
			// The transaction ends once its cut, if armed, has read its tags.
			defer func() { c.tags = pgTags{} }()
		default:
			c.tags.add(tag)
		}
	}
	if len(c.queue) == 0 || c.queue[0].cut == nil {
		return f.n, Verdict{}
	}
	cy := c.queue[0]
	if f.typ == 'E' {
		p := cy.cut
		cy.cut = nil
		return f.n, Verdict{Action: Release, Pending: p}
	}
	tag, _, _ := cstring(f.body)
	switch {
	case tag == "COMMIT" || tag == "PREPARE TRANSACTION":
		p := cy.cut
		cy.cut = nil
		return f.n, c.cut(p, tag)
	case tag == "ROLLBACK":
		p := cy.cut
		cy.cut = nil
		return f.n, Verdict{Action: Release, Pending: p}
	}
	cy.tag = tag
	cy.holding = true
	return f.n, Verdict{Action: Hold}
}

// cut is the verdict that cuts the commit of p, proven by the reply tag, with the tags
// of the transaction's statements and what they prove it changed.
func (c *pgConn) cut(p *Pending, tag string) Verdict {
	return Verdict{Action: Cut, Pending: p, Tag: tag, Tags: c.tags.tags(), Changed: c.tags.changed(p.point.writes)}
}
