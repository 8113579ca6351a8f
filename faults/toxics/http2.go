package toxics

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2/hpack"
)

// HTTP2 is HTTP/2 with prior knowledge (h2c: HTTP/2 without TLS, as gRPC speaks it on a
// plain connection) for the commit toxics: the faults of an API layer, like HTTP, on a
// connection that multiplexes many requests as streams.
//
// A request is a stream the client opens: its first header block (a HEADERS frame and
// the CONTINUATION frames up to END_HEADERS), decoded with an HPACK decoder of the
// connection's own (golang.org/x/net/http2/hpack; the dynamic table is state of the
// connection, so every header block of both directions is decoded in order). The
// point's text is ":method :path" ("POST /etcdserverpb.KV/Put" for a gRPC call); by
// default every method but GET, HEAD and OPTIONS counts, so every gRPC call does (a
// match function picks the methods of a service); Point.Txn numbers the streams the
// client opened on the connection, from 1; the event names the stream, and an
// idempotency-key header when the request has one.
//
//   - commit-cut (response-cut): the request reaches the service; when the stream's
//     response starts (its first header block, :status below 400 and not a gRPC error
//     in a trailers-only response) that stream alone is cut: the client gets a
//     RST_STREAM (INTERNAL_ERROR) in front of the response, the stream's DATA is
//     dropped, and the other streams go on. The stream's header blocks still reach
//     the client, after the reset: its HPACK decoder must see every block the
//     service's encoder made, and it ignores them on a reset stream. A unary gRPC handler has
//     returned by then: grpc-go sends the response headers with the reply. The
//     service is told too, on the client's next bytes (between whole frames): a
//     RST_STREAM (CANCEL) for the stream, unless it ended it already, and a
//     connection WINDOW_UPDATE for the DATA dropped, which the client never saw and
//     so never credited back. With CutConnection the cut ends the whole connection
//     instead, with every other stream in flight on it: their calls fail on the
//     client too, and the proxy claims no truth for them (they may or may not have
//     run).
//   - commit-drop (request-drop): the connection closes before the stream's last header
//     frame reaches the service, which never starts the call; the other streams in
//     flight on the connection fail with it, unjudged, as with CutConnection. A drop
//     of the stream alone would withhold a header block from the service's HPACK
//     decoder, whose dynamic table the client's encoder goes on referring to.
//
// Framing: the client's connection preface, then frames (9-byte header, length up to
// 2^24-1) in both directions; long DATA frames stream through unjudged by the package's
// rule. A preface that does not match (HTTP/1.1, TLS), a header block that does not
// decode, or a frame out of place (a CONTINUATION where none is expected) switches the
// direction to pass-through for good.
type HTTP2 struct {
	// CutConnection makes a cut end the whole connection, as HTTP/1.1's does,
	// instead of the one stream.
	CutConnection bool
}

// Name returns "http2".
func (HTTP2) Name() string { return "http2" }

// NewConn implements Protocol.
func (p HTTP2) NewConn() Conn {
	c := &h2Conn{up: newH2Dir(), down: newH2Dir(), streams: map[uint32]*h2Stream{}, dropped: map[uint32]bool{}, cutConn: p.CutConnection}
	c.clientTable.Store(4096)
	return c
}

// The client's connection preface (RFC 9113 3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// Frame types and flags (RFC 9113 6).
const (
	h2Data         = 0x0
	h2Headers      = 0x1
	h2RSTStream    = 0x3
	h2Settings     = 0x4
	h2PushPromise  = 0x5
	h2WindowUpdate = 0x8
	h2Continuation = 0x9

	h2ErrInternal = 0x2
	h2ErrCancel   = 0x8

	h2EndStream  = 0x1
	h2EndHeaders = 0x4
	h2Padded     = 0x8
	h2Priority   = 0x20

	h2FrameHeader = 9
	// h2MaxBlock bounds a header block kept for decoding, CONTINUATIONs included.
	h2MaxBlock = 1 << 20
	// h2MaxTable bounds the dynamic table size a peer may move to.
	h2MaxTable = 1 << 20
)

// h2Stream is a request stream the client opened.
type h2Stream struct {
	id  uint32
	req *Request
	cut *Pending // guarded by h2Conn.mu
}

type h2Conn struct {
	up, down  h2Dir  // each its direction's goroutine only
	opened    uint64 // upstream only: streams the client opened
	maxStream uint32 // upstream only: the highest stream id the client opened

	mu      sync.Mutex
	streams map[uint32]*h2Stream // the streams with a cut armed, by id
	last    *h2Stream            // the stream of the point Request returned last
	// lost: the replies stopped framing; ExpectCut refuses from then on.
	lost bool
	// toServer and credit are what upstream sends: RST_STREAM frames, and the bytes
	// of DATA dropped, returned as connection-level WINDOW_UPDATE.
	toServer []byte
	credit   int64

	cutConn bool
	dropped map[uint32]bool // downstream only: streams whose response was cut

	// After the first stream cut the client's HPACK decoder has missed a header block
	// the service's encoder made, so from then on every header block goes to the
	// client encoded anew by enc, whose table the first such block resets (downstream
	// only). clientTable is the client's SETTINGS_HEADER_TABLE_SIZE, the most enc's
	// table may hold (upstream writes it).
	reencode    bool
	resetTable  bool
	encLimit    uint32
	enc         *hpack.Encoder
	encBuf      bytes.Buffer
	clientTable atomic.Uint32
}

// h2Dir is the framing and header decoding of one direction.
type h2Dir struct {
	lf      lengthFramer
	preface bool // the client's preface was read (upstream only)
	dec     *hpack.Decoder
	// A header block spread over frames: its stream, its first frame's type and
	// flags, the fragments so far.
	inBlock     bool
	curStream   uint32 // the stream and type of the long frame streaming through
	curType     byte
	blockStream uint32
	promised    uint32
	blockType   byte
	blockFlags  byte
	block       []byte
}

func newH2Dir() h2Dir {
	d := hpack.NewDecoder(4096, nil)
	d.SetAllowedMaxDynamicTableSize(h2MaxTable)
	d.SetMaxStringLength(h2MaxBlock)
	return h2Dir{dec: d}
}

func h2Size(h []byte) (int, bool, bool) {
	n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	t := h[3]
	return h2FrameHeader + n, t == h2Headers || t == h2Continuation || t == h2PushPromise, true
}

// h2Unit is what h2Dir.frame found at the start of its input.
type h2Unit struct {
	n      int // bytes consumed
	stream uint32
	typ    byte
	flags  byte
	// flow is how many of the bytes count against flow control: a DATA frame's
	// payload (its whole length, padding included), or a piece of one.
	flow int
	// fields is the decoded header block that ended with this frame (done).
	fields []hpack.HeaderField
	done   bool
	// whole: the unit is a whole frame.
	whole bool
	// framed is false for bytes that are not a frame of this direction's stream
	// of frames (the preface, pass-through).
	framed bool
	// payload is a whole frame's payload (it aliases the input: read it before the
	// call returns); promised is a PUSH_PROMISE block's promised stream.
	payload  []byte
	promised uint32
}

// frame reads the unit at the start of b: a whole frame, or the head or a later piece
// of a long one streamed through. A direction that stops framing passes everything.
func (d *h2Dir) frame(b []byte) h2Unit {
	k, n, ok := d.lf.next(b, h2FrameHeader, h2Size)
	switch {
	case !ok:
		return h2Unit{}
	case k == unitOpaque:
		return h2Unit{n: n}
	case k == unitPiece:
		u := h2Unit{n: n, stream: d.curStream, typ: d.curType, framed: true}
		if u.typ == h2Data {
			u.flow = n
		}
		return u
	}
	u := h2Unit{n: n, typ: b[3], flags: b[4], stream: binary.BigEndian.Uint32(b[5:9]) & 0x7fffffff, framed: true}
	if u.typ == h2Data {
		u.flow = n - h2FrameHeader
	}
	if d.inBlock != (u.typ == h2Continuation) || (d.inBlock && u.stream != d.blockStream) {
		// A header block must go on in CONTINUATIONs of its stream, and only there.
		return h2Unit{n: d.passAll(b)}
	}
	isBlock := u.typ == h2Headers || u.typ == h2Continuation || u.typ == h2PushPromise
	if k == unitHead {
		// A frame past maxWhole: a header frame that large is not judged, and the
		// decoder's state is lost with it.
		if isBlock {
			return h2Unit{n: d.passAll(b)}
		}
		d.curStream, d.curType = u.stream, u.typ
		return u
	}
	u.whole, u.payload = true, b[h2FrameHeader:n]
	if !isBlock {
		return u
	}
	frag, ok := h2Fragment(u.typ, u.flags, b[h2FrameHeader:n])
	if !ok || len(d.block)+len(frag) > h2MaxBlock {
		return h2Unit{n: d.passAll(b)}
	}
	if !d.inBlock {
		d.blockStream, d.blockType, d.blockFlags = u.stream, u.typ, u.flags
		if u.typ == h2PushPromise {
			d.promised = h2Promised(u.flags, u.payload)
		}
	}
	d.block = append(d.block, frag...)
	if u.flags&h2EndHeaders == 0 {
		d.inBlock = true
		return u
	}
	fields, err := d.dec.DecodeFull(d.block)
	u.typ, u.flags = d.blockType, d.blockFlags|u.flags&h2EndHeaders
	d.inBlock, d.block = false, d.block[:0]
	if err != nil {
		return h2Unit{n: d.passAll(b)}
	}
	u.fields, u.done, u.promised = fields, true, d.promised
	return u
}

// h2Promised reads the promised stream of a PUSH_PROMISE payload whose fragment
// h2Fragment has accepted.
func h2Promised(flags byte, p []byte) uint32 {
	if flags&h2Padded != 0 {
		p = p[1:]
	}
	return binary.BigEndian.Uint32(p) & 0x7fffffff
}

// h2Fragment returns the header block fragment of a HEADERS, PUSH_PROMISE or
// CONTINUATION payload: without padding, priority or promised stream id.
func h2Fragment(typ, flags byte, p []byte) ([]byte, bool) {
	if typ == h2Continuation {
		return p, true
	}
	pad := 0
	if flags&h2Padded != 0 {
		if len(p) < 1 {
			return nil, false
		}
		pad = int(p[0])
		p = p[1:]
	}
	skip := 0
	if typ == h2Headers && flags&h2Priority != 0 {
		skip = 5
	}
	if typ == h2PushPromise {
		skip = 4
	}
	if len(p) < skip+pad {
		return nil, false
	}
	return p[skip : len(p)-pad], true
}

func (d *h2Dir) passAll(b []byte) int {
	_, n, _ := d.lf.passAll(b)
	d.inBlock, d.block = false, nil
	return n
}

func h2Field(fields []hpack.HeaderField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// Request implements Conn.
func (c *h2Conn) Request(b []byte) (int, *Point) {
	d := &c.up
	if len(b) == 0 {
		return 0, nil
	}
	if !d.preface && !d.lf.opaque {
		m := min(len(b), len(h2Preface))
		if !bytes.Equal(b[:m], []byte(h2Preface[:m])) {
			return d.passAll(b), nil
		}
		if m < len(h2Preface) {
			return 0, nil
		}
		d.preface = true
		return len(h2Preface), nil
	}
	u := d.frame(b)
	if u.typ == h2Settings && u.whole && u.flags&1 == 0 {
		for p := u.payload; len(p) >= 6; p = p[6:] {
			if binary.BigEndian.Uint16(p) == 1 { // SETTINGS_HEADER_TABLE_SIZE
				c.clientTable.Store(binary.BigEndian.Uint32(p[2:]))
			}
		}
	}
	n, fields, stream := u.n, u.fields, u.stream
	if !u.done || u.typ != h2Headers || stream%2 == 0 {
		return n, nil
	}
	method, path := h2Field(fields, ":method"), h2Field(fields, ":path")
	if stream <= c.maxStream || method == "" || path == "" {
		// Trailers of a stream already open (a client opens streams in increasing
		// order), or not a request.
		return n, nil
	}
	c.maxStream = stream
	c.opened++
	st := &h2Stream{id: stream, req: &Request{Method: method, Path: path, IdempotencyKey: shorten(h2Field(fields, "idempotency-key"), 256), Stream: stream}}
	c.mu.Lock()
	c.last = st
	c.mu.Unlock()
	text := method + " " + path
	safe := method == "GET" || method == "HEAD" || method == "OPTIONS"
	return n, &Point{Statement: text, Text: text, Default: !safe, Txn: c.opened, Wrote: !safe, Request: st.req}
}

// ExpectCut implements Conn.
func (c *h2Conn) ExpectCut(p *Pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost || c.last == nil || c.last.cut != nil {
		return false
	}
	c.last.cut = p
	c.streams[c.last.id] = c.last
	return true
}

// Reply implements Conn.
func (c *h2Conn) Reply(b []byte) (int, Verdict) {
	d := &c.down
	if len(b) == 0 {
		return 0, Verdict{}
	}
	opaque := d.lf.opaque
	u := d.frame(b)
	if d.lf.opaque && !opaque {
		// The replies stopped framing: no armed cut can be paired with its response.
		return u.n, c.releaseAll()
	}
	if u.n <= 0 || !u.framed {
		return u.n, Verdict{}
	}
	isBlock := u.typ == h2Headers || u.typ == h2Continuation || u.typ == h2PushPromise
	if c.dropped[u.stream] {
		return u.n, c.drop(u)
	}
	if u.typ == h2RSTStream {
		// The service reset the stream: it ends without a response to cut.
		return u.n, c.release(u.stream)
	}
	if !isBlock {
		return u.n, Verdict{}
	}
	c.mu.Lock()
	st := c.streams[u.stream]
	c.mu.Unlock()
	if !u.done {
		switch {
		case c.reencode:
			// The block is sent anew when it is whole.
			return u.n, Verdict{Action: Replace}
		case st != nil:
			// The response's header block goes on in CONTINUATIONs: hold it until
			// it is whole and says what the response is.
			return u.n, Verdict{Action: Hold}
		}
		return u.n, Verdict{}
	}
	// pass lets the block through: as it is, or encoded anew once a cut made the
	// client's decoder miss one. Only a block that goes to the client is encoded:
	// the encoder's table must hold what the client's decoder has seen, no more.
	pass := func(pd *Pending) Verdict {
		if c.reencode {
			return Verdict{Action: Replace, Send: c.encode(u), Pending: pd}
		}
		return Verdict{Action: Release, Pending: pd}
	}
	status, _ := strconv.Atoi(h2Field(u.fields, ":status"))
	if st == nil || u.typ != h2Headers || (status >= 100 && status < 200) {
		return u.n, pass(nil)
	}
	c.mu.Lock()
	pd := st.cut
	st.cut = nil
	delete(c.streams, u.stream)
	c.mu.Unlock()
	if pd == nil {
		return u.n, pass(nil)
	}
	grpcStatus := h2Field(u.fields, "grpc-status")
	if status == 0 || status >= 400 || (u.flags&h2EndStream != 0 && grpcStatus != "" && grpcStatus != "0") {
		// An error, or a gRPC call that failed (a trailers-only response).
		return u.n, pass(pd)
	}
	if pd.point.Request != nil {
		pd.point.Request.Status = status
	}
	tag := ":status " + strconv.Itoa(status)
	if ct := h2Field(u.fields, "content-type"); len(ct) >= 16 && ct[:16] == "application/grpc" {
		tag += " (grpc)"
	}
	if c.cutConn {
		return u.n, Verdict{Action: Cut, Pending: pd, Tag: tag}
	}
	// Cut the stream alone: the client gets RST_STREAM in place of the response's
	// headers, and the rest of the stream is dropped. Its HPACK decoder then lacks
	// this block, which the service's encoder may have added to its dynamic table,
	// so from here on the proxy encodes every header block for the client itself.
	// The service gets a RST_STREAM of its own, unless it ended the stream already.
	if !c.reencode {
		c.reencode, c.resetTable = true, true
		c.enc = hpack.NewEncoder(&c.encBuf)
	}
	if u.flags&h2EndStream == 0 {
		c.dropped[u.stream] = true
		c.mu.Lock()
		c.toServer = h2AppendRST(c.toServer, u.stream, h2ErrCancel)
		c.mu.Unlock()
	}
	return u.n, Verdict{Action: Substitute, Pending: pd, Tag: tag, Send: h2AppendRST(nil, u.stream, h2ErrInternal)}
}

// drop drops a frame of a stream whose response was cut; its header blocks too, which
// the proxy's encoder never sends on. The DATA it drops never
// reaches the client, which would have returned their flow-control credit to the
// connection: the proxy returns it to the service instead.
func (c *h2Conn) drop(u h2Unit) Verdict {
	if u.flow > 0 {
		c.mu.Lock()
		c.credit += int64(u.flow)
		c.mu.Unlock()
	}
	// The stream ends at a RST_STREAM or a whole frame with END_STREAM (a long DATA
	// frame's flags come with its head, before its pieces: its entry stays).
	if u.typ == h2RSTStream || (u.whole && u.flags&h2EndStream != 0 && (u.typ == h2Data || u.done)) {
		delete(c.dropped, u.stream)
	}
	return Verdict{Action: Replace}
}

// encode returns the header block of u encoded by the proxy's own encoder, as the
// frames that carry it to the client: its first frame's type (HEADERS, or
// PUSH_PROMISE with its promised stream) and END_STREAM, CONTINUATIONs past 16 KiB
// (the least SETTINGS_MAX_FRAME_SIZE a client can have), no padding, no priority.
func (c *h2Conn) encode(u h2Unit) []byte {
	c.encBuf.Reset()
	limit := min(c.clientTable.Load(), 4096)
	switch {
	case c.resetTable:
		// Empty the client's dynamic table, and size it as the client allows: the
		// proxy's encoder starts with an empty one.
		c.enc.SetMaxDynamicTableSizeLimit(limit)
		c.enc.SetMaxDynamicTableSize(0)
		c.enc.SetMaxDynamicTableSize(limit)
		c.resetTable, c.encLimit = false, limit
	case limit != c.encLimit:
		// The client's SETTINGS changed the size its decoder allows.
		c.enc.SetMaxDynamicTableSizeLimit(limit)
		c.enc.SetMaxDynamicTableSize(limit)
		c.encLimit = limit
	}
	for _, f := range u.fields {
		c.enc.WriteField(f)
	}
	block := c.encBuf.Bytes()
	var out []byte
	typ, flags := u.typ, u.flags&h2EndStream
	if u.typ == h2Continuation {
		typ = h2Headers
	}
	var prefix []byte
	if typ == h2PushPromise {
		prefix, flags = binary.BigEndian.AppendUint32(nil, u.promised), 0
	}
	const maxFrame = 16 << 10
	first := true
	for first || len(block) > 0 {
		room := maxFrame - len(prefix)
		n := min(room, len(block))
		t, f := typ, flags
		if !first {
			t, f = h2Continuation, 0
		}
		if n == len(block) {
			f |= h2EndHeaders
		}
		size := len(prefix) + n
		out = append(out, byte(size>>16), byte(size>>8), byte(size), t, f)
		out = binary.BigEndian.AppendUint32(out, u.stream)
		out = append(append(out, prefix...), block[:n]...)
		block, prefix, first = block[n:], nil, false
	}
	return out
}

// Upstream implements Upstreamer: the RST_STREAMs of the streams cut, and the
// flow-control credit of the frames dropped, sent only between whole frames of the
// client's.
func (c *h2Conn) Upstream() []byte {
	d := &c.up
	if !d.preface || d.lf.opaque || d.lf.skip > 0 || d.inBlock {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.toServer
	c.toServer = nil
	for c.credit > 0 {
		n := min(c.credit, 1<<31-1)
		b = append(b, 0, 0, 4, h2WindowUpdate, 0, 0, 0, 0, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(n))
		c.credit -= n
	}
	return b
}

// h2AppendRST appends a RST_STREAM frame.
func h2AppendRST(b []byte, stream uint32, code uint32) []byte {
	b = append(b, 0, 0, 4, h2RSTStream, 0)
	b = binary.BigEndian.AppendUint32(b, stream)
	return binary.BigEndian.AppendUint32(b, code)
}

// release ends the armed cut of a stream unfired, if any.
func (c *h2Conn) release(stream uint32) Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[stream]
	if st == nil {
		return Verdict{}
	}
	delete(c.streams, stream)
	if pd := st.cut; pd != nil {
		st.cut = nil
		return Verdict{Action: Release, Pending: pd}
	}
	return Verdict{}
}

// releaseAll forgets every stream when the replies stop framing: the first armed cut
// ends in this verdict, the others with the connection (Session.end).
func (c *h2Conn) releaseAll() Verdict {
	c.mu.Lock()
	defer c.mu.Unlock()
	var v Verdict
	for id, st := range c.streams {
		if st.cut != nil && v.Pending == nil {
			v = Verdict{Action: Release, Pending: st.cut}
		}
		st.cut = nil
		delete(c.streams, id)
	}
	c.last, c.lost = nil, true
	return v
}
