package toxics

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// MySQL is the MySQL client/server protocol (MySQL 4.1 and later, MariaDB) for the
// commit toxics.
//
// Commit points (upstream, client to server), in COM_QUERY and in COM_STMT_EXECUTE of
// a statement prepared with COM_STMT_PREPARE on the connection (the statement id the
// server gives in its reply is mapped back to the SQL):
//   - a COMMIT that ends an open transaction (opened by BEGIN or START TRANSACTION, or
//     by the first statement while autocommit is off);
//   - a statement outside a transaction with autocommit on: it commits on its own. It
//     counts by default when it writes (INSERT, UPDATE, DELETE, REPLACE, LOAD DATA, DDL,
//     CALL), and with a match function when its SQL matches;
//   - DDL always: it commits on its own whatever autocommit says (and commits an open
//     transaction first, which is then not a point of its own).
//
// A query of several statements (CLIENT_MULTI_STATEMENTS) is one request: its point is
// its first commit, and the commits of its later statements are not faulted.
//
// Whether a transaction is open is read from the server: every OK and EOF packet
// carries the session's status flags (SERVER_STATUS_IN_TRANS, SERVER_STATUS_AUTOCOMMIT),
// taken when nothing is in flight; it is predicted from the statements forwarded since
// (BEGIN, COMMIT, ROLLBACK, SET autocommit), for clients that pipeline.
//
// Proof of commit (downstream, server to client), for a request whose cut was armed:
// the OK packet of the committing statement, with SERVER_STATUS_IN_TRANS clear, when
// the commit changed rows. The OK packet's affected rows say so: for an autocommit
// INSERT, UPDATE, DELETE or REPLACE its own count; for a COMMIT the sum of the counts
// of the block's statements (the OK packets the server sent while the transaction was
// open); DDL and CALL count as changing. The event's tag is the statement's verb and
// its affected rows in PostgreSQL's command-tag form ("UPDATE 1"; "OK 2" for REPLACE
// and LOAD DATA), "COMMIT" for a block, "OK" for DDL and CALL. A commit that changed nothing (a conditional
// UPDATE whose condition failed, a transaction that only read) ends the armed cut
// unfired, as an ERR packet does: a cut there would be no ambiguity about a change. The
// cut drops the OK packet and everything after it.
//
// The connection's start is followed (the server's greeting, the client's handshake
// response, the authentication exchange up to the server's OK) but judged no further.
// TLS is passed through unparsed, as the other protocols do: a client that sets
// CLIENT_SSL in its response starts TLS, both directions go opaque, and the connection
// is never faulted: clients of a faulting proxy connect without TLS (go-sql-driver's
// tls=false). A command whose reply the framing does not follow (COM_CHANGE_USER,
// COM_BINLOG_DUMP, COM_FIELD_LIST, MariaDB's COM_STMT_BULK_EXECUTE, ...) ends the
// judging of its connection: no point after it.
type MySQL struct{}

// Name returns "mysql".
func (MySQL) Name() string { return "mysql" }

// NewConn implements Protocol.
func (MySQL) NewConn() Conn {
	return &myConn{up: myFramer{upstream: true}, stmts: map[uint32]string{}, autocommit: true}
}

// Capability flags of the handshake.
const (
	myClientProtocol41    = 0x00000200
	myClientSSL           = 0x00000800
	myClientQueryAttrs    = 0x08000000
	myClientDeprecateEOF  = 0x01000000
	myStatusInTrans       = 0x0001
	myStatusAutocommit    = 0x0002
	myStatusMoreResults   = 0x0008
	myProtocolVersion     = 10
	myOK, myEOF, myERR    = 0x00, 0xFE, 0xFF
	myLocalInfile         = 0xFB
	myComQuit             = 0x01
	myComQuery            = 0x03
	myComStmtPrepare      = 0x16
	myComStmtExecute      = 0x17
	myComStmtSendLongData = 0x18
	myComStmtClose        = 0x19
	myComStmtFetch        = 0x1C
	myComResetConnection  = 0x1F
)

// myReplies is what the server sends back to one command.
type myReplies uint8

const (
	myNone    myReplies = iota // no reply (COM_QUIT, COM_STMT_CLOSE, COM_STMT_SEND_LONG_DATA)
	myOne                      // one OK, ERR or EOF packet
	myResults                  // results: OK, ERR, or result sets, chained by SERVER_MORE_RESULTS_EXISTS
	myPrepare                  // COM_STMT_PREPARE_OK and its definitions, or ERR
	myFetch                    // rows up to an EOF (or OK), or ERR
	myLost                     // not followed: judging ends
)

// myCommand is a command sent and awaiting its reply.
type myCommand struct {
	replyCut
	replies myReplies
	sql     string // COM_STMT_PREPARE: the statement, for the id its reply gives
	at      int    // the result that commits (myResults with a point)
	proof   myProof
	verb    string // the committing statement's first word, for the tag
}

// myProof is how the OK packet of a commit shows that it changed rows.
type myProof uint8

const (
	proofOwn    myProof = iota // its own affected rows (an autocommit INSERT, UPDATE, DELETE ...)
	proofBlock                 // the affected rows of the transaction it commits (COMMIT)
	proofAlways                // always (DDL, CALL: their affected rows do not count changes)
)

// A reply's progress through one result or prepare reply.
type myPhase uint8

const (
	myStart   myPhase = iota // the first packet of a result
	myColumns                // column (or parameter) definitions, count left in defs
	myColEOF                 // the EOF after the definitions (no CLIENT_DEPRECATE_EOF)
	myRows                   // rows up to the EOF or OK that ends them
)

type myConn struct {
	up, down myFramer

	// Upstream goroutine only.
	responded  bool // the handshake response has passed
	open       bool // a transaction is open, as predicted
	autocommit bool
	blockText  strings.Builder
	blockWrote bool
	txns       uint64

	// Downstream goroutine only.
	greeted bool // the greeting has passed
	phase   myPhase
	defs    uint64 // definitions left in the current phase
	params  uint64 // COM_STMT_PREPARE_OK: parameter definitions still to come after the columns'
	stmtID  uint32 // COM_STMT_PREPARE_OK being read
	result  int    // the index of the result being read in the head command's reply

	lastArmed              // its mu guards the fields below
	caps      uint32       // the client's capabilities (its handshake response)
	tls       bool         // the client asked for TLS: both directions pass through
	lost      bool         // a reply is not followed: no more points
	commands  []*myCommand // sent, awaiting their replies (after the authentication)
	stmts     map[uint32]string
	status    uint16 // status flags of the last reply that left the queue empty
	fresh     bool   // status not yet taken by the upstream side
	changed   uint64 // rows changed by the open transaction, from its OK packets
}

// Request implements Conn.
func (c *myConn) Request(b []byte) (int, *Point) {
	pk, ok := c.up.next(b)
	if !ok {
		return 0, nil
	}
	if pk.kind != frameMessage || pk.cont || pk.seq != 0 && c.responded {
		return pk.n, nil
	}
	if !c.responded {
		c.responded = true
		c.response(pk.body)
		return pk.n, nil
	}
	c.mu.Lock()
	lost := c.lost || c.tls
	c.mu.Unlock()
	if lost || len(pk.body) == 0 {
		return pk.n, nil
	}
	cmd := &myCommand{replies: myOne}
	var p *Point
	body := pk.body[1:]
	// A command continued in the next packets is longer than 16 MiB: its text is not
	// judged (as a message past maxWhole is not), but its reply is still followed.
	whole := len(pk.body) < myMaxPayload
	switch pk.body[0] {
	case myComQuit, myComStmtSendLongData:
		cmd.replies = myNone
	case myComStmtClose:
		cmd.replies = myNone
		if len(body) >= 4 {
			c.mu.Lock()
			delete(c.stmts, binary.LittleEndian.Uint32(body))
			c.mu.Unlock()
		}
	case myComQuery:
		cmd.replies = myResults
		if sql, ok := c.querySQL(body); ok && whole {
			p = c.query(sql, cmd)
		}
	case myComStmtPrepare:
		cmd.replies = myPrepare
		if whole {
			cmd.sql = string(body)
		}
	case myComStmtExecute:
		cmd.replies = myResults
		if len(body) >= 4 {
			c.mu.Lock()
			sql, ok := c.stmts[binary.LittleEndian.Uint32(body)]
			c.mu.Unlock()
			if ok {
				p = c.query(sql, cmd)
			}
		}
	case myComStmtFetch:
		cmd.replies = myFetch
	case myComResetConnection:
		// The session starts over: no transaction, autocommit on, no statements.
		c.open, c.autocommit = false, true
		c.blockText.Reset()
		c.mu.Lock()
		clear(c.stmts)
		c.mu.Unlock()
	case 0x02, 0x07, 0x09, 0x0C, 0x0D, 0x0E, 0x1A, 0x1B:
		// COM_INIT_DB, COM_REFRESH, COM_STATISTICS is not here (a string reply),
		// COM_PROCESS_KILL, COM_DEBUG, COM_PING, COM_STMT_RESET, COM_SET_OPTION.
	default:
		cmd.replies = myLost
	}
	c.mu.Lock()
	if cmd.replies == myLost {
		c.lost = true
	}
	if cmd.replies != myNone {
		c.commands = append(c.commands, cmd)
	}
	c.mu.Unlock()
	if p != nil {
		c.last = &cmd.replyCut
	}
	return pk.n, p
}

// response reads the client's handshake response (or SSLRequest): its capabilities.
func (c *myConn) response(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(b) < 4 {
		c.lost = true
		return
	}
	c.caps = binary.LittleEndian.Uint32(b)
	switch {
	case c.caps&myClientSSL != 0:
		c.tls = true
		c.up.lf.passAll(nil)
	case c.caps&myClientProtocol41 == 0:
		// The pre-4.1 protocol: not followed.
		c.lost = true
	}
}

// querySQL returns the SQL of a COM_QUERY payload, after the query attributes when the
// client negotiated them (MySQL 8): only a query without attributes is read.
func (c *myConn) querySQL(b []byte) (string, bool) {
	c.mu.Lock()
	attrs := c.caps&myClientQueryAttrs != 0
	c.mu.Unlock()
	if !attrs {
		return string(b), true
	}
	n, rest, ok := lenenc(b)
	if !ok || n != 0 {
		return "", false
	}
	if _, rest, ok = lenenc(rest); !ok {
		return "", false
	}
	return string(rest), true
}

// txNow takes the server's status into the prediction when nothing is in flight.
func (c *myConn) txNow() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fresh && len(c.commands) == 0 {
		c.fresh = false
		c.open = c.status&myStatusInTrans != 0
		c.autocommit = c.status&myStatusAutocommit != 0
		if !c.open {
			c.blockText.Reset()
		}
	}
}

// query runs the statements of a query (or of an executed prepared statement) through
// the transaction state and returns the point of its first commit, if any, noting in
// cmd which result proves it.
func (c *myConn) query(sql string, cmd *myCommand) *Point {
	c.txNow()
	var p *Point
	for i, s := range mySplit(sql) {
		cls := myClassify(s)
		switch {
		case cls == myBegin:
			// BEGIN in an open transaction commits it first (not a point).
			c.open = true
			c.blockText.Reset()
			c.blockWrote = false
			c.txns++
		case cls == myCommit:
			if c.open && p == nil {
				p = &Point{Statement: sql, Text: c.blockText.String() + s, Default: true, Txn: c.txns, Wrote: c.blockWrote}
				cmd.at, cmd.proof = i, proofBlock
			}
			c.open = false
			c.blockText.Reset()
		case cls == myRollback:
			c.open = false
			c.blockText.Reset()
		case cls == mySetAutocommit || cls == mySetNoAutocommit:
			// Turning autocommit on commits an open transaction (not a point).
			c.autocommit = cls == mySetAutocommit
			if c.autocommit {
				c.open = false
				c.blockText.Reset()
			}
		case cls == myDDL || !c.open && c.autocommit:
			c.open = false
			c.blockText.Reset()
			c.txns++
			wrote := cls != myOther
			if p == nil && wrote {
				p = &Point{Statement: sql, Text: sql, Default: true, Txn: c.txns, Wrote: true}
				cmd.at, cmd.proof = i, proofAlways
				if w := pgLex.words(s, 1); len(w) > 0 {
					cmd.verb = w[0]
				}
				if cls == myDML {
					cmd.proof = proofOwn
				}
			}
		default:
			if !c.open {
				// autocommit off: the statement opens a transaction.
				c.open = true
				c.blockText.Reset()
				c.blockWrote = false
				c.txns++
			}
			if c.blockText.Len()+len(s)+2 <= maxBlockText {
				c.blockText.WriteString(s)
				c.blockText.WriteString("; ")
			}
			c.blockWrote = c.blockWrote || cls != myOther
		}
	}
	return p
}

// Reply implements Conn.
func (c *myConn) Reply(b []byte) (int, Verdict) {
	c.mu.Lock()
	if c.tls {
		c.down.lf.passAll(nil)
	}
	c.mu.Unlock()
	pk, ok := c.down.next(b)
	if !ok {
		return 0, Verdict{}
	}
	if pk.kind == frameOpaque {
		return pk.n, Verdict{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost {
		return pk.n, Verdict{}
	}
	if pk.cont {
		// A piece of a message longer than a packet: a row, never a proof.
		return pk.n, Verdict{}
	}
	if !c.greeted {
		c.greeted = true
		if pk.kind != frameMessage || len(pk.body) == 0 || pk.body[0] != myProtocolVersion {
			c.lost = true
			return pk.n, Verdict{}
		}
		c.status, c.fresh = greetingStatus(pk.body), true
		return pk.n, Verdict{}
	}
	if len(c.commands) == 0 {
		// The authentication exchange, or a reply nobody asked for: nothing to judge.
		return pk.n, Verdict{}
	}
	cmd := c.commands[0]
	if pk.kind != frameMessage {
		// A long packet streamed: in a result set, a row; anywhere else, lost track.
		if c.phase != myRows {
			c.lost = true
			return pk.n, c.release(cmd)
		}
		return pk.n, Verdict{}
	}
	return pk.n, c.reply(cmd, pk.body)
}

// greetingStatus returns the status flags of a protocol-10 greeting, 0 if it has none.
func greetingStatus(b []byte) uint16 {
	_, rest, ok := cstring(b[1:])
	// connection id (4), auth data (8), filler (1), capabilities (2), charset (1)
	if !ok || len(rest) < 18 {
		return 0
	}
	return binary.LittleEndian.Uint16(rest[16:])
}

// release ends the armed cut of cmd unfired, if there is one.
func (c *myConn) release(cmd *myCommand) Verdict {
	if cmd.cut == nil {
		return Verdict{}
	}
	p := cmd.cut
	cmd.cut = nil
	return Verdict{Action: Release, Pending: p}
}

// done pops the head command, whose reply is complete.
func (c *myConn) done(status uint16, known bool) {
	c.commands[0] = nil
	c.commands = c.commands[1:]
	c.phase, c.result = myStart, 0
	if len(c.commands) == 0 && known {
		c.status, c.fresh = status, true
	}
}

// reply judges one whole packet of the head command's reply. The caller holds mu.
func (c *myConn) reply(cmd *myCommand, b []byte) Verdict {
	if len(b) == 0 {
		// No reply packet is empty.
		c.lost = true
		return c.release(cmd)
	}
	deprecateEOF := c.caps&myClientDeprecateEOF != 0
	switch cmd.replies {
	case myLost:
		c.lost = true
		return c.release(cmd)
	case myOne:
		st, ok := okStatus(b)
		c.done(st, ok)
		return Verdict{}
	case myPrepare:
		return c.prepareReply(cmd, b, deprecateEOF)
	case myFetch:
		if b[0] == myERR || isEnd(b, deprecateEOF) {
			st, ok := endStatus(b)
			c.done(st, ok)
		}
		return Verdict{}
	}
	// myResults
	switch c.phase {
	case myColumns:
		if c.defs--; c.defs == 0 {
			c.phase = myRows
			if !deprecateEOF {
				c.phase = myColEOF
			}
		}
		return Verdict{}
	case myColEOF:
		c.phase = myRows
		return Verdict{}
	case myRows:
		if b[0] == myERR {
			v := c.release(cmd)
			c.done(0, false)
			return v
		}
		if !isEnd(b, deprecateEOF) {
			return Verdict{}
		}
		st, ok := endStatus(b)
		return c.resultEnd(cmd, st, ok, Verdict{})
	}
	// myStart: the first packet of a result.
	switch b[0] {
	case myERR:
		v := c.release(cmd)
		c.done(0, false)
		return v
	case myLocalInfile:
		// The client sends the file; the server's OK or ERR follows.
		return Verdict{}
	case myOK:
		affected, st, ok := okPacket(b)
		if !ok {
			c.lost = true
			return c.release(cmd)
		}
		v := Verdict{}
		if cmd.cut != nil && c.result == cmd.at {
			v = c.proof(cmd, affected, st)
		}
		if st&myStatusInTrans != 0 {
			c.changed += affected
		} else {
			c.changed = 0
		}
		return c.resultEnd(cmd, st, true, v)
	}
	n, _, ok := lenenc(b)
	if !ok || n == 0 {
		c.lost = true
		return c.release(cmd)
	}
	c.phase, c.defs = myColumns, n
	return Verdict{}
}

// proof judges the OK packet of the statement whose commit is armed to be cut.
func (c *myConn) proof(cmd *myCommand, affected uint64, status uint16) Verdict {
	p := cmd.cut
	cmd.cut = nil
	if status&myStatusInTrans != 0 {
		return Verdict{Action: Release, Pending: p}
	}
	switch cmd.proof {
	case proofAlways:
		return Verdict{Action: Cut, Pending: p, Tag: "OK"}
	case proofBlock:
		if c.changed == 0 {
			return Verdict{Action: Release, Pending: p}
		}
		// The statements of the transaction reported rows they matched: the commit
		// changed them (Txn.Changed), which COMMIT's own OK packet does not say.
		changed := true
		return Verdict{Action: Cut, Pending: p, Tag: "COMMIT", Changed: &changed}
	}
	if affected == 0 {
		return Verdict{Action: Release, Pending: p}
	}
	// In PostgreSQL's command-tag form ("UPDATE 1"), which the readers of events
	// already take as a proof of changed rows; other statements keep the packet's name.
	verb := cmd.verb
	switch verb {
	case "INSERT", "UPDATE", "DELETE":
	default:
		verb = "OK"
	}
	return Verdict{Action: Cut, Pending: p, Tag: fmt.Sprintf("%s %d", verb, affected)}
}

// resultEnd moves past a result that ended with status: to the next result when the
// server says more follow, else the command is done. An armed cut whose result has
// passed unproven ends.
func (c *myConn) resultEnd(cmd *myCommand, status uint16, known bool, v Verdict) Verdict {
	if v.Pending == nil && cmd.cut != nil && c.result >= cmd.at {
		v = c.release(cmd)
	}
	if known && status&myStatusMoreResults != 0 {
		c.phase = myStart
		c.result++
		return v
	}
	if v.Pending == nil && cmd.cut != nil {
		v = c.release(cmd)
	}
	c.done(status, known)
	return v
}

// prepareReply follows COM_STMT_PREPARE_OK and its parameter and column definitions.
func (c *myConn) prepareReply(cmd *myCommand, b []byte, deprecateEOF bool) Verdict {
	switch c.phase {
	case myStart:
		if b[0] != myOK || len(b) < 9 {
			c.done(0, false)
			return Verdict{}
		}
		c.stmtID = binary.LittleEndian.Uint32(b[1:])
		if cmd.sql != "" {
			c.stmts[c.stmtID] = cmd.sql
		}
		cols := uint64(binary.LittleEndian.Uint16(b[5:]))
		params := uint64(binary.LittleEndian.Uint16(b[7:]))
		// Parameters come first, then columns.
		c.nextDefs(params, cols, deprecateEOF)
	case myColumns:
		if c.defs--; c.defs == 0 {
			if !deprecateEOF {
				c.phase = myColEOF
			} else {
				c.nextDefs(c.params, 0, deprecateEOF)
			}
		}
	case myColEOF:
		c.nextDefs(c.params, 0, deprecateEOF)
	}
	return Verdict{}
}

// nextDefs starts the next block of definitions of a prepare reply, or ends the reply.
func (c *myConn) nextDefs(first, then uint64, deprecateEOF bool) {
	switch {
	case first > 0:
		c.phase, c.defs, c.params = myColumns, first, then
	case then > 0:
		c.phase, c.defs, c.params = myColumns, then, 0
	default:
		c.done(0, false)
	}
}

// isEnd reports whether a packet in a result set's rows ends them: an EOF packet, or
// with CLIENT_DEPRECATE_EOF an OK packet with the 0xFE header (a row that starts with
// 0xFE is at least 16 MiB long).
func isEnd(b []byte, deprecateEOF bool) bool {
	if b[0] != myEOF {
		return false
	}
	if deprecateEOF {
		return len(b) < myMaxPayload
	}
	return len(b) < 9
}

// endStatus returns the status flags of the packet that ends a result set.
func endStatus(b []byte) (uint16, bool) {
	if b[0] == myERR {
		return 0, false
	}
	if len(b) == 5 {
		// EOF: warnings, status.
		return binary.LittleEndian.Uint16(b[3:]), true
	}
	_, st, ok := okPacket(b)
	return st, ok
}

// okStatus returns the status flags of an OK or EOF packet, false for another packet.
func okStatus(b []byte) (uint16, bool) {
	switch {
	case len(b) == 0:
		return 0, false
	case b[0] == myOK:
		_, st, ok := okPacket(b)
		return st, ok
	case b[0] == myEOF:
		return endStatus(b)
	}
	return 0, false
}

// okPacket reads an OK packet (header 0x00, or 0xFE ending a result set): its affected
// rows and status flags.
func okPacket(b []byte) (affected uint64, status uint16, ok bool) {
	affected, rest, ok := lenenc(b[1:])
	if !ok {
		return 0, 0, false
	}
	if _, rest, ok = lenenc(rest); !ok || len(rest) < 2 {
		return 0, 0, false
	}
	return affected, binary.LittleEndian.Uint16(rest), true
}
