package mongo

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// relay is a byte pipe between the driver and the real server, framed by MongoDB wire
// message, that can break the next command of any connection in one of three ways. It
// lets the classification test provoke, against the real server, the failures the
// proxy of package faults produces, without depending on it.
type relay struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	fault fault
	fired chan struct{}
	conns []net.Conn
}

type fault uint8

const (
	pass      fault = iota
	cutReply        // forward the command, drop its reply and close the connection
	dropCmd         // close the connection instead of forwarding the command
	holdReply       // forward the command, never forward its reply (until the relay closes)
)

func newRelay(t *testing.T, upstream string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln, upstream: upstream}
	go r.serve()
	t.Cleanup(r.close)
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// arm makes the next command (not a hello) on any connection meet f; the returned channel
// is closed when it has: when the command was dropped, or when the server's reply to it
// arrived and was cut or held.
func (r *relay) arm(f fault) <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = f
	r.fired = make(chan struct{})
	return r.fired
}

// take returns the armed fault and disarms it, if msg is a command.
func (r *relay) take(msg []byte) (fault, chan struct{}) {
	if !carriesCommand(msg) {
		return pass, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ch := r.fault, r.fired
	r.fault = pass
	return f, ch
}

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

func (r *relay) serve() {
	for {
		down, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.upstream)
		if err != nil {
			down.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, down, up)
		r.mu.Unlock()
		go r.pipe(down, up)
	}
}

// pipe forwards one connection. Requests and replies alternate on a connection the
// driver uses (no exhaust or moreToCome here), so the fault decided on a request applies
// to the reply that follows it.
func (r *relay) pipe(down, up net.Conn) {
	defer down.Close()
	defer up.Close()
	type armed struct {
		f     fault
		fired chan struct{}
	}
	replyFault := make(chan armed, 1)
	go func() {
		defer down.Close()
		defer up.Close()
		for {
			msg, err := readMessage(up)
			if err != nil {
				return
			}
			select {
			case a := <-replyFault:
				// The reply proves the server has run the command: only now is the
				// fault complete.
				close(a.fired)
				switch a.f {
				case cutReply:
					return
				case holdReply:
					// Swallow this and every later reply, keeping the connection open.
					_, _ = io.Copy(io.Discard, up)
					return
				}
			default:
			}
			if _, err := down.Write(msg); err != nil {
				return
			}
		}
	}()
	for {
		msg, err := readMessage(down)
		if err != nil {
			return
		}
		f, fired := r.take(msg)
		if f == dropCmd {
			close(fired)
			return
		}
		if f != pass {
			replyFault <- armed{f, fired}
		}
		if _, err := up.Write(msg); err != nil {
			return
		}
	}
}

// readMessage reads one wire message: a little-endian int32 length that counts itself.
func readMessage(c net.Conn) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n < 16 || n > 48<<20 {
		return nil, errors.New("bad message length")
	}
	msg := make([]byte, n)
	copy(msg, hdr[:])
	if _, err := io.ReadFull(c, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}
