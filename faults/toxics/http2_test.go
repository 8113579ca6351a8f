package toxics

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Writer builds one direction of an HTTP/2 connection with x/net's framer and HPACK
// encoder, so that the dynamic table carries from one header block to the next as on a
// real connection.
type h2Writer struct {
	buf bytes.Buffer
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
}

func newH2Writer() *h2Writer {
	w := &h2Writer{}
	w.fr = http2.NewFramer(&w.buf, nil)
	w.enc = hpack.NewEncoder(&w.hb)
	return w
}

// take returns the bytes written since the last take.
func (w *h2Writer) take() []byte {
	b := append([]byte(nil), w.buf.Bytes()...)
	w.buf.Reset()
	return b
}

// headers writes a header block on stream, split into a HEADERS frame and
// CONTINUATIONs of at most split bytes of block each (0: one frame).
func (w *h2Writer) headers(stream uint32, end bool, split int, kv ...string) {
	w.hb.Reset()
	for i := 0; i < len(kv); i += 2 {
		w.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	block := w.hb.Bytes()
	if split <= 0 || split >= len(block) {
		w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block, EndStream: end, EndHeaders: true})
		return
	}
	w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: stream, BlockFragment: block[:split], EndStream: end, PadLength: 3})
	for rest := block[split:]; len(rest) > 0; {
		n := min(split, len(rest))
		w.fr.WriteContinuation(stream, n == len(rest), rest[:n])
		rest = rest[n:]
	}
}

func (w *h2Writer) data(stream uint32, end bool, payload string) {
	w.fr.WriteData(stream, end, []byte(payload))
}

// h2Conversation is a connection with a gRPC-like call on stream 1, a read on stream 3
// and a second call on stream 5, each request with its response, plus the preface and
// settings in front (the hello).
func h2Conversation() (hello step, steps []step) {
	cli, srv := newH2Writer(), newH2Writer()
	cli.buf.WriteString(h2Preface)
	cli.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	srv.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100})
	srv.fr.WriteSettingsAck()
	cli.fr.WriteSettingsAck()
	hello = step{cli.take(), srv.take()}
	call := func(stream uint32, method, path, key string, split int) step {
		kv := []string{":method", method, ":scheme", "http", ":path", path, ":authority", "svc", "content-type", "application/grpc"}
		if key != "" {
			kv = append(kv, "idempotency-key", key)
		}
		cli.headers(stream, method == "GET", split, kv...)
		if method != "GET" {
			cli.data(stream, true, "\x00\x00\x00\x00\x03abc")
		}
		srv.headers(stream, false, 0, ":status", "200", "content-type", "application/grpc")
		srv.data(stream, false, "\x00\x00\x00\x00\x02ok")
		srv.headers(stream, true, 0, "grpc-status", "0")
		return step{cli.take(), srv.take()}
	}
	steps = []step{
		call(1, "POST", "/etcdserverpb.KV/Put", "key-1", 0),
		call(3, "GET", "/health", "", 0),
		call(5, "POST", "/etcdserverpb.KV/Txn", "key-2", 7),
	}
	return hello, steps
}

func h2Hello(hello step) func(*harness) ([]byte, []byte) {
	return func(h *harness) ([]byte, []byte) {
		hello.run(h)
		return hello.req, hello.rep
	}
}

func TestHTTP2Faults(t *testing.T) {
	hello, steps := h2Conversation()
	// The response starts with its HEADERS frame: the cut forwards none of it.
	run := faultRun{proto: HTTP2{CutConnection: true}, name: "http2", hello: h2Hello(hello)}
	runFaultCases(t, run, []faultCase{
		{"response-cut of the first call", func(f *Faults) { f.Cut.Set(1, 0) }, steps, 0, -1, 0, CommitCut, "POST /etcdserverpb.KV/Put", ":status 200 (grpc)"},
		{"request-drop of the first call", func(f *Faults) { f.Drop.Set(1, 0) }, steps, 0, 0, 0, CommitDrop, "POST /etcdserverpb.KV/Put", ""},
		{"pinned: the third stream, its header block in CONTINUATIONs", func(f *Faults) { f.Listed.Add(Pin{Kind: CommitCut, Conn: 0, Txn: 3}) }, steps, 2, -1, 0, CommitCut, "POST /etcdserverpb.KV/Txn", ":status 200 (grpc)"},
	})
	checkPassesDisarmed(t, HTTP2{}, []int{1, 7, 32 << 10}, h2Hello(hello), steps)
}

// TestHTTP2CutsOneStream: with three streams in flight on one connection, a cut of
// the second stream's response replaces its HEADERS with a RST_STREAM to the client and
// drops the rest of that stream; the other streams' frames pass untouched, the
// connection stays open, and on the client's next bytes the service gets a RST_STREAM
// (CANCEL) for the stream and the flow-control credit of the DATA dropped.
func TestHTTP2CutsOneStream(t *testing.T) {
	cli, srv := newH2Writer(), newH2Writer()
	cli.buf.WriteString(h2Preface)
	cli.fr.WriteSettings()
	for _, id := range []uint32{1, 3, 5} {
		cli.headers(id, false, 0, ":method", "POST", ":scheme", "http", ":path", fmt.Sprintf("/svc/M%d", id), ":authority", "x")
		cli.data(id, true, "req")
	}
	requests := cli.take()
	srv.fr.WriteSettings()
	for _, id := range []uint32{5, 3, 1} {
		// x-call's value is new in each block: the service's encoder indexes it, and
		// the next blocks refer to the table entries that makes.
		srv.headers(id, false, 0, ":status", "200", "content-type", "application/grpc", "x-call", fmt.Sprintf("M%d", id))
	}
	heads := srv.take()
	var bodies [][]byte
	for _, id := range []uint32{1, 3, 5} {
		srv.data(id, false, "\x00\x00\x00\x00\x05reply")
		srv.headers(id, true, 0, "grpc-status", "0")
		bodies = append(bodies, srv.take())
	}
	for _, max := range []int{1, 9, 32 << 10} {
		c, evs := newProtoCommits(t, HTTP2{}, 1, func(s string) bool { return s == "POST /svc/M3" })
		c.Faults.Cut.Set(1, 0)
		h := newHarness(t, c, uint64(max), max)
		h.client(requests)
		h.server(heads)
		for _, b := range bodies {
			h.server(b)
		}
		h.client(nil)
		cli.fr.WriteSettingsAck()
		ack := cli.take()
		h.client(ack)
		up, upClosed := drain(h.upOut)
		down, dnClosed := drain(h.dnOut)
		if upClosed || dnClosed || len(*evs) != 1 || (*evs)[0].Request.Stream != 3 {
			t.Fatalf("chunks %d: closed %v %v, events %+v; want the connection open and one cut of stream 3", max, upClosed, dnClosed, *evs)
		}
		// What the client got: every frame but stream 3's, and a RST_STREAM for it.
		got := h2Frames(t, down)
		want := []string{"SETTINGS 0", "HEADERS 5 x-call=M5", "RST_STREAM 3 INTERNAL_ERROR", "HEADERS 1 x-call=M1", "DATA 1", "HEADERS 1 grpc-status=0", "DATA 5", "HEADERS 5 grpc-status=0"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("chunks %d: the client got %q, want %q", max, got, want)
		}
		toServer := h2Frames(t, up[len(h2Preface):])
		wantUp := []string{"SETTINGS 0", "HEADERS 1", "DATA 1", "HEADERS 3", "DATA 3", "HEADERS 5", "DATA 5", "RST_STREAM 3 CANCEL", "WINDOW_UPDATE 0 +10", "SETTINGS 0"}
		if !reflect.DeepEqual(toServer, wantUp) {
			t.Fatalf("chunks %d: the service got %q, want %q", max, toServer, wantUp)
		}
	}
}

// h2Frames lists the frames of b as "TYPE STREAM", with a RST_STREAM's code and a
// WINDOW_UPDATE's increment.
func h2Frames(t *testing.T, b []byte) []string {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(b))
	// Header blocks are decoded in order by one decoder, as the peer does: a block
	// the proxy kept from it, or encoded against a table it does not have, fails here.
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var out []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			if err != io.EOF {
				out = append(out, "error: "+err.Error())
			}
			return out
		}
		s := fmt.Sprintf("%v %d", f.Header().Type, f.Header().StreamID)
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			s += " " + f.ErrCode.String()
		case *http2.WindowUpdateFrame:
			s += fmt.Sprintf(" +%d", f.Increment)
		case *http2.MetaHeadersFrame:
			s = fmt.Sprintf("HEADERS %d", f.StreamID)
			for _, hf := range f.Fields {
				if hf.Name == "x-call" || hf.Name == "grpc-status" {
					s += " " + hf.Name + "=" + hf.Value
				}
			}
		}
		out = append(out, s)
	}
}

// TestHTTP2DropOfAContinuedBlock: a request whose header block goes on in CONTINUATION
// frames is dropped before its last frame, so the service never has the whole block.
func TestHTTP2DropOfAContinuedBlock(t *testing.T) {
	hello, steps := h2Conversation()
	c, evs := newProtoCommits(t, HTTP2{}, 1, nil)
	c.Faults.Listed.Add(Pin{Kind: CommitDrop, Conn: 0, Txn: 3})
	h := newHarness(t, c, 1, 1<<10)
	hello.run(h)
	steps[0].run(h)
	steps[1].run(h)
	h.client(steps[2].req)
	up, _ := drain(h.upOut)
	rest := up[len(hello.req)+len(steps[0].req)+len(steps[1].req):]
	if len(*evs) != 1 || !h.up.closed || len(rest) >= len(steps[2].req) || !bytes.HasPrefix(steps[2].req, rest) {
		t.Fatalf("forwarded %d of the request's %d bytes, events %+v; want a prefix without its last header frame, one drop", len(rest), len(steps[2].req), *evs)
	}
	if r := (*evs)[0].Request; r == nil || r.Stream != 5 || r.IdempotencyKey != "key-2" || r.Status != 0 {
		t.Fatalf("event request %+v, want stream 5, key-2, no status", r)
	}
}

// TestHTTP2ErrorsAreReleased: a gRPC error in a trailers-only response, and an HTTP
// error status, reach the client; the next call is cut.
func TestHTTP2ErrorsAreReleased(t *testing.T) {
	for _, tt := range []struct {
		name string
		kv   []string
	}{
		{"grpc error", []string{":status", "200", "content-type", "application/grpc", "grpc-status", "9"}},
		{"http 503", []string{":status", "503"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cli, srv := newH2Writer(), newH2Writer()
			cli.buf.WriteString(h2Preface)
			cli.headers(1, true, 0, ":method", "POST", ":path", "/a", ":scheme", "http")
			srv.headers(1, true, 0, tt.kv...)
			failed := step{cli.take(), srv.take()}
			cli.headers(3, true, 0, ":method", "POST", ":path", "/b", ":scheme", "http")
			srv.headers(3, false, 0, ":status", "201")
			next := step{cli.take(), srv.take()}
			checkReleased(t, HTTP2{CutConnection: true}, failed, next)
		})
	}
}

func TestHTTP2GarbageNeverPanics(t *testing.T) {
	hello, _ := h2Conversation()
	checkGarbage(t, garbageRun{
		proto: HTTP2{}, seed: 13, iterations: 1000,
		hello: func(h *harness, i int) {
			if i%2 == 0 {
				hello.run(h)
			}
		},
		garbage: func(rng *rand.Rand, j int) ([]byte, bool) {
			b := randomBytes(rng, 200)
			if j%2 == 0 && len(b) >= 9 {
				b[3] = byte(rng.IntN(10)) // a frame type that exists
				b[0], b[1] = 0, 0
			}
			return b, true
		},
		good: func(h *harness) string {
			_, steps := h2Conversation()
			hello.run(h)
			steps[0].run(h)
			return "POST /etcdserverpb.KV/Put"
		},
	})
}

// h2Trace feeds the two directions as the Session does and returns the points and
// verdicts with the offsets of their frames.
func h2Trace(up, down [][]byte) []string {
	c := HTTP2{}.NewConn().(*h2Conn)
	var out []string
	off := 0
	feed(up, func(b []byte) int {
		n, p := c.Request(b)
		if n > 0 && p != nil {
			out = append(out, p.Statement+" at "+strconv.Itoa(off))
			c.ExpectCut(&Pending{point: *p})
		}
		off += max(n, 0)
		return n
	})
	off = 0
	dropping := false
	feed(down, func(b []byte) int {
		n, v := c.Reply(b)
		if n <= 0 {
			return n
		}
		// The frames of a cut stream are dropped as they come, a long one in pieces
		// whose sizes follow the chunking: a run of drops is one entry.
		drop := v.Action == Replace && v.Pending == nil && len(v.Send) == 0
		switch {
		case drop && !dropping:
			out = append(out, "drop at "+strconv.Itoa(off))
		case v.Action == Replace && len(v.Send) > 0:
			out = append(out, fmt.Sprintf("encoded anew (%d bytes) at %d", len(v.Send), off))
		case !drop && v.Action != Pass:
			out = append(out, v.Tag+" at "+strconv.Itoa(off))
		}
		dropping = drop
		off += n
		return n
	})
	return out
}

// FuzzHTTP2Framer: any bytes frame the same whole and in chunks of 1 byte to 32 KiB.
func FuzzHTTP2Framer(f *testing.F) {
	hello, steps := h2Conversation()
	f.Add(append(hello.req, join(steps, false)...), append(hello.rep, join(steps, true)...), uint64(1))
	f.Add([]byte(h2Preface+"\x00\x00\x01\x09\x04\x00\x00\x00\x01\x82"), []byte("\x00\x00\x00\x04\x00\x00\x00\x00\x00"), uint64(2))
	f.Fuzz(func(t *testing.T, up, down []byte, seed uint64) {
		whole := h2Trace([][]byte{up}, [][]byte{down})
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		max := 1 + int(seed%(32<<10))
		if chunked := h2Trace(chunk(rng, up, max), chunk(rng, down, max)); !reflect.DeepEqual(whole, chunked) {
			t.Fatalf("whole %q\nchunked (max %d) %q", whole, max, chunked)
		}
	})
}

func TestHTTP2FramerChunking(t *testing.T) {
	hello, steps := h2Conversation()
	up, down := append(hello.req, join(steps, false)...), append(hello.rep, join(steps, true)...)
	whole := h2Trace([][]byte{up}, [][]byte{down})
	if len(whole) != 9 {
		t.Fatalf("trace %q: want 3 points, 3 cuts, and the later frames of each cut stream dropped", whole)
	}
	// Each stream is cut in turn, so no header block outlives its cut to be encoded
	// anew: the trace above has none. A cut of one of two interleaved streams does.
	if strings.Contains(fmt.Sprint(whole), "encoded anew") {
		t.Fatalf("trace %q encodes a block anew", whole)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 9, 100, 32 << 10} {
		if got := h2Trace(chunk(rng, up, max), chunk(rng, down, max)); !reflect.DeepEqual(got, whole) {
			t.Fatalf("chunks of %d: %q, whole %q", max, got, whole)
		}
	}
}

// FuzzHTTP2Halves: as FuzzHTTPHalves, for HTTP/2 cutting whole connections (a stream
// cut forwards a RST_STREAM of its own, which no prefix property holds; the framer
// fuzz and the garbage check cover it).
func FuzzHTTP2Halves(f *testing.F) {
	hello, steps := h2Conversation()
	f.Add(append(hello.req, join(steps, false)...), append(hello.rep, join(steps, true)...), uint64(1))
	f.Fuzz(func(t *testing.T, cli, srv []byte, seed uint64) {
		checkFuzzHalves(t, HTTP2{CutConnection: true}, seed, cli, srv)
	})
}
