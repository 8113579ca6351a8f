// Package toxics holds indoubt's commit faults: for each wire protocol it supports, it
// understands the protocol well enough to find the moment of commit, and there either
// drops the commit before it reaches the server (commit-drop: not applied) or lets it
// through and drops the server's proof of it, closing the client's connection
// (commit-cut: applied). The client sees the same lost connection either way; the
// proxy knows which it was, and reports an Event with that ground truth.
//
// The protocols are Postgres, Resp (Redis), Mongo (OP_MSG), CQL and MySQL (MariaDB
// too); the documentation of each states its commit points and its proof of commit.
// HTTP carries the same faults
// one layer up, to an API: a request is the point, a response-cut (CommitCut) lets the
// service handle it and drops its response, a request-drop (CommitDrop) keeps it from
// the service, and the Event names the request (Event.Request). HTTP2 does the same
// for HTTP/2 with prior knowledge (h2c), and so for gRPC. Give one to faults.Start
// (Options.Protocol), which runs the proxy; Faults holds the knobs that arm the faults
// at run time, and Event is what each fault reports (one line of faults.jsonl).
//
// # How the pieces fit
//
// A Commits value belongs to one proxy. Each connection the proxy accepts gets a
// Session from Commits.Open, which judges both of its directions:
//
//	client ──► [Requests: frame requests, find commit points, decide] ──► server
//	client ◄── [Replies: frame replies, hold, cut on proof of commit] ◄── server
//
// Every commit point gets exactly one decision, made by Requests when the request
// passes: one roll from the connection's own generator (seeded from Config.Seed and the
// connection's position among those that reached a commit point), compared against the
// knobs in Faults (see Faults for the arithmetic). A drop happens on the spot: the
// requests before the point are forwarded, the point and everything after it are not,
// and the connection closes. A cut is armed on the protocol state and carried out by
// Replies when the server proves the commit; if the server reports an error or a
// rollback instead, the armed cut ends unfired and its reservation against the knob's
// cap is returned. After a cut nothing more from the client reaches the server.
//
// The two directions of a connection share its Session, so the relay that opens it
// pairs them, and names the client, from the socket it accepted. The knobs are atomics
// and take effect on open connections; a Session sees every byte of its connection from
// the first, since a parser skipped mid-stream would lose its framing.
//
// A protocol of one's own implements Protocol and Conn; the Conn documentation is the
// contract (chunking, whole commit points, pass-through on bytes that do not parse).
package toxics

// Maintainer notes: adding a protocol.
//
// These name unexported identifiers, so they are not part of the package documentation.
// A protocol implements Protocol and Conn, nothing else; Session (commit.go) is generic.
//
//   - Framer: split each direction into messages whatever the chunking (a message may
//     arrive one byte at a time, or many in one chunk). Request and Reply return 0 until
//     a whole unit is there; the Session buffers. A request that may be a commit point
//     must be consumed whole, so it can be dropped whole. A protocol whose messages
//     start with their length uses lengthFramer (framer.go) and says only how to read a
//     header: its length, and whether the message matters (may be a point or a proof).
//     The framer owns the one rule for long messages: buffered whole up to 64 MiB when
//     they matter, streamed through in pieces, unjudged, past that or past 64 KiB when
//     they do not, decided on the header alone so that any chunking frames the same.
//     Bytes that do not frame switch that direction to pass-through for good (return
//     len(b), never a point): a guess could cut the wrong reply. Never panic, never
//     keep b.
//   - Matcher, requests: return a *Point for a request whose execution commits: Default
//     when it counts without a user match function, Text for the match function.
//     Know what a commit is in that protocol: PostgreSQL's COMMIT or an autocommit
//     write; for RESP a write command or EXEC outside MULTI; for MongoDB an OP_MSG write
//     without a session transaction, or commitTransaction; for CQL a QUERY/EXECUTE/BATCH
//     that writes (every CQL write is its own commit).
//   - Matcher, replies: ExpectCut arms the reply to the request whose Point Request
//     returned last; the protocol must know which reply answers which request:
//     PostgreSQL counts ReadyForQuery per query or Sync; RESP has no ids and answers in
//     order (skip push '>' and attribute '|' frames); MongoDB's responseTo names the
//     requestID; CQL's stream id names the request. A protocol whose replies come in
//     the order of their requests embeds lastArmed, which is its ExpectCut. For a
//     watched reply return Hold until the commit is proven (when one message alone does
//     not prove it), then Cut with the Pending, or Release with it when the reply shows
//     no commit (an error). Unwatched replies Pass. Shared state between Request and
//     Reply needs a lock; each is called from one goroutine.
//   - A protocol that multiplexes requests on one connection (HTTP/2) may cut one reply
//     and keep the connection: Reply returns Substitute with the Pending and Send, the
//     bytes the client gets instead (a RST_STREAM), and Replace to drop the rest of
//     that reply or to rewrite what follows (HTTP/2 re-encodes header blocks once the
//     client's HPACK decoder missed one). Bytes the server must be told (its own
//     RST_STREAM, flow-control credit of what was dropped) go through Upstreamer, which
//     Requests asks only between whole client messages.
//   - State that spans connections (CQL's prepared ids, which the server issues for
//     every connection) belongs to one proxy, never to the process: several proxies in
//     one process may front different servers. Implement forProxy (proxyScoped), which
//     NewCommits calls once per proxy, and keep the state in the Protocol it returns.
//   - Tests: chunk every stream from 1 byte to 32 KiB and compare; fuzz the framer and
//     both directions (see FuzzPostgres*); run the fault cases (runFaultCases) and the
//     garbage check (checkGarbage: garbage is never a point, and the proxy still serves
//     a good client after it); run the end-to-end tests of package faults against the
//     real server.
