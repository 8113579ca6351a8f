package faults

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	tp "github.com/Shopify/toxiproxy/v2/toxics"

	"github.com/indoubt/indoubt/faults/toxics"
)

// How a connection goes through the proxy.
//
// toxiproxy's own accept loop (proxy.go in v2.12.0, Proxy.server) accepts a client,
// dials the upstream and calls ToxicCollection.StartLink once per direction; the only
// place it names the client is its log line. The Proxy runs that loop itself instead:
// it accepts, opens the connection's commit Session with the client's address taken
// from the accepted socket, dials, and calls the same exported StartLink for both
// directions. toxiproxy's Proxy value stays registered in the API's collection, never
// started, and holds the chain of toxics that StartLink builds each link from, so the
// API's toxics apply to the links as before.
//
// Each chain starts with a link end, a toxic of indoubt's own, one per direction,
// installed before any link exists and never removed. It carries the state of its
// connection: the commit Session (judging the bytes that pass, when there is a
// protocol) and the relay's record of the connection (so that a partition can close it
// and the proxy forgets it when both directions have ended). toxiproxy's NewState takes
// no argument, so the state is handed over: startLinks puts it in Proxy.handoff and
// calls StartLink, which calls each stateful toxic's NewState in the calling goroutine,
// under the collection's lock, before it returns (link.go, ToxicLink.Start). linkMu
// serialises the starts, so each link end takes the state made for its own link, and
// the two directions of a connection share the Session made for that connection: no
// pairing by order, no log.

// endType is the toxiproxy type of the link ends; endNames are their names on the chain.
const endType = "indoubt_link_end"

var endNames = [...]string{stream.Upstream: "indoubt_requests", stream.Downstream: "indoubt_replies"}

func isEndName(name string) bool { return name == endNames[0] || name == endNames[1] }

var registerEnd sync.Once

// installEnds puts a link end at the head of each direction's chain.
func (p *Proxy) installEnds() error {
	registerEnd.Do(func() { tp.Register(endType, new(linkEnd)) })
	for dir, name := range endNames {
		body, _ := json.Marshal(map[string]any{"name": name, "type": endType, "stream": stream.Direction(dir).String(), "toxicity": 1})
		w, err := p.px.Toxics.AddToxicJson(bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("install %s: %w", name, err)
		}
		w.Toxic.(*linkEnd).p = p
	}
	return nil
}

// dialTimeout bounds the dial of the upstream for one client.
const dialTimeout = 30 * time.Second

// serve starts accepting on ln. Call with p.mu held.
func (p *Proxy) serve(ln net.Listener) {
	p.ln = ln
	p.accepted = make(chan struct{})
	go p.accept(ln, p.accepted)
}

// stop closes the listener, waits for its accept loop to return and closes every
// connection. Call with p.mu held.
func (p *Proxy) stop() {
	if p.ln == nil {
		return
	}
	p.ln.Close()
	<-p.accepted
	p.ln = nil
	for c := range p.conns {
		c.close()
	}
	clear(p.conns)
}

func (p *Proxy) accept(ln net.Listener, done chan struct{}) {
	defer close(done)
	var pause time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of descriptors, most likely: wait, as net/http does, and go on.
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		client := c.(*net.TCPConn)
		var s *toxics.Session
		if p.commits != nil {
			// Opened in accept order, which numbers the events' ConnIndex.
			s = p.commits.Open(client.RemoteAddr().String())
		}
		go p.connect(ln, client, s)
	}
}

// connect dials the upstream for a client accepted on ln and starts its links. A
// client whose upstream cannot be dialled is closed, as toxiproxy does.
func (p *Proxy) connect(ln net.Listener, client *net.TCPConn, s *toxics.Session) {
	d := net.Dialer{Timeout: dialTimeout}
	up, err := d.DialContext(p.ctx, "tcp", p.upstream)
	if err != nil {
		client.Close()
		return
	}
	c := &conn{p: p, client: client, server: up.(*net.TCPConn), s: s}
	c.name = client.RemoteAddr().String()
	p.mu.Lock()
	if p.ln != ln {
		// Disabled or closed while dialling.
		p.mu.Unlock()
		c.close()
		return
	}
	p.conns[c] = struct{}{}
	direct := !p.linked
	c.direct = direct
	if direct {
		// Counted under p.mu, so that Close, which stops the proxy under it, waits
		// for them.
		p.pumps.Add(2)
		c.pumping.Add(2)
	}
	p.mu.Unlock()
	if direct {
		p.relayDirect(c)
		return
	}
	p.startLink(c, stream.Upstream)
	p.startLink(c, stream.Downstream)
}

// conn is one proxied connection.
type conn struct {
	p              *Proxy
	name           string // the client's address
	client, server *net.TCPConn
	s              *toxics.Session // nil without a protocol
	ended          atomic.Int32    // directions whose source has ended
	direct         bool            // on the direct path (direct.go); guarded by p.mu
	moving         atomic.Bool     // asked to move from the direct path to links
	pumping        sync.WaitGroup  // its direct directions, until each has moved or ended
}

func (c *conn) close() {
	c.client.Close()
	c.server.Close()
}

// directionEnded records that one direction's source ended; after both, the proxy
// forgets the connection (toxiproxy's links close its sockets).
func (c *conn) directionEnded() {
	if c.ended.Add(1) == 2 {
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}
}

// startLink starts toxiproxy's link of one direction of c, with its link end holding
// c's state; see the comment at the top of this file.
func (p *Proxy) startLink(c *conn, dir stream.Direction) {
	src, dst := c.client, c.server
	if dir == stream.Downstream {
		src, dst = c.server, c.client
	}
	p.linkMu.Lock()
	defer p.linkMu.Unlock()
	p.handoff = &endState{c: c, dir: dir}
	p.px.Toxics.StartLink(p.srv, c.name+" "+dir.String(), src, dst, dir)
	if p.handoff != nil {
		// No link end took the state: the chain lost its head, which nothing
		// removes. Never relay a connection the proxy cannot track.
		p.handoff = nil
		c.close()
	}
}

// linkEnd is the toxic at the head of each chain; see the top of this file. Added to
// any other proxy (its type is in toxiproxy's registry, which is global), it passes
// everything through.
type linkEnd struct {
	p *Proxy
}

// endState is a link end's state on one link.
type endState struct {
	c      *conn
	dir    stream.Direction
	stub   *tp.ToxicStub
	ch     *stream.StreamChunk // the chunk being judged
	closed bool                // the Session ended this direction; drain until the link ends
}

// NewState implements toxiproxy's StatefulToxic: it takes the state startLinks made
// for the link being started.
func (t *linkEnd) NewState() any {
	if t.p == nil || t.p.handoff == nil {
		return nil
	}
	st := t.p.handoff
	t.p.handoff = nil
	return st
}

// Pipe implements toxiproxy's Toxic. Everything it knows lives in stub.State, so it
// resumes where it was when toxiproxy restarts it (on every toxic added or removed).
func (t *linkEnd) Pipe(stub *tp.ToxicStub) {
	st, ok := stub.State.(*endState)
	if !ok {
		new(tp.NoopToxic).Pipe(stub)
		return
	}
	st.stub = stub
	for {
		select {
		case <-stub.Interrupt:
			return
		case ch := <-stub.Input:
			if ch == nil {
				st.end()
				stub.Close()
				return
			}
			if st.closed {
				// The reader must not block: keep draining until the link ends.
				continue
			}
			st.ch = ch
			if !st.judge(ch.Data) {
				st.closed = true
				stub.Close()
			}
		}
	}
}

// judge passes one chunk through the connection's Session, or on as it is without one.
func (st *endState) judge(b []byte) bool {
	s := st.c.s
	switch {
	case s == nil:
		st.stub.Output <- st.ch
		return true
	case st.dir == stream.Upstream:
		return s.Requests(b, st.send)
	default:
		return s.Replies(b, st.send)
	}
}

// end tells the Session and the connection that this direction's source ended.
func (st *endState) end() {
	if s := st.c.s; s != nil {
		st.ch = &stream.StreamChunk{Timestamp: time.Now()}
		if st.dir == stream.Upstream {
			s.RequestsEnded(st.send)
		} else {
			s.RepliesEnded(st.send)
		}
	}
	st.c.directionEnded()
}

// send hands what the Session forwards to the next toxic. toxiproxy's reader made the
// chunk's bytes for that chunk alone, so a piece is passed on without a copy, and the
// whole chunk as it is.
func (st *endState) send(b []byte) error {
	if st.stub.Closed() {
		return net.ErrClosed
	}
	if len(b) == len(st.ch.Data) && &b[0] == &st.ch.Data[0] {
		st.stub.Output <- st.ch
		return nil
	}
	st.stub.Output <- &stream.StreamChunk{Data: b, Timestamp: st.ch.Timestamp}
	return nil
}
