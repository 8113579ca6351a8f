package toxics

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"sync"
)

// Mongo is the MongoDB wire protocol for the commit toxics: OP_MSG (opcode 2013), as
// every driver since MongoDB 3.6 speaks it, with the legacy OP_QUERY and OP_REPLY of
// handshakes and OP_COMPRESSED passed through unjudged.
//
// Every message starts with a 16-byte header (messageLength, requestID, responseTo,
// opCode: little-endian int32). A length below 16 or above 48,000,000 bytes (MongoDB's
// maxMessageSizeBytes) switches that direction to pass-through. Long messages follow the
// package's one rule (see Adding a protocol): an OP_MSG request, and the OP_MSG reply to
// a request whose cut is armed, matter; other messages longer than 64 KiB stream through.
// An OP_MSG holds flagBits, sections (kind 0: the body, one BSON document whose first key
// names the command; kind 1: a document sequence, such as the "documents" of an insert or
// the "updates" of an update) and an optional CRC-32C checksum.
//
// Commit points (upstream), OP_MSG only:
//   - insert, update, delete, findAndModify and bulkWrite outside a transaction: counts by
//     default. A command belongs to a multi-document transaction when its body has a
//     txnNumber and autocommit: false (a retryable write has a txnNumber alone, and is its
//     own commit);
//   - commitTransaction: counts by default;
//   - any other command outside a transaction, when a match function matches its text.
//
// Handshakes, monitoring and session housekeeping (hello, isMaster, ping, buildInfo,
// saslStart, saslContinue, endSessions, killCursors, abortTransaction, ...) are never
// points. Point.Text renders the body in the shell's style, keys bare and strings
// quoted, with each document sequence added as an array under its identifier:
// `{findAndModify: "budget", query: {_id: "budget"}, ..., $db: "indoubt"}`. A
// commitTransaction's text starts with the commands of the same transaction (same
// txnNumber) seen on this connection, each followed by "; ". A request with the
// moreToCome flag (an unacknowledged write, w: 0) gets no reply: it can be dropped, never
// cut. Under OP_COMPRESSED (a driver configured with compressors, which FerretDB does not
// offer) nothing is judged.
//
// Proof of commit (downstream): the OP_MSG whose responseTo is the request's requestID,
// with ok: 1 in its body, no writeErrors and no writeConcernError. The cut drops it and
// everything after. An ok: 0 (the command failed), writeErrors (an ordered batch stopped
// at its first error, an unordered one may have applied the rest: partial, claimed
// neither way) or a reply that is not an OP_MSG ends the armed cut unfired, and the
// client gets the reply. So does a writeConcernError: the write applied on the node that
// answered but is not known to be durable (it may be rolled back), so neither "applied"
// nor "not applied" would be the truth; the client sees the write concern error, which
// is its own ambiguity. A findAndModify that matched nothing (value: null, ok: 1) ran and
// changed nothing: it is cut as applied, as PostgreSQL's "UPDATE 0" is. Replies with the
// moreToCome flag (exhaust cursors, streaming hello) answer requests that are never
// points; they pass.
type Mongo struct{}

// Name returns "mongo".
func (Mongo) Name() string { return "mongo" }

// NewConn implements Protocol.
func (Mongo) NewConn() Conn {
	return &mongoConn{watch: map[int32]*Pending{}}
}

const (
	mongoOpReply      = 1
	mongoOpQuery      = 2004
	mongoOpCompressed = 2012
	mongoOpMsg        = 2013

	mongoHeader = 16
	// mongoMaxMessage is MongoDB's maxMessageSizeBytes.
	mongoMaxMessage = 48_000_000

	mongoChecksumPresent = 1 << 0
	mongoMoreToCome      = 1 << 1

	// mongoMaxDepth bounds the nesting rendered in a point's text.
	mongoMaxDepth = 16
	// mongoMaxText bounds a point's text; mongoMaxTag an event's tag.
	mongoMaxText = 16 << 10
	mongoMaxTag  = 256
)

// mongoWrites are the commands that count as commits by default outside a transaction.
var mongoWrites = setOf("insert", "update", "delete", "findAndModify", "findandmodify", "bulkWrite")

// mongoReads are the commands that only read (aggregate unless a stage writes: $out,
// $merge). Event.Txn.Wrote is false for a transaction of these alone; any other
// command may write.
var mongoReads = setOf("find", "getMore", "count", "distinct", "aggregate", "listCollections",
	"listDatabases", "listIndexes", "dbStats", "collStats", "explain")

// mongoWritesData reports whether a command may change data.
func mongoWritesData(name string, msg mongoMsg) bool {
	if !mongoReads[name] {
		return true
	}
	return name == "aggregate" && (bytes.Contains(msg.body, []byte("$out\x00")) || bytes.Contains(msg.body, []byte("$merge\x00")))
}

// mongoControl are handshake, monitoring, authentication and session commands: never
// points.
var mongoControl = setOf(
	"hello", "isMaster", "ismaster", "ping", "buildInfo", "buildinfo", "saslStart",
	"saslContinue", "authenticate", "logout", "getnonce", "endSessions", "killSessions",
	"refreshSessions", "startSession", "killCursors", "abortTransaction", "getLastError",
	"getlasterror", "whatsmyuri", "getParameter", "connectionStatus", "hostInfo",
	"listCommands", "serverStatus", "getCmdLineOpts", "getLog", "getFreeMonitoringStatus",
)

// mongoHdr is a message header.
type mongoHdr struct {
	length             int
	requestID, replyTo int32
	op                 int32
}

// mongoHeaderAt reads the header at the start of b (at least mongoHeader bytes).
func mongoHeaderAt(b []byte) mongoHdr {
	return mongoHdr{
		length:    int(int32(binary.LittleEndian.Uint32(b))),
		requestID: int32(binary.LittleEndian.Uint32(b[4:])),
		replyTo:   int32(binary.LittleEndian.Uint32(b[8:])),
		op:        int32(binary.LittleEndian.Uint32(b[12:])),
	}
}

// mongoRequestSize: every OP_MSG request matters.
var mongoRequestSize = mongoSize(func(mongoHdr) bool { return true })

// mongoSize reads a header for a lengthFramer: an OP_MSG matters when matters says so
// of its header; nothing else ever does.
func mongoSize(matters func(mongoHdr) bool) sizer {
	return func(b []byte) (int, bool, bool) {
		h := mongoHeaderAt(b)
		if h.length < mongoHeader || h.length > mongoMaxMessage {
			return 0, false, false
		}
		return h.length, h.op == mongoOpMsg && matters(h), true
	}
}

type mongoConn struct {
	up, down lengthFramer

	// Upstream goroutine only.
	lastID   int32 // requestID of the last point returned
	lastMore bool  // ... which expects no reply
	hasLast  bool
	txKey    string          // lsid and txnNumber of the transaction in txText
	txText   strings.Builder // its commands seen on this connection
	txSeq    uint64          // its number among the connection's transactions
	txWrote  bool            // one of them may write
	txns     uint64          // transactions seen start: the number of the last

	mu    sync.Mutex
	watch map[int32]*Pending // requestID -> armed cut
}

// mongoMsg is a parsed OP_MSG.
type mongoMsg struct {
	flags uint32
	body  []byte // the kind 0 section's document; nil if none
	seqs  []mongoSeq
}

type mongoSeq struct {
	id   string
	docs []byte // the documents, back to back
}

// parseMsg parses a whole OP_MSG (header included). False if it does not parse.
func parseMsg(m []byte) (mongoMsg, bool) {
	var msg mongoMsg
	if len(m) < mongoHeader+4 {
		return msg, false
	}
	msg.flags = binary.LittleEndian.Uint32(m[mongoHeader:])
	end := len(m)
	if msg.flags&mongoChecksumPresent != 0 {
		end -= 4
	}
	b := m[mongoHeader+4 : max(end, mongoHeader+4)]
	for len(b) > 0 {
		kind := b[0]
		b = b[1:]
		switch kind {
		case 0:
			n, ok := bsonLen(b)
			if !ok || msg.body != nil {
				return msg, false
			}
			msg.body, b = b[:n], b[n:]
		case 1:
			if len(b) < 4 {
				return msg, false
			}
			size := int(int32(binary.LittleEndian.Uint32(b)))
			if size < 5 || size > len(b) {
				return msg, false
			}
			sec := b[4:size]
			b = b[size:]
			id, rest, ok := cstring(sec)
			if !ok {
				return msg, false
			}
			for r := rest; len(r) > 0; {
				n, ok := bsonLen(r)
				if !ok {
					return msg, false
				}
				r = r[n:]
			}
			msg.seqs = append(msg.seqs, mongoSeq{id: id, docs: rest})
		default:
			return msg, false
		}
	}
	return msg, msg.body != nil
}

// Request implements Conn.
func (c *mongoConn) Request(b []byte) (int, *Point) {
	// An OP_MSG may be a point: it is consumed whole.
	k, n, ok := c.up.next(b, mongoHeader, mongoRequestSize)
	if !ok || k != unitWhole {
		return n, nil
	}
	h := mongoHeaderAt(b)
	if h.op != mongoOpMsg {
		return n, nil
	}
	msg, ok := parseMsg(b[:n])
	if !ok {
		return n, nil
	}
	return n, c.command(h, msg)
}

// command returns the point of a parsed request, if it is one.
func (c *mongoConn) command(h mongoHdr, msg mongoMsg) *Point {
	var name string
	var txn, lsid []byte
	inTx := false
	first := true
	bsonWalk(msg.body, func(typ byte, key string, val []byte) bool {
		if first {
			name, first = key, false
		}
		switch key {
		case "txnNumber":
			txn = val
		case "lsid":
			lsid = val
		case "autocommit":
			inTx = typ == 0x08 && len(val) == 1 && val[0] == 0
		}
		return true
	})
	inTx = inTx && txn != nil
	if name == "" || mongoControl[name] {
		return nil
	}
	var p *Point
	switch {
	case name == "commitTransaction":
		text := mongoText(msg)
		prefix := ""
		// A transaction whose commands ran on another connection (a commit retried
		// elsewhere) is a transaction of its own here, and may have written.
		seq, wrote := uint64(0), true
		if key := string(lsid) + string(txn); key == c.txKey {
			prefix, seq, wrote = c.txText.String(), c.txSeq, c.txWrote
		} else {
			c.txns++
			seq = c.txns
		}
		c.txKey = ""
		c.txText.Reset()
		p = &Point{Statement: text, Text: prefix + text, Default: true, Txn: seq, Wrote: wrote}
	case inTx:
		key := string(lsid) + string(txn)
		if key != c.txKey {
			c.txKey = key
			c.txText.Reset()
			c.txns++
			c.txSeq, c.txWrote = c.txns, false
		}
		c.txWrote = c.txWrote || mongoWritesData(name, msg)
		if t := mongoText(msg); c.txText.Len()+len(t)+2 <= maxBlockText {
			c.txText.WriteString(t)
			c.txText.WriteString("; ")
		}
		return nil
	default:
		c.txns++
		p = &Point{Default: mongoWrites[name], Txn: c.txns, Wrote: mongoWritesData(name, msg)}
		// Rendered only for a match function or a fault.
		p.render = func() (string, string) {
			text := mongoText(msg)
			return text, text
		}
	}
	c.lastID, c.lastMore, c.hasLast = h.requestID, msg.flags&mongoMoreToCome != 0, true
	return p
}

// ExpectCut implements Conn.
func (c *mongoConn) ExpectCut(p *Pending) bool {
	if !c.hasLast || c.lastMore {
		// No reply will come to carry the proof.
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.watch[c.lastID]; ok {
		return false
	}
	c.watch[c.lastID] = p
	return true
}

// Reply implements Conn.
func (c *mongoConn) Reply(b []byte) (int, Verdict) {
	k, n, ok := c.down.next(b, mongoHeader, mongoSize(c.watched))
	if !ok || k == unitOpaque || k == unitPiece {
		return n, Verdict{}
	}
	h := mongoHeaderAt(b)
	c.mu.Lock()
	p := c.watch[h.replyTo]
	delete(c.watch, h.replyTo)
	c.mu.Unlock()
	if p == nil {
		return n, Verdict{}
	}
	if k != unitWhole || h.op != mongoOpMsg {
		return n, Verdict{Action: Release, Pending: p}
	}
	msg, ok := parseMsg(b[:n])
	if !ok || !mongoCommitted(msg.body) {
		return n, Verdict{Action: Release, Pending: p}
	}
	return n, Verdict{Action: Cut, Pending: p, Tag: shorten(bsonText(msg.body), mongoMaxTag)}
}

// watched reports whether the reply with this header answers a request whose cut is
// armed: only such a reply is buffered whole to be judged.
func (c *mongoConn) watched(h mongoHdr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watch[h.replyTo] != nil
}

// mongoCommitted reports whether a reply body proves that the command applied.
func mongoCommitted(body []byte) bool {
	ok, bad := false, false
	bsonWalk(body, func(typ byte, key string, val []byte) bool {
		switch key {
		case "ok":
			ok = bsonTrue(typ, val)
		case "writeErrors":
			// An empty array is 5 bytes.
			bad = bad || typ != 0x04 || len(val) > 5
		case "writeConcernError":
			bad = true
		}
		return true
	})
	return ok && !bad
}

// bsonTrue reports whether a value is true or a non-zero number.
func bsonTrue(typ byte, v []byte) bool {
	switch typ {
	case 0x01:
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		return f != 0 && !math.IsNaN(f)
	case 0x08:
		return v[0] != 0
	case 0x10:
		return binary.LittleEndian.Uint32(v) != 0
	case 0x12:
		return binary.LittleEndian.Uint64(v) != 0
	}
	return false
}

// bsonLen returns the length of the document at the start of b, if it fits.
func bsonLen(b []byte) (int, bool) {
	if len(b) < 5 {
		return 0, false
	}
	n := int(int32(binary.LittleEndian.Uint32(b)))
	if n < 5 || n > len(b) || b[n-1] != 0 {
		return 0, false
	}
	return n, true
}

// bsonWalk calls fn for each top-level element of doc, in order, with its type, key and
// value bytes, until fn returns false. It stops at the first element that does not
// parse and reports whether the whole document did.
func bsonWalk(doc []byte, fn func(typ byte, key string, val []byte) bool) bool {
	n, ok := bsonLen(doc)
	if !ok {
		return false
	}
	b := doc[4 : n-1]
	for len(b) > 0 {
		typ := b[0]
		key, rest, ok := cstring(b[1:])
		if !ok {
			return false
		}
		size := bsonValueSize(typ, rest)
		if size < 0 {
			return false
		}
		if !fn(typ, key, rest[:size]) {
			return true
		}
		b = rest[size:]
	}
	return true
}

// bsonValueSize returns the size of the value of type typ at the start of b, or -1.
func bsonValueSize(typ byte, b []byte) int {
	fixed := func(n int) int {
		if n > len(b) {
			return -1
		}
		return n
	}
	i32 := func() int {
		if len(b) < 4 {
			return -1
		}
		return int(int32(binary.LittleEndian.Uint32(b)))
	}
	switch typ {
	case 0x01, 0x09, 0x11, 0x12: // double, datetime, timestamp, int64
		return fixed(8)
	case 0x02, 0x0D, 0x0E: // string, code, symbol
		n := i32()
		if n < 1 {
			return -1
		}
		return fixed(4 + n)
	case 0x03, 0x04: // document, array
		n := i32()
		if n < 5 || n > len(b) || b[n-1] != 0 {
			return -1
		}
		return n
	case 0x05: // binary
		n := i32()
		if n < 0 {
			return -1
		}
		return fixed(5 + n)
	case 0x06, 0x0A, 0xFF, 0x7F: // undefined, null, min key, max key
		return 0
	case 0x07: // ObjectId
		return fixed(12)
	case 0x08:
		return fixed(1)
	case 0x0B: // regex: two cstrings
		_, r, ok := cstring(b)
		if !ok {
			return -1
		}
		_, r, ok = cstring(r)
		if !ok {
			return -1
		}
		return len(b) - len(r)
	case 0x0C: // DBPointer: string and ObjectId
		n := i32()
		if n < 1 {
			return -1
		}
		return fixed(4 + n + 12)
	case 0x0F: // code with scope
		n := i32()
		if n < 14 {
			return -1
		}
		return fixed(n)
	case 0x10:
		return fixed(4)
	case 0x13:
		return fixed(16)
	}
	return -1
}

// mongoText renders a request for events and match functions: its body with its
// document sequences added as arrays.
func mongoText(msg mongoMsg) string {
	w := &textBuf{max: mongoMaxText}
	w.doc(msg.body, 0, func() {
		for _, s := range msg.seqs {
			w.sep()
			w.key(s.id)
			w.str("[")
			for i, r := 0, s.docs; len(r) > 0; i++ {
				n, ok := bsonLen(r)
				if !ok {
					break
				}
				if i > 0 {
					w.str(", ")
				}
				w.doc(r[:n], 1, nil)
				r = r[n:]
			}
			w.str("]")
		}
	})
	return w.String()
}

// bsonText renders a document.
func bsonText(doc []byte) string {
	w := &textBuf{max: mongoMaxText}
	w.doc(doc, 0, nil)
	return w.String()
}

// textBuf renders BSON in the shell's style up to max bytes.
type textBuf struct {
	strings.Builder
	max   int
	first bool
}

func (w *textBuf) str(s string) {
	if room := w.max - w.Len(); room > 0 {
		w.WriteString(s[:min(len(s), room)])
	}
}

func (w *textBuf) sep() {
	if !w.first {
		w.str(", ")
	}
	w.first = false
}

func (w *textBuf) key(k string) {
	if plainKey(k) {
		w.str(k)
	} else {
		w.str(strconv.Quote(k))
	}
	w.str(": ")
}

func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c == '_' || c == '$' || c == '.' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// doc renders a document (array: elements without keys); more, when not nil, adds
// elements before the closing brace.
func (w *textBuf) doc(d []byte, depth int, more func()) {
	w.elems(d, depth, false, more)
}

func (w *textBuf) elems(d []byte, depth int, array bool, more func()) {
	open, close := "{", "}"
	if array {
		open, close = "[", "]"
	}
	if depth > mongoMaxDepth {
		w.str(open + "...")
		w.str(close)
		return
	}
	w.str(open)
	w.first = true
	whole := bsonWalk(d, func(typ byte, key string, val []byte) bool {
		if w.Len() >= w.max {
			return false
		}
		w.sep()
		if !array {
			w.key(key)
		}
		w.value(typ, val, depth)
		return true
	})
	if !whole {
		w.sep()
		w.str("<bad bson>")
	}
	if more != nil {
		more()
	}
	w.str(close)
	w.first = false
}

func (w *textBuf) value(typ byte, v []byte, depth int) {
	switch typ {
	case 0x01:
		f := math.Float64frombits(binary.LittleEndian.Uint64(v))
		s := strconv.FormatFloat(f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEN") {
			s += ".0"
		}
		w.str(s)
	case 0x02, 0x0D, 0x0E:
		s := v[4 : len(v)-1]
		w.str(strconv.Quote(string(s[:min(len(s), 1<<10)])))
	case 0x03:
		w.elems(v, depth+1, false, nil)
	case 0x04:
		w.elems(v, depth+1, true, nil)
	case 0x05:
		data := v[5:]
		if len(data) <= 16 {
			w.str("BinData(" + strconv.Itoa(int(v[4])) + ", " + hex.EncodeToString(data) + ")")
		} else {
			w.str("BinData(" + strconv.Itoa(int(v[4])) + ", " + strconv.Itoa(len(data)) + " bytes)")
		}
	case 0x06:
		w.str("undefined")
	case 0x07:
		w.str("ObjectId(" + hex.EncodeToString(v) + ")")
	case 0x08:
		w.str(strconv.FormatBool(v[0] != 0))
	case 0x09:
		w.str("Date(" + strconv.FormatInt(int64(binary.LittleEndian.Uint64(v)), 10) + ")")
	case 0x0A:
		w.str("null")
	case 0x10:
		w.str(strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(v))), 10))
	case 0x11:
		w.str("Timestamp(" + strconv.FormatUint(binary.LittleEndian.Uint64(v), 10) + ")")
	case 0x12:
		w.str("NumberLong(" + strconv.FormatInt(int64(binary.LittleEndian.Uint64(v)), 10) + ")")
	case 0x13:
		w.str("NumberDecimal(" + hex.EncodeToString(v) + ")")
	case 0xFF:
		w.str("MinKey")
	case 0x7F:
		w.str("MaxKey")
	default:
		w.str("<type " + strconv.Itoa(int(typ)) + ">")
	}
}
