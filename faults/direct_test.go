package faults

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// serveEach accepts connections on a loopback port until the test ends, and runs
// serve on each in a goroutine of its own, closing it after; it returns the address.
func serveEach(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// stampServer writes to each connection, until it fails, the time since epoch in
// nanoseconds as 8 bytes, every 100 µs: a stream whose every record says when it left
// the server.
func stampServer(t *testing.T, epoch time.Time) string {
	return serveEach(t, func(c net.Conn) {
		var b [8]byte
		for {
			binary.BigEndian.PutUint64(b[:], uint64(time.Since(epoch)))
			if _, err := c.Write(b[:]); err != nil {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
}

// TestToxicActsOnEveryByteAfterItsAddition: connections on the direct path while
// records stream from the server; once AddToxic has returned, every record the server
// sent after that arrives at least the toxic's latency after it was sent, on every
// open connection, as on toxiproxy's own links. A run records what it holds, so a
// window recorded from AddToxic's return is one in which the toxic certainly acted.
func TestToxicActsOnEveryByteAfterItsAddition(t *testing.T) {
	epoch := time.Now()
	px, err := Start(Options{Upstream: stampServer(t, epoch)})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	const delay = 100 * time.Millisecond
	type record struct{ sent, got time.Duration }
	const conns = 8
	got := make([][]record, conns)
	var wg sync.WaitGroup
	var clients []net.Conn
	for i := range conns {
		c, err := net.Dial("tcp", px.Addr())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [8]byte
			for {
				if _, err := io.ReadFull(c, b[:]); err != nil {
					return
				}
				got[i] = append(got[i], record{time.Duration(binary.BigEndian.Uint64(b[:])), time.Since(epoch)})
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := px.AddToxic(Toxic{Name: "slow", Type: "latency", Attributes: map[string]int64{"latency": delay.Milliseconds()}}); err != nil {
		t.Fatal(err)
	}
	added := time.Since(epoch)
	time.Sleep(3 * delay)
	for _, c := range clients {
		c.Close()
	}
	wg.Wait()
	for i, rs := range got {
		after := 0
		for _, r := range rs {
			if r.sent <= added {
				continue
			}
			after++
			if r.got-r.sent < delay {
				t.Errorf("connection %d: a record sent %v after the toxic was added arrived %v after it was sent, under a %v latency",
					i, r.sent-added, r.got-r.sent, delay)
				break
			}
		}
		if after == 0 {
			t.Errorf("connection %d: no record sent after the toxic was added arrived (%d in all)", i, len(rs))
		}
	}
}

// floodServer writes 64 KiB blocks to each connection until the write fails. The
// first write that has waited a second says that the buffers between the server and
// a client that reads nothing are full: stuck is closed then, and that connection is
// left open, unwritten, until the test ends.
func floodServer(t *testing.T, stuck chan struct{}) string {
	var once sync.Once
	return serveEach(t, func(c net.Conn) {
		b := make([]byte, 64<<10)
		for {
			c.SetWriteDeadline(time.Now().Add(time.Second))
			_, err := c.Write(b)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				once.Do(func() { close(stuck) })
				io.Copy(io.Discard, c)
				return
			}
			if err != nil {
				return
			}
		}
	})
}

// TestToxicAdditionDoesNotWaitForeverOnAStuckDirection: a direct connection whose
// client reads nothing, so that its direction from the server is blocked writing
// once the sockets' buffers are full. Adding a toxic returns all the same (that
// direction moves once its write completes), and the proxy goes on: a new connection
// reads what the server sends.
func TestToxicAdditionDoesNotWaitForeverOnAStuckDirection(t *testing.T) {
	stuck := make(chan struct{})
	px, err := Start(Options{Upstream: floodServer(t, stuck)})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	c0, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	select {
	case <-stuck:
	case <-time.After(time.Minute):
		t.Fatal("the server's writes to a client that reads nothing never blocked")
	}
	done := make(chan error, 1)
	go func() {
		done <- px.AddToxic(Toxic{Name: "slow", Type: "latency", Attributes: map[string]int64{"latency": 10}})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("AddToxic has not returned after a minute beside a client that reads nothing")
	}
	c, err := net.Dial("tcp", px.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Errorf("a new connection after the toxic: %v, want what the server sends", err)
	}
	// Read until the toxic is removed, and closed after: toxiproxy v2.12.0's removal
	// waits for every link that holds the toxic, and a link whose writer is blocked on
	// a client that stopped reading, or is ending because its client closed, can hold
	// it forever (toxiproxy issue 558).
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, c); close(drained) }()
	if err := px.RemoveToxic("slow"); err != nil {
		t.Error(err)
	}
	c.Close()
	<-drained
}
