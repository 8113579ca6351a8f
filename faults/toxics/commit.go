package toxics

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	tp "github.com/Shopify/toxiproxy/v2/toxics"
)

// Protocol teaches the commit toxics one wire protocol. An implementation provides a
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
// from the upstream toxic's goroutine and Reply from the downstream one's, so each
// direction's framing state needs no lock; state the two directions share (which
// request a reply answers, the transaction status the replies report) must be guarded
// by the implementation.
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
}

// Action is what the downstream toxic does with the bytes a Reply consumed.
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
)

// Verdict is a protocol's judgement of the bytes a Reply consumed.
type Verdict struct {
	// Action is what the downstream half does with the bytes.
	Action Action
	// Pending is the armed cut this verdict resolves (Cut, and Release when one ends).
	Pending *Pending
	// Tag is the reply that proved the commit (Cut): "COMMIT", "UPDATE 1".
	Tag string
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

// Commits is the shared side of one proxy's commit faults: the knobs, the pairing of the
// two directions of each connection, and the event sink. Install puts its two toxics on
// a proxy; arm and disarm the faults through Faults at any time.
type Commits struct {
	// Faults are the knobs; all start disarmed.
	Faults Faults

	cfg Config

	mu      sync.Mutex
	addr    string   // client address of the connection being set up
	next    uint64   // accept-order index of the next connection
	forDown *session // made by the upstream toxic, waiting for the downstream one
	streams uint64   // generators handed out so far
}

// NewCommits returns the commit faults for cfg, all disarmed.
func NewCommits(cfg Config) (*Commits, error) {
	if cfg.Protocol == nil {
		return nil, errors.New("commit faults: no protocol")
	}
	if ps, ok := cfg.Protocol.(proxyScoped); ok {
		cfg.Protocol = ps.forProxy()
	}
	return &Commits{cfg: cfg}, nil
}

// Names of the toxics in toxiproxy's registry and on a proxy.
const (
	// DropToxic is the upstream half. It sees the requests, finds commit points, makes
	// the one decision per point for both faults, drops commits and arms cuts.
	DropToxic = "commit_drop"
	// CutToxic is the downstream half. It sees the replies and carries out armed cuts
	// once the server proves the commit.
	CutToxic = "commit_cut"
)

var registerOnce sync.Once

// register adds the commit toxics to toxiproxy's registry, once per process, so that a
// proxy and its HTTP API know their type names.
func register() {
	registerOnce.Do(func() {
		tp.Register(DropToxic, new(dropHalf))
		tp.Register(CutToxic, new(cutHalf))
	})
}

// Install adds the two halves to a proxy's toxics. Call it before the proxy accepts its
// first connection and never remove them while it runs: the halves of one connection
// are paired by the order in which toxiproxy's accept loop creates their state, which
// holds only for toxics present when the connection is accepted. Arm and disarm through
// c.Faults instead. Call Accepted for every accepted client, before its links start,
// to name it in events.
func (c *Commits) Install(tc *toxiproxy.ToxicCollection) error {
	register()
	for _, h := range []struct {
		typ, stream string
	}{{DropToxic, "upstream"}, {CutToxic, "downstream"}} {
		body, _ := json.Marshal(map[string]any{"name": h.typ, "type": h.typ, "stream": h.stream, "toxicity": 1})
		w, err := tc.AddToxicJson(bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("install %s toxic: %w", h.typ, err)
		}
		switch t := w.Toxic.(type) {
		case *dropHalf:
			t.commits = c
		case *cutHalf:
			t.commits = c
		}
	}
	return nil
}

// Accepted names the connection whose links toxiproxy starts next: addr is the
// client's address as the proxy sees it. faults.Proxy calls it from toxiproxy's accept
// loop; a connection without it is named "".
func (c *Commits) Accepted(addr string) {
	c.mu.Lock()
	c.addr = addr
	c.mu.Unlock()
}

// Rejected forgets the connection Accepted named, when toxiproxy could not dial the
// upstream and starts no links for it.
func (c *Commits) Rejected() {
	c.mu.Lock()
	c.addr = ""
	c.mu.Unlock()
}

// session is one proxied connection as both halves see it.
type session struct {
	index uint64
	addr  string
	conn  Conn
	rng   *rand.Rand // upstream goroutine only: all decisions are made there; nil
	//                  until the connection's first commit point

	mu    sync.Mutex
	armed []*Pending // cuts accepted by the protocol and not resolved yet
	// over: the downstream half has ended; decide and forward nothing more. Set under
	// mu (arm reads it there, so no cut is armed after end), read alone by the
	// upstream half on every chunk.
	over atomic.Bool
}

func (s *session) arm(p *Pending) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over.Load() {
		return false
	}
	s.armed = append(s.armed, p)
	return true
}

// resolve forgets an armed cut that fired or ended; false if it was not armed.
func (s *session) resolve(p *Pending) bool {
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
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.over.Store(true)
	for _, p := range s.armed {
		p.knob.untake()
	}
	s.armed = nil
}

func (s *session) isOver() bool { return s.over.Load() }

// upSession creates the session of the connection being set up. toxiproxy's accept
// loop creates the upstream link's state before the downstream one's, in one
// goroutine, so the downstream half takes the session made last.
func (c *Commits) upSession() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &session{
		index: c.next,
		addr:  c.addr,
		conn:  c.cfg.Protocol.NewConn(),
	}
	c.next++
	c.addr = ""
	c.forDown = s
	return s
}

func (c *Commits) downSession() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.forDown
	c.forDown = nil
	if s == nil {
		// Not paired (a half added to a running proxy): it still frames, and never
		// sees an armed cut.
		s = &session{conn: c.cfg.Protocol.NewConn()}
	}
	return s
}

func (c *Commits) emit(s *session, k Kind, p Point, tag string) {
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
		Protocol:  c.cfg.Protocol.Name(),
		Kind:      k,
		Truth:     t,
		Statement: shorten(p.Statement, 256),
		Tag:       tag,
	})
}

// decide makes the one decision of a commit point.
func (c *Commits) decide(s *session, p *Point) (Kind, *Knob) {
	if c.cfg.Match != nil {
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
	// Roll even when nothing is armed, so that the draws stay aligned with the
	// commit points whatever the schedule did.
	u := s.rng.Float64()
	return c.Faults.choose(u, func() bool { return s.rng.IntN(2) == 0 })
}

// dropHalf is the upstream (client to server) commit toxic; see DropToxic. Only its
// instances installed by Commits.Install act: added through the HTTP API it passes
// bytes through untouched, since it has no Commits to report to.
type dropHalf struct {
	commits *Commits
}

// cutHalf is the downstream (server to client) commit toxic; see CutToxic and dropHalf.
type cutHalf struct {
	commits *Commits
}

type upState struct {
	s      *session
	buf    []byte // an incomplete request, owned here (never shared with a sent chunk)
	closed bool
}

type downState struct {
	s       *session
	buf     []byte // an incomplete reply, owned here
	held    []byte // replies held back
	holding bool
	closed  bool
}

// NewState implements toxiproxy's StatefulToxic.
func (t *dropHalf) NewState() any {
	if t.commits == nil {
		return nil
	}
	return &upState{s: t.commits.upSession()}
}

// NewState implements toxiproxy's StatefulToxic.
func (t *cutHalf) NewState() any {
	if t.commits == nil {
		return nil
	}
	return &downState{s: t.commits.downSession()}
}

// Pipe implements toxiproxy's Toxic. All framing state lives in stub.State, so an
// interrupt (toxiproxy restarts Pipe whenever a toxic is added or removed) resumes
// mid-message.
func (t *dropHalf) Pipe(stub *tp.ToxicStub) {
	st, ok := stub.State.(*upState)
	if !ok || t.commits == nil {
		new(tp.NoopToxic).Pipe(stub)
		return
	}
	pipe(stub, &st.closed, func() { st.flush(stub) }, func(c *stream.StreamChunk) { t.commits.upstream(st, stub, c) })
}

// pipe is the loop of both halves' Pipe: each chunk goes to judge until toxiproxy
// interrupts or the link ends, when ended runs and the half closes. Once the half has
// closed its side (*closed), chunks are drained unjudged until the link ends, or its
// reader would block forever.
func pipe(stub *tp.ToxicStub, closed *bool, ended func(), judge func(*stream.StreamChunk)) {
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				ended()
				stub.Close()
				return
			}
			if !*closed {
				judge(c)
			}
		}
	}
}

// flush sends on the bytes held of an incomplete request, unjudged, unless the client's
// side was closed.
func (st *upState) flush(stub *tp.ToxicStub) {
	if !st.closed && len(st.buf) > 0 {
		stub.Output <- &stream.StreamChunk{Data: st.buf, Timestamp: time.Now()}
		st.buf = nil
	}
}

// Cleanup implements toxiproxy's CleanupToxic: when the toxic is removed, bytes it
// holds go on unjudged.
func (t *dropHalf) Cleanup(stub *tp.ToxicStub) {
	if st, ok := stub.State.(*upState); ok {
		st.flush(stub)
	}
}

// unbuffer returns the incomplete bytes kept in *buf followed by data, and empties *buf.
func unbuffer(buf *[]byte, data []byte) []byte {
	if len(*buf) > 0 {
		data = append(*buf, data...)
		*buf = nil
	}
	return data
}

// sender forwards the pieces of one chunk, stamped with the chunk's time.
type sender struct {
	stub *tp.ToxicStub
	ch   *stream.StreamChunk
}

// send forwards a piece of the chunk, if not empty. Each piece is capped at its end, so
// that no reader's append can reach the bytes after it, which may be kept as the next
// incomplete message.
func (s sender) send(b []byte) {
	if len(b) > 0 {
		s.stub.Output <- &stream.StreamChunk{Data: b[:len(b):len(b)], Timestamp: s.ch.Timestamp}
	}
}

// sendAll forwards data, all of the bytes judged, and keeps nothing back. When data is
// the chunk's own bytes, as it is unless an incomplete message was kept from the chunk
// before, the chunk itself goes on: toxiproxy's reader made them for this chunk alone,
// and passing it saves an allocation per chunk in each direction.
func (s sender) sendAll(data []byte) {
	if len(data) > 0 && len(data) == len(s.ch.Data) && &data[0] == &s.ch.Data[0] {
		s.stub.Output <- s.ch
		return
	}
	s.send(data)
}

func (c *Commits) upstream(st *upState, stub *tp.ToxicStub, ch *stream.StreamChunk) {
	if st.s.isOver() {
		// A cut closed the client's side: whatever it pipelined after the commit
		// must not reach the server, or it would apply with no fault recorded.
		st.closed = true
		st.buf = nil
		stub.Close()
		return
	}
	data := unbuffer(&st.buf, ch.Data)
	out := sender{stub, ch}
	off := 0
	for off < len(data) {
		n, p := st.s.conn.Request(data[off:])
		if n <= 0 {
			break
		}
		if n > len(data)-off {
			n = len(data) - off
			p = nil
		}
		if p != nil {
			switch kind, knob := c.decide(st.s, p); kind {
			case CommitDrop:
				out.send(data[:off])
				knob.fired.Add(1)
				c.emit(st.s, CommitDrop, *p, "")
				st.closed = true
				stub.Close()
				return
			case CommitCut:
				pd := &Pending{knob: knob, point: *p}
				if !st.s.arm(pd) {
					knob.untake()
				} else if !st.s.conn.ExpectCut(pd) {
					st.s.resolve(pd)
					knob.untake()
				}
			}
		}
		off += n
	}
	if off == len(data) {
		out.sendAll(data)
		return
	}
	out.send(data[:off])
	// Sent chunks end at off and are capped there: appending to the rest can never
	// write into them.
	st.buf = data[off:]
}

// Pipe implements toxiproxy's Toxic; see dropHalf.Pipe.
func (t *cutHalf) Pipe(stub *tp.ToxicStub) {
	st, ok := stub.State.(*downState)
	if !ok || t.commits == nil {
		new(tp.NoopToxic).Pipe(stub)
		return
	}
	pipe(stub, &st.closed, func() {
		// The server ended the connection: whatever is held or incomplete is all it
		// said.
		st.flush(stub)
		st.s.end()
	}, func(c *stream.StreamChunk) { t.commits.downstream(st, stub, c) })
}

// flush sends on the replies held back and the bytes of an incomplete one, unless the
// side was closed.
func (st *downState) flush(stub *tp.ToxicStub) {
	if st.closed {
		return
	}
	if rest := append(st.held, st.buf...); len(rest) > 0 {
		stub.Output <- &stream.StreamChunk{Data: rest, Timestamp: time.Now()}
	}
	st.held, st.buf = nil, nil
}

// Cleanup implements toxiproxy's CleanupToxic; see dropHalf.Cleanup.
func (t *cutHalf) Cleanup(stub *tp.ToxicStub) {
	if st, ok := stub.State.(*downState); ok && !st.closed {
		st.flush(stub)
		st.holding = false
	}
}

func (c *Commits) downstream(st *downState, stub *tp.ToxicStub, ch *stream.StreamChunk) {
	data := unbuffer(&st.buf, ch.Data)
	out := sender{stub, ch}
	// data[fwd:off] is consumed and neither forwarded nor added to held yet.
	off, fwd := 0, 0
	for off < len(data) {
		n, v := st.s.conn.Reply(data[off:])
		if n <= 0 {
			break
		}
		if n > len(data)-off {
			n = len(data) - off
			v = Verdict{}
		}
		if v.Pending != nil && !st.s.resolve(v.Pending) {
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
			if st.holding {
				st.held = append(st.held, data[fwd:off+n]...)
				out.send(st.held)
				st.held = nil
				st.holding = false
			} else {
				out.send(data[fwd : off+n])
			}
			fwd = off + n
			if v.Pending != nil {
				v.Pending.knob.untake()
			}
		case Cut:
			if !st.holding {
				out.send(data[fwd:off])
			}
			st.held = nil
			v.Pending.knob.fired.Add(1)
			c.emit(st.s, CommitCut, v.Pending.point, v.Tag)
			st.closed = true
			st.s.end()
			stub.Close()
			return
		}
		off += n
	}
	switch {
	case st.holding:
		st.held = append(st.held, data[fwd:off]...)
	case fwd == 0 && off == len(data):
		out.sendAll(data)
	default:
		out.send(data[fwd:off])
	}
	if off < len(data) {
		st.buf = data[off:]
	}
}
