package toxics

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Protocol teaches the commit faults one wire protocol. An implementation provides a
// framer (it splits each direction into messages, whatever the chunking) and a matcher
// (it finds commit points among the requests and the proof of commit among the
// replies). See the package documentation for the contract in full.
type Protocol interface {
	// Name is the protocol's name in events: postgres, resp, mongo, cql.
	Name() string
	// NewConn returns the state of one proxied connection, shared by its two directions.
	NewConn() Conn
}

// proxyScoped is implemented by a protocol whose state spans the connections of one
// proxy (CQL's prepared ids): NewCommits calls forProxy once, so that two proxies in one
// process never share that state.
type proxyScoped interface {
	forProxy() Protocol
}

// Conn is the protocol state of one proxied connection. Request is only ever called
// from Session.Requests and Reply from Session.Replies, each from one goroutine at a
// time, so each direction's framing state needs no lock; state the two directions
// share (which request a reply answers, the transaction status the replies report)
// must be guarded by the implementation.
//
// Both methods receive b, the bytes not yet consumed, starting where the last call
// stopped. They return how many bytes they consume, 0 if b does not yet hold enough to
// decide (the caller buffers and calls again with more). A request that may become a
// commit point must be consumed whole in one call, so that it can be dropped whole.
// Neither may keep b after returning, nor panic on any input: bytes that do not parse
// switch the connection to pass-through (consume everything, never report a point).
type Conn interface {
	// Request consumes client-to-server bytes. A non-nil Point means the consumed
	// bytes are one complete request whose execution commits (or would, if it matches).
	Request(b []byte) (n int, p *Point)
	// ExpectCut arms a cut of the reply to the request whose Point Request returned
	// last. It is called before that request is forwarded, so the reply cannot have
	// been seen yet. It returns false to refuse (a cut is already armed for the same
	// commit, or no reply will prove it). Once accepted, the protocol hands c back
	// exactly once, in a Verdict of Reply: Cut when the server proves the commit,
	// Release when it does not.
	ExpectCut(c *Pending) bool
	// Reply consumes server-to-client bytes and says what to do with them.
	Reply(b []byte) (n int, v Verdict)
}

// Point is a commit point found by a protocol's matcher.
type Point struct {
	// Statement is the request as shown in events (the caller shortens it).
	Statement string
	// Text is what a user's match function sees: for a commit that ends a transaction
	// block, the statements of the block and the commit; else the request itself.
	Text string
	// Default reports whether the point counts when the user gave no match function:
	// a write outside a transaction block, or the commit of a block.
	Default bool
	// Txn numbers the transaction the point commits among the transactions of its
	// connection, from 1; 0 when the protocol does not tell. Every transaction the
	// protocol saw start counts, one that only read or rolled back too, so that the
	// transactions of one operation have numbers that follow one another.
	Txn uint64
	// Wrote reports whether that transaction sent a statement that can change data
	// (see Txn.Wrote).
	Wrote bool
	// Request is the API request of the point, for the protocols of an API layer
	// (HTTP); nil for a database protocol. The protocol may set its Status when the
	// response arrives, before the cut's event.
	Request *Request

	// number is the point's number among the proxy's counted points (Event.Point),
	// given when it is decided.
	number uint64
	// writes is what the transaction's statements can change, for a protocol that
	// reads the replies to them (PostgreSQL: pgtags.go).
	writes txnWrites

	// render, when set, makes Statement and Text. A protocol that finds a point in
	// every request (RESP) defers rendering them to the points that need them: for a
	// match function, or for a fault. It may read the bytes given to Request, so it is
	// called before Session.Requests returns, or never.
	render func() (statement, text string)
}

// rendered fills Statement and Text when the protocol deferred them.
func (p *Point) rendered() {
	if p.render != nil {
		p.Statement, p.Text = p.render()
		p.render = nil
	}
}

// Action is what Session.Replies does with the bytes a Reply consumed.
type Action uint8

const (
	// Pass forwards the bytes, or adds them to the held bytes while holding.
	Pass Action = iota
	// Hold starts holding at these bytes (if not holding already): nothing from here
	// on reaches the client until a Release or a Cut.
	Hold
	// Cut: the server proved the commit of Verdict.Pending's request. The held bytes,
	// these and all later ones are dropped and the connection is closed.
	Cut
	// Release forwards the held bytes and these. With a Pending, that armed cut is
	// over without a commit to cut (an error, a rollback).
	Release
	// Substitute drops the held bytes and these and forwards Verdict.Send in their
	// place; the connection goes on. With a Pending, the server proved that commit
	// and the protocol cut only its reply (an HTTP/2 stream): the cut fires.
	Substitute
	// Replace is Release (a Pending ends unfired) with Verdict.Send forwarded in place
	// of the held bytes and these: for a protocol that rewrites what the client gets
	// (HTTP/2 header blocks, encoded anew after a stream was cut).
	Replace
)

// Verdict is a protocol's judgement of the bytes a Reply consumed.
type Verdict struct {
	// Action is what Session.Replies does with the bytes.
	Action Action
	// Pending is the armed cut this verdict resolves (Cut, and Release when one ends).
	Pending *Pending
	// Tag is the reply that proved the commit (Cut): "COMMIT", "UPDATE 1".
	Tag string
	// Tags are the replies to the statements of the transaction a Cut commits, in
	// order ("UPDATE 1", "INSERT 0 0"), when the protocol reads them (Txn.Tags).
	Tags []string
	// Changed is what those replies prove the commit changed (Txn.Changed): nil when
	// they do not tell.
	Changed *bool
	// Send is what Substitute and Replace forward instead of the bytes (nil: nothing).
	Send []byte
}

// Upstreamer is an optional extra of a Conn whose protocol has bytes of its own for the
// server (HTTP/2: the RST_STREAM of a stream whose reply it cut, and the flow-control
// credit of the frames it dropped). Session.Requests calls Upstream each time the
// client's bytes arrive, before judging those, and sends what it returns; Upstream
// returns bytes only where a message may start, never inside one it has partly
// forwarded. A Conn that wraps another (to change its points) should pass it on.
type Upstreamer interface {
	Upstream() []byte
}

// Pending is a cut decided at a commit point, waiting for the server's proof. The
// protocol keeps it opaque and hands it back once in a Verdict.
type Pending struct {
	knob  *Knob
	point Point
}

// Config configures the commit faults of one proxy.
type Config struct {
	// Protocol is the wire protocol spoken through the proxy. Required.
	Protocol Protocol
	// Seed derives one generator per connection, from the seed and the connection's
	// position among the connections that reached a commit point, in the order they
	// reached their first: the same seed and the same messages in the same order give
	// the same decisions.
	Seed int64
	// Match, when set, selects which commit points count: those whose Point.Text it
	// accepts. When nil, writes and commits count (Point.Default).
	Match func(text string) bool
	// Events receives every fault that fires, from the proxy's goroutines, before the
	// connection is closed. It must be safe for concurrent use and return quickly.
	// Nil drops events.
	Events func(Event)
}

// Commits applies the commit faults of one proxy: it holds the knobs, makes the seeded
// decisions and reports the events. Each proxied connection gets a Session from Open,
// which judges the bytes of its two directions; a relay passes them through the
// Session on their way. faults.Proxy is the relay indoubt ships; use Commits only to
// put the commit faults in a relay of your own. Arm and disarm the faults through
// Faults at any time. Its methods are safe for concurrent use.
type Commits struct {
	// Faults are the knobs; all start disarmed.
	Faults Faults

	cfg Config

	mu      sync.Mutex
	next    uint64 // accept-order index of the next connection
	streams uint64 // generators handed out so far

	points atomic.Uint64 // counted commit points so far (Event.Point)
}

// NewCommits returns the commit faults for cfg, all disarmed. It fails without a
// protocol.
func NewCommits(cfg Config) (*Commits, error) {
	if cfg.Protocol == nil {
		return nil, errors.New("commit faults: no protocol")
	}
	if ps, ok := cfg.Protocol.(proxyScoped); ok {
		cfg.Protocol = ps.forProxy()
	}
	return &Commits{cfg: cfg}, nil
}

// Open returns the Session of a connection the relay just accepted. client is the
// client's address as the relay sees it (the string a client reads from its own
// LocalAddr), named in the connection's events. Call Open once per connection, in the
// order the relay accepts them: that order numbers Event.ConnIndex.
func (c *Commits) Open(client string) *Session {
	c.mu.Lock()
	i := c.next
	c.next++
	c.mu.Unlock()
	return &Session{c: c, index: i, addr: client, conn: c.cfg.Protocol.NewConn()}
}

// Session is the commit faults' state of one proxied connection: one protocol Conn,
// shared by both directions, and the cuts armed on it. A relay passes every byte from
// the client through Requests and every byte from the server through Replies, each in
// order, and calls RequestsEnded and RepliesEnded when that direction's source ends.
// Requests and RequestsEnded are called from one goroutine at a time, and so are
// Replies and RepliesEnded; the two directions may run concurrently.
//
// A Session forwards through the send function it is given, in order, the bytes that
// may go on: pieces of the slice it was given, or bytes of its own. It keeps no
// reference to the slice it was given, and never writes into a piece it has sent. So a
// relay that reads into one buffer again and again writes what send gets before it
// reads again, and one that gives each call fresh bytes may pass the pieces on without
// a copy. A send that fails ends the direction as a fault does.
type Session struct {
	c     *Commits
	index uint64
	addr  string
	conn  Conn
	rng   *rand.Rand // Requests only: all decisions are made there; nil until the
	//                  connection's first commit point

	up   upState   // Requests only
	down downState // Replies only

	mu    sync.Mutex
	armed []*Pending // cuts accepted by the protocol and not resolved yet
	// over: the replies have ended (a cut, or the server's side closed); decide and
	// forward nothing more. Set under mu (arm reads it there, so no cut is armed after
	// end), read alone by Requests on every call.
	over atomic.Bool
}

type upState struct {
	buf    []byte // an incomplete request, owned here (never shared with a sent slice)
	closed bool
}

type downState struct {
	buf     []byte // an incomplete reply, owned here
	held    []byte // replies held back
	holding bool
	closed  bool
}

func (s *Session) arm(p *Pending) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over.Load() {
		return false
	}
	s.armed = append(s.armed, p)
	return true
}

// resolve forgets an armed cut that fired or ended; false if it was not armed.
func (s *Session) resolve(p *Pending) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.armed {
		if q == p {
			s.armed = append(s.armed[:i], s.armed[i+1:]...)
			return true
		}
	}
	return false
}

// end marks the connection over and returns the reservations of cuts that can no
// longer fire.
func (s *Session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over.Store(true)
	for _, p := range s.armed {
		p.knob.untake()
	}
	s.armed = nil
}

func (c *Commits) emit(s *Session, k Kind, p Point, v Verdict) {
	if c.cfg.Events == nil {
		return
	}
	t := NotApplied
	if k == CommitCut {
		t = Applied
	}
	c.cfg.Events(Event{
		Time:      time.Now(),
		Conn:      s.addr,
		ConnIndex: s.index,
		Point:     p.number,
		Protocol:  c.cfg.Protocol.Name(),
		Kind:      k,
		Truth:     t,
		Statement: shorten(p.Statement, 256),
		Tag:       v.Tag,
		Txn:       p.txn(v),
		Request:   p.request(),
	})
}

// txn describes the transaction of a point for its event, nil when the protocol does
// not number transactions. v is the verdict that cut it: its replies may prove that
// the writes changed nothing.
func (p Point) txn(v Verdict) *Txn {
	if p.Txn == 0 {
		return nil
	}
	sum := sha256.Sum256([]byte(p.Text))
	wrote := p.Wrote && (v.Changed == nil || *v.Changed)
	return &Txn{Seq: p.Txn, Wrote: wrote, Digest: hex.EncodeToString(sum[:8]), Text: shorten(p.Text, 256),
		Tags: v.Tags, Changed: v.Changed}
}

// request copies the point's API request for its event, nil when it has none.
func (p Point) request() *Request {
	if p.Request == nil {
		return nil
	}
	r := *p.Request
	return &r
}

// decide makes the one decision of a commit point.
func (c *Commits) decide(s *Session, p *Point) (Kind, *Knob) {
	if c.cfg.Match != nil {
		p.rendered()
		if !c.cfg.Match(p.Text) {
			return 0, nil
		}
	} else if !p.Default {
		return 0, nil
	}
	if s.rng == nil {
		// The generator goes with the connection's first commit point, not its
		// accept: connections without commits (pgx opens one after every error
		// to send a CancelRequest, at a moment that races the client's next
		// connection) must not shift the streams of the others.
		c.mu.Lock()
		s.rng = rand.New(rand.NewPCG(uint64(c.cfg.Seed), c.streams))
		c.streams++
		c.mu.Unlock()
	}
	p.number = c.points.Add(1)
	// Roll even when nothing is armed, so that the draws stay aligned with the
	// commit points whatever the schedule did.
	u := s.rng.Float64()
	if k, knob := c.Faults.Listed.match(p.number, s.index, p.Txn); k != 0 {
		return k, knob
	}
	return c.Faults.choose(u, func() bool { return s.rng.IntN(2) == 0 })
}

// unbuffer returns the incomplete bytes kept in *buf followed by data, and empties
// *buf. owned reports whether the result is the Session's own (a copy), not data.
func unbuffer(buf *[]byte, data []byte) (out []byte, owned bool) {
	if len(*buf) > 0 {
		data = append(*buf, data...)
		*buf = nil
		return data, true
	}
	return data, false
}

// keep returns the bytes of an incomplete message for the Session to hold: rest itself
// when the Session owns it, else a copy, since the caller may reuse its slice.
func keep(rest []byte, owned bool) []byte {
	if owned {
		return rest
	}
	return append([]byte(nil), rest...)
}

// sender forwards pieces through a relay's send and remembers its first failure.
type sender struct {
	fn     func([]byte) error
	failed bool
}

// send forwards a piece, if not empty. Each piece is capped at its end, so that no
// reader's append can reach the bytes after it, which may be kept as the next
// incomplete message.
func (s *sender) send(b []byte) {
	if len(b) > 0 && !s.failed {
		s.failed = s.fn(b[:len(b):len(b)]) != nil
	}
}

// Requests judges bytes from the client and sends on those that may reach the server.
// It returns false once the connection must end: a dropped commit (the requests before
// it were sent, the commit and all after it were not), a cut carried out by Replies
// (nothing more reaches the server), or a send that failed. The relay then closes the
// server's side, as it would at the client's end of stream, and calls Requests no more.
func (s *Session) Requests(b []byte, send func([]byte) error) bool {
	st := &s.up
	if st.closed {
		return false
	}
	if s.over.Load() {
		// A cut closed the client's side: whatever it pipelined after the commit
		// must not reach the server, or it would apply with no fault recorded.
		st.closed = true
		st.buf = nil
		return false
	}
	data, owned := unbuffer(&st.buf, b)
	out := &sender{fn: send}
	if u, ok := s.conn.(Upstreamer); ok {
		out.send(u.Upstream())
	}
	off := 0
	for off < len(data) {
		n, p := s.conn.Request(data[off:])
		if n <= 0 {
			break
		}
		if n > len(data)-off {
			n = len(data) - off
			p = nil
		}
		if p != nil {
			kind, knob := s.c.decide(s, p)
			if kind != 0 {
				p.rendered()
			}
			switch kind {
			case CommitDrop:
				out.send(data[:off])
				knob.fired.Add(1)
				s.c.emit(s, CommitDrop, *p, Verdict{})
				st.closed = true
				return false
			case CommitCut:
				pd := &Pending{knob: knob, point: *p}
				if !s.arm(pd) {
					knob.untake()
				} else if !s.conn.ExpectCut(pd) {
					s.resolve(pd)
					knob.untake()
				}
			}
		}
		off += n
	}
	out.send(data[:off])
	if off < len(data) {
		// Sent pieces end at off and are capped there: appending to the rest can
		// never write into them.
		st.buf = keep(data[off:], owned)
	}
	if out.failed {
		st.closed = true
		return false
	}
	return true
}

// RequestsEnded is told that the client's side ended. It sends on the bytes held of an
// incomplete request, unjudged, unless the connection is over.
func (s *Session) RequestsEnded(send func([]byte) error) {
	st := &s.up
	if !st.closed && !s.over.Load() && len(st.buf) > 0 {
		send(st.buf)
	}
	st.buf = nil
	st.closed = true
}

// Replies judges bytes from the server and sends on those that may reach the client:
// replies pass unless a cut is armed for them, when they are held until the server
// proves or refutes the commit. It returns false once the connection must end: a cut
// (the proof and everything after it never reach the client) or a send that failed.
// The relay then closes the client's side and calls Replies no more.
func (s *Session) Replies(b []byte, send func([]byte) error) bool {
	st := &s.down
	if st.closed {
		return false
	}
	data, owned := unbuffer(&st.buf, b)
	out := &sender{fn: send}
	// data[fwd:off] is consumed and neither forwarded nor added to held yet.
	off, fwd := 0, 0
	for off < len(data) {
		n, v := s.conn.Reply(data[off:])
		if n <= 0 {
			break
		}
		if n > len(data)-off {
			n = len(data) - off
			v = Verdict{}
		}
		if v.Pending != nil && !s.resolve(v.Pending) {
			// Not armed on this connection (a protocol bug): never cut on it.
			v = Verdict{Action: Release}
		}
		if v.Action == Cut && v.Pending == nil {
			v.Action = Release
		}
		switch v.Action {
		case Hold:
			if !st.holding {
				out.send(data[fwd:off])
				fwd = off
				st.holding = true
			}
		case Release:
			// The reservation is returned before the reply goes out: a client that
			// sends its next commit as soon as it reads this reply must find the fault
			// armed again (a reply sent first let that commit through unfaulted).
			if v.Pending != nil {
				v.Pending.knob.untake()
			}
			if st.holding {
				st.held = append(st.held, data[fwd:off+n]...)
				out.send(st.held)
				st.held = nil
				st.holding = false
			} else {
				out.send(data[fwd : off+n])
			}
			fwd = off + n
		case Substitute, Replace:
			if !st.holding {
				out.send(data[fwd:off])
			}
			st.held, st.holding = nil, false
			if v.Pending != nil {
				if v.Action == Substitute {
					v.Pending.knob.fired.Add(1)
					s.c.emit(s, CommitCut, v.Pending.point, v)
				} else {
					v.Pending.knob.untake()
				}
			}
			out.send(v.Send)
			fwd = off + n
		case Cut:
			if !st.holding {
				out.send(data[fwd:off])
			}
			st.held = nil
			v.Pending.knob.fired.Add(1)
			s.c.emit(s, CommitCut, v.Pending.point, v)
			st.closed = true
			s.end()
			return false
		}
		off += n
	}
	if st.holding {
		st.held = append(st.held, data[fwd:off]...)
	} else {
		out.send(data[fwd:off])
	}
	if off < len(data) {
		st.buf = keep(data[off:], owned)
	}
	if out.failed {
		st.closed = true
		s.end()
		return false
	}
	return true
}

// RepliesEnded is told that the server's side ended. Whatever is held or incomplete is
// all the server said: it is sent on, unless a cut ended the connection, and the
// connection is over.
func (s *Session) RepliesEnded(send func([]byte) error) {
	st := &s.down
	if !st.closed {
		if rest := append(st.held, st.buf...); len(rest) > 0 {
			send(rest)
		}
	}
	st.held, st.buf = nil, nil
	st.holding, st.closed = false, true
	s.end()
}
