package toxics

import (
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
// server's READY or AUTHENTICATE answers a v5 STARTUP, both directions carry segments (a
// 6-byte header with a CRC24, the payload, its CRC32): a self-contained segment holds
// whole envelopes, and an envelope too long for one segment spans several that are not
// self-contained. A segment is one unit: a drop drops the whole segment, and a segment
// that carries several writes can be dropped (none of them applied) but not cut, since
// one reply would not prove the others. Long envelopes follow the package's one rule for
// long messages (see Adding a protocol), in both framings: requests that may be points
// and replies that may be proofs matter (all but rows nobody waits for), and an envelope
// that streams spans its segments one by one as they come; one that matters is gathered
// from its segments whole. A STARTUP that negotiates compression, a compressed v4 body,
// and bytes that do not frame or fail a checksum switch a direction to pass-through for
// good. Once the replies pass through, no cut can be proven and none is armed.
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

// cqlConn is one CQL connection as both directions see it: cql_points.go reads its
// requests, cql_proof.go its replies.
type cqlConn struct {
	up, down cqlFramer
	ids      *preparedIDs // the proxy's, shared by its connections

	// Upstream goroutine only.
	upV5 bool    // a v5 STARTUP went up: the requests are framed once it is accepted
	last []int16 // streams of the writes of the point returned last
	txns uint64  // QUERY, EXECUTE and BATCH requests seen: the number of the last

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
