package faults

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	tp "github.com/Shopify/toxiproxy/v2/toxics"
)

// The direct path: a connection relayed without toxiproxy's links.
//
// A toxiproxy link moves every chunk through a chain of goroutines joined by channels
// (a reader, a stub per toxic, a writer): three hand-offs per chunk and direction even
// with no toxic on the chain, which on loopback costs more CPU than the database's
// answer. While the proxy has no standard toxic (latency, bandwidth, ...), nothing on
// that chain would act, so a connection goes direct instead: one goroutine per
// direction reads from one socket and writes to the other. Without a protocol it is
// io.Copy between the two TCP connections, which Linux splices; with one, every chunk
// passes through the connection's commit Session on its way, in the same goroutine, so
// the commit faults judge every byte as they do on a link.
//
// The rule: a connection starts direct when the proxy has no standard toxic as it is
// accepted, and on a toxiproxy link otherwise. When a standard toxic is added, every
// direct connection moves to a link, for good, so that the toxic takes effect on open
// connections as toxiproxy's do: each direction's goroutine is woken by a read deadline
// in the past, between two reads, and starts that direction's link with the same
// Session (see startLink). The Session keeps what it holds (an incomplete message, the
// replies held for an armed cut), so its parser is never skipped nor restarted mid-
// stream: the bytes a direction read were all judged and written before it moves. A
// connection never moves back; those accepted after the last standard toxic is removed
// start direct again.
//
// Adding the toxic returns once every direct direction has moved (or ended), so that,
// as with toxiproxy's own links, every byte read after it returns goes through the
// toxic: a direction woken by the deadline may still have had one read under way that
// returned bytes which arrived after the deadline was set, and those are relayed
// direct before it moves. A direction blocked writing to a peer that does not read
// moves only once its write completes; the add waits for such a one at most
// moveWait.

// directBuf is the read buffer of a direct direction with a protocol: toxiproxy's link
// reads 32 KiB at a time too.
const directBuf = 32 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, directBuf); return &b }}

// pastDeadline wakes a read at once.
var pastDeadline = time.Unix(1, 0)

// hasToxics reports whether the proxy has a standard toxic on its chain.
func (p *Proxy) hasToxics() bool {
	for _, t := range p.px.Toxics.GetToxicArray() {
		if w, ok := t.(*tp.ToxicWrapper); !ok || w.Type != endType {
			return true
		}
	}
	return false
}

// moveWait bounds how long a toxic's addition waits for the direct directions to move.
const moveWait = time.Second

// syncPaths applies the rule after the proxy's toxics changed: with a standard toxic,
// new connections take links and direct ones move to links. It returns once those
// have moved, or after moveWait.
func (p *Proxy) syncPaths() {
	linked := p.hasToxics()
	var moving []*conn
	p.mu.Lock()
	p.linked = linked
	if linked {
		for c := range p.conns {
			if c.direct {
				c.direct = false
				c.move()
				moving = append(moving, c)
			}
		}
	}
	p.mu.Unlock()
	if len(moving) == 0 {
		return
	}
	moved := make(chan struct{})
	go func() {
		for _, c := range moving {
			c.pumping.Wait()
		}
		close(moved)
	}()
	t := time.NewTimer(moveWait)
	defer t.Stop()
	select {
	case <-moved:
	case <-t.C:
	}
}

// move asks both directions of a direct connection to move to links.
func (c *conn) move() {
	c.moving.Store(true)
	c.client.SetReadDeadline(pastDeadline)
	c.server.SetReadDeadline(pastDeadline)
}

// relayDirect starts both directions of c on the direct path; p.pumps counts them
// already.
func (p *Proxy) relayDirect(c *conn) {
	go c.pump(stream.Upstream, c.client, c.server)
	go c.pump(stream.Downstream, c.server, c.client)
}

// pump relays one direction from src to dst until src ends, a fault ends it, or it
// moves to a link.
func (c *conn) pump(dir stream.Direction, src, dst *net.TCPConn) {
	defer c.p.pumps.Done()
	// After the link has started: syncPaths waits for it.
	defer c.pumping.Done()
	var err error
	if c.s == nil {
		_, err = io.Copy(dst, src)
	} else {
		err = c.judge(dir, src, dst)
	}
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && c.moving.Load() {
		src.SetReadDeadline(time.Time{})
		c.p.startLink(c, dir)
		return
	}
	// The source ended (or the Session ended the direction): as a toxiproxy link
	// does, close the destination; the other direction then ends on its read.
	dst.Close()
	c.directionEnded()
}

// errEnded reports that the Session ended the direction: a commit fault, or a write
// that failed.
var errEnded = errors.New("ended by the commit faults")

// judge relays one direction through the connection's Session. It returns the read's
// error when the source ended or a deadline woke it, errEnded when the Session ended
// the direction.
func (c *conn) judge(dir stream.Direction, src, dst *net.TCPConn) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	send := func(b []byte) error {
		_, err := dst.Write(b)
		return err
	}
	pass := c.s.Replies
	if dir == stream.Upstream {
		pass = c.s.Requests
	}
	for {
		n, err := src.Read(buf)
		if n > 0 && !pass(buf[:n], send) {
			return errEnded
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) || !c.moving.Load() {
			if dir == stream.Upstream {
				c.s.RequestsEnded(send)
			} else {
				c.s.RepliesEnded(send)
			}
		}
		return err
	}
}
