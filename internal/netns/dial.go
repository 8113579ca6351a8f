package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DialTimeout bounds a connect through DialFrom: a SYN a grudge drops is never
// answered, and the kernel would retry it for two minutes.
const DialTimeout = 2 * time.Second

// UserTimeout is the TCP_USER_TIMEOUT of the connections DialFrom makes: data a
// grudge keeps from being acknowledged for that long ends the connection with an
// error, as a client library's read timeout would, instead of leaving the operation
// waiting for the heal. A server that is only slow to answer (a synchronous commit
// waiting for its standby) is not affected: its side acknowledged the request.
const UserTimeout = 3 * time.Second

// DialFrom returns a dial function (the shape of pgx's DialFunc and go-redis's
// Dialer) that dials from local address ip, one of the harness's on a Network
// (Node.Client, Network.Admin), with DialTimeout and UserTimeout. A dial after the
// network is closed fails at bind: the address is gone, so nothing can leave the
// machine by another route.
func DialFrom(ip net.IP) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{
		LocalAddr: &net.TCPAddr{IP: ip},
		Timeout:   DialTimeout,
		Control: func(network, address string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(UserTimeout/time.Millisecond))
			})
			return errors.Join(err, serr)
		},
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch network {
		case "tcp", "tcp4":
		default:
			return nil, fmt.Errorf("netns: dial %s %s: only TCP over IPv4 is on the network", network, addr)
		}
		return d.DialContext(ctx, "tcp4", addr)
	}
}

// Relay accepts TCP connections on a loopback port and joins each to a connection it
// dials to one address from another (DialFrom): what puts a link proxy's upstream
// on the address that stands for its link in a grudge, since toxiproxy dials with
// the kernel's choice of source. Close stops it and closes every connection.
type Relay struct {
	ln   net.Listener
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	to   string

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Relay starts a relay on 127.0.0.1 to address to, dialling from ip. The network
// closes it on Close.
func (nw *Network) Relay(from net.IP, to string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("netns: relay: %w", err)
	}
	r := &Relay{ln: ln, dial: DialFrom(from), to: to, conns: map[net.Conn]struct{}{}}
	nw.mu.Lock()
	if nw.closed {
		nw.mu.Unlock()
		ln.Close()
		return nil, errors.New("netns: network closed")
	}
	nw.relays = append(nw.relays, r)
	nw.mu.Unlock()
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

// Addr is the relay's loopback address.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

func (r *Relay) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.join(c)
		}()
	}
}

// track adds c to the open connections, or closes it when the relay is closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	c.Close()
}

// join copies both ways between c and a new upstream connection; when either side
// ends, both are closed, as a cut link would be.
func (r *Relay) join(c net.Conn) {
	if !r.track(c) {
		return
	}
	defer r.untrack(c)
	ctx, cancel := context.WithTimeout(context.Background(), DialTimeout)
	up, err := r.dial(ctx, "tcp", r.to)
	cancel()
	if err != nil {
		return
	}
	if !r.track(up) {
		return
	}
	defer r.untrack(up)
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go cp(up, c)
	go cp(c, up)
	<-done
}

// Close stops accepting, closes every connection and waits for the copies to end.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	err := r.ln.Close()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}
