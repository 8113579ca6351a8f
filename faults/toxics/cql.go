package toxics

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"sort"
	"strings"
	"sync"
)

// CQL is the CQL native protocol (Apache Cassandra, ScyllaDB), versions 3 to 5, for the
// commit toxics. gocql speaks v4; v5 wraps its messages in checksummed segments once the
// connection's handshake is done, and both are followed.
//
// There are no transactions to follow: every CQL write is its own commit. Commit points
// (upstream, client to server):
//   - a QUERY whose statement writes: INSERT, UPDATE, DELETE (lightweight transactions,
//     with IF conditions, included), TRUNCATE, and BEGIN ... BATCH;
//   - an EXECUTE of a prepared statement that writes. Statements are learned from the
//     PREPARE requests (kept by stream id until their reply) and the ids the server
//     answers with (RESULT of kind Prepared). A prepared id belongs to the server, not to
//     the connection (Cassandra derives it from the statement and keyspace, and drivers
//     reuse it on every connection), so the ids are remembered for the whole proxy (each
//     Commits has its own, since two proxies in one process may front two servers); an
//     EXECUTE of an id never seen prepared through the same proxy is not a point, since
//     what it does is not known;
//   - a BATCH, which always writes.
//
// Schema statements (CREATE, ALTER, DROP, GRANT, REVOKE) are points that count only
// through a match function. Reads are never points, whatever the consistency: a SERIAL
// read may finish another client's Paxos round, but commits nothing of its own. gocql's
// control connection only reads system tables and sends REGISTER, so it has no points.
//
// Proof of commit (downstream, server to client), in the reply whose stream id is the
// request's: a RESULT of kind Void (a plain write, a batch) or Schema_change, or of kind
// Rows whose first row's [applied] column is true (a lightweight transaction that
// applied). An LWT answered [applied] = false wrote nothing: cutting it would record as
// applied a write that never happened, so the armed cut ends unfired and the reply goes
// on; so does any ERROR (a write timeout included: the client then sees the server's own
// ambiguous answer) and any reply that cannot be read. One reply proves one write, so
// replies are never held.
//
// Framing: v3 and v4 messages are envelopes with a 9-byte header (version with the
// direction bit 0x80 on replies, flags, stream id, opcode, body length). In v5 the
// STARTUP, any OPTIONS before it and their replies are unframed envelopes too; after the
// server's READY or AUTHENTICATE answers a v5 STARTUP, both directions carry segments
// (a 6-byte header with a CRC24, the payload, its CRC32): a self-contained segment holds
// whole envelopes, and an envelope too long for one segment spans several that are not
// self-contained. A segment is one unit: a drop drops the whole segment, and a segment
// that carries several writes can be dropped (none of them applied) but not cut, since
// one reply would not prove the others. Long envelopes follow the rule of framer.go, in
// both framings: requests that may be points and replies that may be proofs matter (all
// but rows nobody waits for), and an envelope that streams spans its segments one by one
// as they come; one that matters is gathered from its segments whole. A STARTUP that
// negotiates compression, a
// compressed v4 body, and bytes that do not frame or fail a checksum switch a direction
// to pass-through for good. Once the replies pass through, no cut can be proven and none
// is armed.
//
// Several writes in flight on one connection (pipelining) are each a point; a cut of one
// closes the connection under the others, whose outcome then stays unknown and is not
// reported. gocql's default of one request at a time per session worker never does this.
//
// The zero value is ready to use: NewCommits gives every proxy its own copy, whose
// connections share the prepared ids they learn. A zero CQL used without Commits keeps
// each connection's ids to itself.
type CQL struct {
	ids *preparedIDs // the proxy's prepared statements; nil: per connection
}

// Name returns "cql".
func (CQL) Name() string { return "cql" }

// forProxy implements proxyScoped: one map of prepared ids per proxy.
func (CQL) forProxy() Protocol { return CQL{ids: newPreparedIDs()} }

// NewConn implements Protocol.
func (p CQL) NewConn() Conn {
	ids := p.ids
	if ids == nil {
		ids = newPreparedIDs()
	}
	c := &cqlConn{
		ids:       ids,
		watch:     map[int16]*Pending{},
		preparing: map[int16]string{},
	}
	c.up = cqlFramer{matters: cqlRequestMatters}
	c.down = cqlFramer{response: true, matters: c.replyMatters}
	return c
}

// Opcodes.
const (
	cqlOpError         = 0x00
	cqlOpStartup       = 0x01
	cqlOpReady         = 0x02
	cqlOpAuthenticate  = 0x03
	cqlOpOptions       = 0x05
	cqlOpSupported     = 0x06
	cqlOpQuery         = 0x07
	cqlOpResult        = 0x08
	cqlOpPrepare       = 0x09
	cqlOpExecute       = 0x0A
	cqlOpRegister      = 0x0B
	cqlOpEvent         = 0x0C
	cqlOpBatch         = 0x0D
	cqlOpAuthChallenge = 0x0E
	cqlOpAuthResponse  = 0x0F
	cqlOpAuthSuccess   = 0x10
)

// Envelope flags.
const (
	cqlFlagCompressed    = 0x01
	cqlFlagTracing       = 0x02
	cqlFlagCustomPayload = 0x04
	cqlFlagWarning       = 0x08
)

// RESULT kinds.
const (
	cqlResultVoid         = 1
	cqlResultRows         = 2
	cqlResultPrepared     = 4
	cqlResultSchemaChange = 5
)

const (
	cqlHeaderLen  = 9
	cqlSegHeader  = 6
	cqlSegTrailer = 4
	// cqlMaxPayload is the largest payload of an uncompressed v5 segment.
	cqlMaxPayload = 1<<17 - 1
	// cqlMaxBody bounds an envelope's body (the protocol's own limit: 256 MB).
	cqlMaxBody = 256 << 20
	// cqlMaxText bounds the statement text kept per prepared id or batch.
	cqlMaxText = 64 << 10
	// cqlMaxPreparing bounds the PREPAREs of one connection awaiting their reply.
	cqlMaxPreparing = 1024
	// cqlMaxPrepared bounds the prepared ids remembered by one proxy.
	cqlMaxPrepared = 1 << 14
)

// cqlRequestOps and cqlReplyOps are the opcodes each direction may carry.
var cqlRequestOps, cqlReplyOps [cqlOpAuthSuccess + 1]bool

func init() {
	for _, op := range []byte{cqlOpStartup, cqlOpOptions, cqlOpQuery, cqlOpPrepare, cqlOpExecute, cqlOpRegister, cqlOpBatch, cqlOpAuthResponse} {
		cqlRequestOps[op] = true
	}
	for _, op := range []byte{cqlOpError, cqlOpReady, cqlOpAuthenticate, cqlOpSupported, cqlOpResult, cqlOpEvent, cqlOpAuthChallenge, cqlOpAuthSuccess} {
		cqlReplyOps[op] = true
	}
}

// cqlHeader is an envelope's header.
type cqlHeader struct {
	version byte // without the direction bit
	flags   byte
	stream  int16
	opcode  byte
	length  int // of the body
}

// cqlEnvelope is one whole message.
type cqlEnvelope struct {
	cqlHeader
	body []byte // aliases the input when the envelope came in one piece
}

// parseCQLHeader reads an envelope header from the first 9 bytes of b. framed says the
// envelope came in a v5 segment, where only version 5 is allowed.
func parseCQLHeader(b []byte, response, framed bool) (cqlHeader, bool) {
	v := b[0]
	if (v&0x80 != 0) != response {
		return cqlHeader{}, false
	}
	h := cqlHeader{
		version: v & 0x7f,
		flags:   b[1],
		stream:  int16(binary.BigEndian.Uint16(b[2:])),
		opcode:  b[4],
	}
	if framed && h.version != 5 || h.version < 3 || h.version > 5 {
		// v1 and v2 have an 8-byte header: not framed here.
		return cqlHeader{}, false
	}
	ops := &cqlRequestOps
	if response {
		ops = &cqlReplyOps
	}
	if int(h.opcode) >= len(ops) || !ops[h.opcode] {
		return cqlHeader{}, false
	}
	n := int32(binary.BigEndian.Uint32(b[5:]))
	if n < 0 || n > cqlMaxBody {
		return cqlHeader{}, false
	}
	h.length = int(n)
	return h, true
}

type cqlPhase uint8

const (
	cqlEnvelopes cqlPhase = iota // unframed envelopes: v3, v4, and v5 before its handshake
	cqlSegments                  // v5 segments, after the handshake
	cqlOpaque                    // passed through unparsed, for good
)

// cqlUnit is what a framer found at the start of its input.
type cqlUnit struct {
	n    int           // bytes of input the unit covers
	envs []cqlEnvelope // whole envelopes: one when unframed, all those of a segment
	// piece: a piece of a long envelope streamed through; head is its header on the
	// first piece.
	piece  bool
	head   *cqlHeader
	opaque bool // bytes passed through unparsed
}

// cqlFramer splits one direction of a CQL connection into units. The zero value frames
// requests at the start of a connection.
type cqlFramer struct {
	response bool
	phase    cqlPhase
	matters  func(cqlHeader) bool

	lf    lengthFramer // unframed envelopes
	chain int          // framed: envelope bytes left, in segments streamed through one by one

	// framed: a long envelope being gathered whole from its segments, resumed where
	// the last call stopped (the input then starts at the same byte).
	gathering bool
	gHead     cqlHeader
	gTotal    int // envelope bytes, header included
	gScanned  int // input bytes of complete segments checked so far
	gGot      int // envelope bytes in them
}

// next returns the unit at the start of b, or false if b does not yet hold one.
func (f *cqlFramer) next(b []byte) (cqlUnit, bool) {
	if len(b) == 0 {
		return cqlUnit{}, false
	}
	switch {
	case f.phase == cqlOpaque:
		return cqlUnit{n: len(b), opaque: true}, true
	case f.phase == cqlEnvelopes || f.lf.skip > 0:
		// An envelope streaming through when the segments start still ends first.
		return f.envelope(b)
	}
	return f.segment(b)
}

func (f *cqlFramer) opaque(b []byte) (cqlUnit, bool) {
	f.phase = cqlOpaque
	f.lf.skip, f.chain, f.gathering = 0, 0, false
	return cqlUnit{n: len(b), opaque: true}, true
}

func (f *cqlFramer) wants(h cqlHeader) bool {
	return f.matters != nil && f.matters(h)
}

func (f *cqlFramer) envelope(b []byte) (cqlUnit, bool) {
	var h cqlHeader
	k, n, ok := f.lf.next(b, cqlHeaderLen, func(hb []byte) (int, bool, bool) {
		var ok bool
		h, ok = parseCQLHeader(hb, f.response, false)
		return cqlHeaderLen + h.length, f.wants(h), ok
	})
	switch {
	case !ok:
		return cqlUnit{}, false
	case k == unitOpaque:
		return f.opaque(b)
	case k == unitHead:
		return cqlUnit{n: n, piece: true, head: &h}, true
	case k == unitPiece:
		return cqlUnit{n: n, piece: true}, true
	}
	return cqlUnit{n: n, envs: []cqlEnvelope{{cqlHeader: h, body: b[cqlHeaderLen:n]}}}, true
}

// segHeader checks the segment header at the start of b (at least 6 bytes).
func segHeader(b []byte) (payload int, selfContained, ok bool) {
	v := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
	crc := uint32(b[3]) | uint32(b[4])<<8 | uint32(b[5])<<16
	if cqlCRC24(v) != crc {
		return 0, false, false
	}
	return int(v & cqlMaxPayload), v&(1<<17) != 0, true
}

// segPayloadOK checks the CRC32 trailer of a whole segment of payload length n.
func segPayloadOK(seg []byte, n int) bool {
	p := seg[cqlSegHeader : cqlSegHeader+n]
	return cqlCRC32(p) == binary.LittleEndian.Uint32(seg[cqlSegHeader+n:])
}

func (f *cqlFramer) segment(b []byte) (cqlUnit, bool) {
	if f.gathering {
		return f.gather(b)
	}
	if len(b) < cqlSegHeader {
		return cqlUnit{}, false
	}
	plen, self, ok := segHeader(b)
	if !ok {
		return f.opaque(b)
	}
	size := cqlSegHeader + plen + cqlSegTrailer
	if len(b) < size {
		return cqlUnit{}, false
	}
	if !segPayloadOK(b, plen) {
		return f.opaque(b)
	}
	payload := b[cqlSegHeader : cqlSegHeader+plen]
	if f.chain > 0 {
		if self || plen > f.chain {
			return f.opaque(b)
		}
		f.chain -= plen
		return cqlUnit{n: size, piece: true}, true
	}
	if self {
		var envs []cqlEnvelope
		for p := payload; len(p) > 0; {
			if len(p) < cqlHeaderLen {
				return f.opaque(b)
			}
			h, ok := parseCQLHeader(p, f.response, true)
			if !ok || cqlHeaderLen+h.length > len(p) {
				return f.opaque(b)
			}
			envs = append(envs, cqlEnvelope{cqlHeader: h, body: p[cqlHeaderLen : cqlHeaderLen+h.length]})
			p = p[cqlHeaderLen+h.length:]
		}
		return cqlUnit{n: size, envs: envs}, true
	}
	// The first segment of an envelope too long for one: it holds that envelope's
	// start and nothing else.
	if plen < cqlHeaderLen {
		return f.opaque(b)
	}
	h, ok := parseCQLHeader(payload, f.response, true)
	if !ok {
		return f.opaque(b)
	}
	total := cqlHeaderLen + h.length
	if total <= plen {
		return f.opaque(b)
	}
	if streams(total, f.wants(h)) {
		f.chain = total - plen
		return cqlUnit{n: size, piece: true, head: &h}, true
	}
	f.gathering = true
	f.gHead, f.gTotal, f.gScanned, f.gGot = h, total, size, plen
	return f.gather(b)
}

// gather consumes the segments of one long envelope whole, once all have arrived.
func (f *cqlFramer) gather(b []byte) (cqlUnit, bool) {
	for f.gGot < f.gTotal {
		rest := b[f.gScanned:]
		if len(rest) < cqlSegHeader {
			return cqlUnit{}, false
		}
		plen, self, ok := segHeader(rest)
		if !ok || self || plen > f.gTotal-f.gGot {
			return f.opaque(b)
		}
		size := cqlSegHeader + plen + cqlSegTrailer
		if len(rest) < size {
			return cqlUnit{}, false
		}
		if !segPayloadOK(rest, plen) {
			return f.opaque(b)
		}
		f.gScanned += size
		f.gGot += plen
	}
	body := make([]byte, 0, f.gTotal-cqlHeaderLen)
	skip := cqlHeaderLen
	for off := 0; off < f.gScanned; {
		plen, _, _ := segHeader(b[off:])
		p := b[off+cqlSegHeader : off+cqlSegHeader+plen]
		if skip > 0 {
			p = p[skip:]
			skip = 0
		}
		body = append(body, p...)
		off += cqlSegHeader + plen + cqlSegTrailer
	}
	u := cqlUnit{n: f.gScanned, envs: []cqlEnvelope{{cqlHeader: f.gHead, body: body}}}
	f.gathering = false
	f.gScanned, f.gGot, f.gTotal = 0, 0, 0
	return u, true
}

// cqlCRC24 is the v5 segment header's checksum of the 3 header bytes (as a
// little-endian integer): CRC24 with polynomial 0x1974F0B and initial value 0x875060,
// fed the least significant byte first.
func cqlCRC24(v uint32) uint32 {
	crc := uint32(0x875060)
	for i := 0; i < 3; i++ {
		crc ^= (v & 0xff) << 16
		v >>= 8
		for j := 0; j < 8; j++ {
			crc <<= 1
			if crc&0x1000000 != 0 {
				crc ^= 0x1974F0B
			}
		}
	}
	return crc & 0xffffff
}

// cqlCRC32Seed is the IEEE CRC32 state after the four bytes Cassandra feeds before
// every payload (the protocol specification does not mention them).
var cqlCRC32Seed = crc32.ChecksumIEEE([]byte{0xfa, 0x2d, 0x55, 0xca})

func cqlCRC32(p []byte) uint32 { return crc32.Update(cqlCRC32Seed, crc32.IEEETable, p) }

func cqlRequestMatters(h cqlHeader) bool {
	switch h.opcode {
	case cqlOpStartup, cqlOpQuery, cqlOpPrepare, cqlOpExecute, cqlOpBatch:
		return true
	}
	return false
}

// cqlReader reads the protocol's notations from a body; any shortfall sets bad.
type cqlReader struct {
	b   []byte
	bad bool
}

func (r *cqlReader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *cqlReader) byte1() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *cqlReader) short() int {
	if v := r.take(2); v != nil {
		return int(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *cqlReader) int32() int32 {
	if v := r.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *cqlReader) str() string { return string(r.take(r.short())) }

func (r *cqlReader) longString() string {
	n := r.int32()
	if n < 0 {
		r.bad = true
		return ""
	}
	return string(r.take(int(n)))
}

func (r *cqlReader) shortBytes() []byte { return r.take(r.short()) }

// bytes reads [bytes]; nil with ok for null.
func (r *cqlReader) bytes() ([]byte, bool) {
	n := r.int32()
	if r.bad {
		return nil, false
	}
	if n < 0 {
		return nil, true
	}
	v := r.take(int(n))
	return v, !r.bad
}

// value skips a [value]: bytes, null (-1) or not set (-2).
func (r *cqlReader) value() {
	n := r.int32()
	switch {
	case n >= 0:
		r.take(int(n))
	case n < -2:
		r.bad = true
	}
}

func (r *cqlReader) stringList() {
	for n := r.short(); n > 0 && !r.bad; n-- {
		r.str()
	}
}

func (r *cqlReader) bytesMap() {
	for n := r.short(); n > 0 && !r.bad; n-- {
		r.str()
		r.bytes()
	}
}

// option skips a type [option], nested types included.
func (r *cqlReader) option(depth int) {
	if depth > 64 {
		r.bad = true
		return
	}
	switch id := r.short(); {
	case r.bad:
	case id == 0x0000: // custom: class name
		r.str()
	case id >= 0x0001 && id <= 0x0015: // native types
	case id == 0x0020 || id == 0x0022: // list, set
		r.option(depth + 1)
	case id == 0x0021: // map
		r.option(depth + 1)
		r.option(depth + 1)
	case id == 0x0030: // UDT: keyspace, name, fields
		r.str()
		r.str()
		for n := r.short(); n > 0 && !r.bad; n-- {
			r.str()
			r.option(depth + 1)
		}
	case id == 0x0031: // tuple
		for n := r.short(); n > 0 && !r.bad; n-- {
			r.option(depth + 1)
		}
	default:
		r.bad = true
	}
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

// preparedIDs maps prepared ids to their statements for every CQL connection of one
// proxy: a prepared id is valid on any connection to the server that issued it. It is
// safe for concurrent use.
type preparedIDs struct {
	mu sync.Mutex
	m  map[string]string
}

func newPreparedIDs() *preparedIDs { return &preparedIDs{m: map[string]string{}} }

func (p *preparedIDs) put(id []byte, stmt string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.m[string(id)]; !ok && len(p.m) >= cqlMaxPrepared {
		// Forget one at random (map order): an id seen again is learned again from
		// its PREPARE, which drivers repeat when the server has forgotten it too.
		for k := range p.m {
			delete(p.m, k)
			break
		}
	}
	p.m[string(id)] = stmt
}

func (p *preparedIDs) get(id []byte) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s, ok := p.m[string(id)]
	return s, ok
}

// cqlWriteReq is a write found in a request.
type cqlWriteReq struct {
	stmt   string
	stream int16
	def    bool
}

type cqlConn struct {
	up, down cqlFramer
	ids      *preparedIDs // the proxy's, shared by its connections

	// Upstream goroutine only.
	upV5 bool    // a v5 STARTUP went up: the requests are framed once it is accepted
	last []int16 // streams of the writes of the point returned last

	// Downstream goroutine only.
	released []*Pending // armed cuts that ended without a commit, not handed back yet

	mu         sync.Mutex
	watch      map[int16]*Pending // stream -> the armed cut of the write sent on it
	preparing  map[int16]string   // stream -> statement of a PREPARE awaiting its RESULT
	v5         bool               // a v5 STARTUP without compression awaits its answer
	framed     bool               // the server accepted it: both directions are segments
	compressed bool               // a STARTUP negotiated compression: all passes through
	blind      bool               // the replies stopped framing: no cut can be proven
}

// replyMatters tells the downstream framer which long replies to buffer whole: all but
// RESULTs nobody waits for (rows of reads).
func (c *cqlConn) replyMatters(h cqlHeader) bool {
	if h.opcode != cqlOpResult {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, watched := c.watch[h.stream]
	_, preparing := c.preparing[h.stream]
	return watched || preparing
}

// Request implements Conn.
func (c *cqlConn) Request(b []byte) (int, *Point) {
	if c.up.phase == cqlEnvelopes && c.upV5 {
		// The client frames its requests only after the server's READY or
		// AUTHENTICATE, which the downstream half has seen by then.
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
	p := &Point{Statement: writes[0].stmt}
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
		if stmt := r.longString(); !r.bad {
			return cqlStatement(stmt, e.stream)
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
		id := r.shortBytes()
		if r.bad {
			break
		}
		if stmt, ok := c.ids.get(id); ok {
			return cqlStatement(stmt, e.stream)
		}
	case cqlOpBatch:
		return cqlWriteReq{stmt: c.batchText(&r), stream: e.stream, def: true}, true
	}
	return cqlWriteReq{}, false
}

func cqlStatement(stmt string, stream int16) (cqlWriteReq, bool) {
	switch classifyCQL(stmt) {
	case cqlWrite:
		return cqlWriteReq{stmt: stmt, stream: stream, def: true}, true
	case cqlSchema:
		return cqlWriteReq{stmt: stmt, stream: stream}, true
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

// ExpectCut implements Conn.
func (c *cqlConn) ExpectCut(p *Pending) bool {
	streams := c.last
	c.last = nil
	if len(streams) != 1 {
		// Several writes in one segment: one reply would not prove the others.
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blind || c.compressed {
		return false
	}
	if _, dup := c.watch[streams[0]]; dup {
		return false
	}
	c.watch[streams[0]] = p
	return true
}

// Reply implements Conn.
func (c *cqlConn) Reply(b []byte) (int, Verdict) {
	if c.down.phase != cqlOpaque {
		c.mu.Lock()
		if c.compressed {
			c.down.phase = cqlOpaque
		}
		c.mu.Unlock()
	}
	u, ok := c.down.next(b)
	if !ok {
		return 0, Verdict{}
	}
	if u.opaque {
		c.goBlind()
		return u.n, c.nextRelease()
	}
	if u.head != nil {
		// Too long to judge: whatever it answers is not a proof.
		if p := c.answered(u.head.stream); p != nil {
			c.released = append(c.released, p)
		}
	}
	var cut *Pending
	var tag string
	for i := range u.envs {
		e := &u.envs[i]
		switch e.opcode {
		case cqlOpReady, cqlOpAuthenticate:
			if c.down.phase == cqlEnvelopes && e.version == 5 {
				c.mu.Lock()
				if c.v5 && !c.framed {
					c.framed = true
					c.down.phase = cqlSegments
				}
				c.mu.Unlock()
			}
		case cqlOpEvent:
			// Pushed by the server (stream -1): not a reply.
			continue
		}
		if e.stream < 0 {
			continue
		}
		c.mu.Lock()
		stmt, preparing := c.preparing[e.stream]
		delete(c.preparing, e.stream)
		p := c.watch[e.stream]
		delete(c.watch, e.stream)
		c.mu.Unlock()
		if preparing && e.opcode == cqlOpResult {
			if id, ok := cqlPreparedID(e); ok {
				c.ids.put(id, stmt)
			}
		}
		if p == nil {
			continue
		}
		if t, ok := cqlProof(e); ok && cut == nil {
			cut, tag = p, t
		} else {
			c.released = append(c.released, p)
		}
	}
	if cut != nil {
		return u.n, Verdict{Action: Cut, Pending: cut, Tag: tag}
	}
	return u.n, c.nextRelease()
}

// answered forgets what waited for the reply on stream and returns its armed cut.
func (c *cqlConn) answered(stream int16) *Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.preparing, stream)
	p := c.watch[stream]
	delete(c.watch, stream)
	return p
}

// goBlind: the replies pass through unread from now on, so every armed cut ends.
func (c *cqlConn) goBlind() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blind = true
	streams := make([]int, 0, len(c.watch))
	for s := range c.watch {
		streams = append(streams, int(s))
	}
	sort.Ints(streams)
	for _, s := range streams {
		c.released = append(c.released, c.watch[int16(s)])
	}
	clear(c.watch)
	clear(c.preparing)
}

// nextRelease hands back one armed cut that ended without a commit. Replies are never
// held, so Release forwards the bytes just as Pass does; a unit that ended several cuts
// hands them back over the following calls (and the session returns any left when the
// connection ends).
func (c *cqlConn) nextRelease() Verdict {
	if len(c.released) == 0 {
		return Verdict{}
	}
	p := c.released[0]
	c.released[0] = nil
	c.released = c.released[1:]
	return Verdict{Action: Release, Pending: p}
}

// cqlReplyBody returns a reader at the message of a reply, past the tracing id, the
// warnings and the custom payload its flags announce; false if it cannot be read.
func cqlReplyBody(e *cqlEnvelope) (*cqlReader, bool) {
	if e.version < 5 && e.flags&cqlFlagCompressed != 0 {
		return nil, false
	}
	r := &cqlReader{b: e.body}
	if e.flags&cqlFlagTracing != 0 {
		r.take(16)
	}
	if e.flags&cqlFlagWarning != 0 {
		r.stringList()
	}
	if e.flags&cqlFlagCustomPayload != 0 {
		r.bytesMap()
	}
	return r, !r.bad
}

// cqlPreparedID reads the id of a RESULT of kind Prepared.
func cqlPreparedID(e *cqlEnvelope) ([]byte, bool) {
	r, ok := cqlReplyBody(e)
	if !ok || r.int32() != cqlResultPrepared {
		return nil, false
	}
	id := r.shortBytes()
	if r.bad || len(id) == 0 {
		return nil, false
	}
	return id, true
}

// cqlProof tells whether the reply to a write proves that it was applied, with the
// tag that says how.
func cqlProof(e *cqlEnvelope) (string, bool) {
	if e.opcode != cqlOpResult {
		return "", false
	}
	r, ok := cqlReplyBody(e)
	if !ok {
		return "", false
	}
	switch r.int32() {
	case cqlResultVoid:
		return "RESULT Void", !r.bad
	case cqlResultSchemaChange:
		return "RESULT Schema_change", !r.bad
	case cqlResultRows:
		if cqlApplied(r, e.version) {
			return "RESULT Rows [applied]=true", true
		}
	}
	return "", false
}

// cqlApplied reads a Rows result and reports whether its first row's first column, a
// lightweight transaction's [applied], is true. Anything else, or anything unreadable,
// is false: only a proven write is cut.
func cqlApplied(r *cqlReader, version byte) bool {
	const (
		globalSpec   = 0x0001
		morePages    = 0x0002
		noMetadata   = 0x0004
		metaChanged  = 0x0008
		appliedLabel = "[applied]"
	)
	flags := r.int32()
	cols := r.int32()
	if r.bad || cols < 1 {
		return false
	}
	if flags&morePages != 0 {
		r.bytes()
	}
	if version >= 5 && flags&metaChanged != 0 {
		r.shortBytes()
	}
	if flags&noMetadata == 0 {
		if flags&globalSpec != 0 {
			r.str()
			r.str()
		}
		for i := int32(0); i < cols && !r.bad; i++ {
			if flags&globalSpec == 0 {
				r.str()
				r.str()
			}
			name := r.str()
			if i == 0 && name != appliedLabel {
				return false
			}
			r.option(0)
		}
	}
	if rows := r.int32(); r.bad || rows < 1 {
		return false
	}
	v, ok := r.bytes()
	return ok && len(v) == 1 && v[0] != 0
}
