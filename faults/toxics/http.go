package toxics

import (
	"bytes"
	"strconv"
	"strings"
	"sync/atomic"
)

// HTTP is HTTP/1.1 (and 1.0) for the commit toxics: the faults of an API layer, where a
// client's retry logic sits one layer above the database. A request is a commit point;
// the fault acts at its response:
//
//   - commit-cut, called response-cut at this layer: the request reaches the service,
//     whose handler runs; the connection is cut when the response starts (its status
//     line and headers are dropped, with everything after). The client sees a lost
//     connection; the event records the status the service answered.
//   - commit-drop, called request-drop: the request is dropped before the service sees
//     any of it, and the connection is closed. The client sees the same lost connection.
//
// Commit points (upstream): every request. By default only the requests of methods that
// are not safe count (POST, PUT, PATCH, DELETE and any method not known to be safe:
// GET, HEAD, OPTIONS, TRACE and CONNECT are not points); a match function sees
// "METHOD TARGET" ("POST /payments", the target as sent, query included) and selects
// among all requests. The point is the request's head (request line and headers): a
// drop drops the head, so the service never starts the request, and the body, which
// streams through in pieces as it comes, is never judged. This is what makes
// "Expect: 100-continue" work: the body waits for the service's 100 Continue, which a
// drop never lets it ask for. Point.Txn numbers the requests of a connection from 1, so
// a listed fault commit-cut@conn:C/txn:T names the T-th request of the C-th connection.
// An Idempotency-Key header, when present, is recorded in the event (Event.Request).
//
// Framing follows RFC 9112: a head ends at its empty line and holds at most 1 MiB; a
// body is framed by Transfer-Encoding: chunked (with trailers) or by Content-Length;
// a request with neither has no body. A response has no body when it answers HEAD, or
// has status 1xx, 204 or 304; one with neither length nor chunking runs until the
// service closes. Keep-alive and pipelining pair responses with requests in order; an
// interim 1xx response (100 Continue, 103 Early Hints) is not the request's response.
// A 101 Switching Protocols or a 2xx answer to CONNECT ends HTTP on that connection:
// both directions pass through unjudged from then on, as do a direction whose bytes do
// not frame (a malformed head, a bad length or chunk size, HTTP/2's preface, TLS).
//
// Proof (downstream): the final response's status line. A status below 400 is cut: the
// service handled the request and said so. A 4xx or 5xx ends the armed cut unfired and
// reaches the client: the service refused the request or failed, and the proxy cannot
// tell what a failed handler changed, so it claims neither truth.
type HTTP struct{}

// Name returns "http".
func (HTTP) Name() string { return "http" }

// NewConn implements Protocol.
func (HTTP) NewConn() Conn { return &httpConn{} }

// Request is the API request a fault hit, for the protocols of an API layer (HTTP and
// HTTP2); nil
// in the events of database protocols.
type Request struct {
	// Method is the request's method: POST.
	Method string `json:"method"`
	// Path is the request's target as sent: /payments?x=1.
	Path string `json:"path"`
	// IdempotencyKey is the value of the request's Idempotency-Key header, when it has
	// one: what a client sends so that a retry of the same request applies once.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Status is the status code the service answered (cuts only): the response that
	// the fault dropped. 0 for a drop, which the service never saw.
	Status int `json:"status,omitempty"`
	// Stream is the HTTP/2 stream of the request (a gRPC call); 0 for HTTP/1.1.
	Stream uint32 `json:"stream,omitempty"`
}

const (
	// httpMaxHead bounds a message head, request line or status line and headers
	// (net/http's default limit on request headers is 1 MiB).
	httpMaxHead = 1 << 20
	// httpMaxLine bounds a chunk-size line of a chunked body.
	httpMaxLine = 4 << 10
	// httpMaxTag bounds the status line reported as an event's tag.
	httpMaxTag = 64
)

// httpSafe are the methods that are not points by default: they change nothing.
var httpSafe = setOf("GET", "HEAD", "OPTIONS", "TRACE", "CONNECT")

// httpReq is one request sent, awaiting its final response.
type httpReq struct {
	method string
	req    *Request
	replyCut
}

type httpConn struct {
	up   httpFramer // upstream goroutine only
	down httpFramer // downstream goroutine only
	txns uint64     // upstream only: requests seen, the number of the last

	// switched: a 101 or a CONNECT's 2xx ended HTTP on the connection; set by Reply,
	// read by Request.
	switched atomic.Bool

	lastArmed            // its mu guards queue and lost
	queue     []*httpReq // requests sent, awaiting their final responses, in order
	// lost: the responses stopped framing, so no later request can be paired with its
	// response: none is queued, and ExpectCut refuses their cuts.
	lost bool
}

// bodyKind is how the body after a head is framed.
type bodyKind uint8

const (
	bodyNone    bodyKind = iota
	bodyLength           // Content-Length bytes
	bodyChunked          // chunked, then trailers
	bodyClose            // until the connection closes
)

// httpFramer frames one direction: heads, then bodies as pieces.
type httpFramer struct {
	opaque bool
	seen   int // bytes of the head (or trailer) being waited for already searched

	body    bodyKind
	left    int64 // bodyLength: bytes left; bodyChunked: bytes left of the chunk's data
	chunk   uint8 // bodyChunked: where in the chunk
	inTrail bool  // bodyChunked: reading the trailers after the last chunk
}

// Where a chunked body is between its pieces.
const (
	chunkSize = iota // at a chunk-size line
	chunkData        // in a chunk's data (left bytes)
	chunkEnd         // at the CRLF after a chunk's data
)

// head is a parsed message head.
type head struct {
	line    string // request line or status line
	length  int64  // Content-Length, -1 when absent
	chunked bool   // Transfer-Encoding ends in chunked
	coded   bool   // Transfer-Encoding present
	key     string // Idempotency-Key
	ok      bool
}

// Request implements Conn.
func (c *httpConn) Request(b []byte) (int, *Point) {
	f := &c.up
	if len(b) == 0 {
		return 0, nil
	}
	if !f.opaque && c.switched.Load() {
		f.opaque = true
	}
	if f.opaque {
		return len(b), nil
	}
	if f.body != bodyNone {
		return f.bodyPiece(b), nil
	}
	if n := leadingEOL(b); n > 0 {
		// RFC 9112 2.2: a server ignores empty lines before a request line.
		return n, nil
	}
	end, st := f.headEnd(b)
	switch st {
	case lineWait:
		return 0, nil
	case lineRefused:
		return f.passAll(b), nil
	}
	h := parseHead(b[:end])
	method, target, ok := requestLine(h.line)
	if !ok || !h.ok {
		return f.passAll(b), nil
	}
	switch {
	case h.coded && !h.chunked:
		// A request's body must end in chunked (RFC 9112 6.3): the service refuses it.
		return f.passAll(b), nil
	case h.chunked:
		f.body, f.chunk, f.left = bodyChunked, chunkSize, 0
	case h.length > 0:
		f.body, f.left = bodyLength, h.length
	}
	c.txns++
	r := &httpReq{method: method, req: &Request{Method: method, Path: target, IdempotencyKey: h.key}}
	c.mu.Lock()
	if !c.lost {
		c.queue = append(c.queue, r)
		c.last = &r.replyCut
	}
	c.mu.Unlock()
	text := method + " " + target
	return end, &Point{
		Statement: text,
		Text:      text,
		Default:   !httpSafe[method],
		Txn:       c.txns,
		Wrote:     !httpSafe[method],
		Request:   r.req,
	}
}

// Reply implements Conn.
func (c *httpConn) Reply(b []byte) (int, Verdict) {
	f := &c.down
	if len(b) == 0 {
		return 0, Verdict{}
	}
	if f.opaque {
		return len(b), Verdict{}
	}
	if f.body != bodyNone {
		return f.bodyPiece(b), Verdict{}
	}
	if n := leadingEOL(b); n > 0 {
		return n, Verdict{}
	}
	end, st := f.headEnd(b)
	switch st {
	case lineWait:
		return 0, Verdict{}
	case lineRefused:
		return f.passAll(b), c.abandon()
	}
	h := parseHead(b[:end])
	code, ok := statusLine(h.line)
	if !ok || !h.ok {
		return f.passAll(b), c.abandon()
	}
	if code == 101 {
		c.switched.Store(true)
		f.passAll(b)
		return len(b), c.abandon()
	}
	if code < 200 {
		// An interim response: the final one is still to come.
		return end, Verdict{}
	}
	c.mu.Lock()
	var r *httpReq
	if len(c.queue) > 0 {
		r = c.queue[0]
		c.queue = c.queue[1:]
	}
	c.mu.Unlock()
	method := ""
	if r != nil {
		method = r.method
	}
	switch {
	case method == "CONNECT" && code < 300:
		c.switched.Store(true)
		f.passAll(b)
		return len(b), c.release(r)
	case method == "HEAD" || code == 204 || code == 304:
		// No body, whatever the headers say (RFC 9112 6.3).
	case h.coded && h.chunked:
		f.body, f.chunk, f.left = bodyChunked, chunkSize, 0
	case h.coded:
		f.body = bodyClose
	case h.length > 0:
		f.body, f.left = bodyLength, h.length
	case h.length < 0:
		f.body = bodyClose
	}
	if f.body == bodyClose {
		// The body runs until the service closes: nothing after it frames.
		f.opaque, f.body = true, bodyNone
		defer c.abandonQueued()
	}
	if r == nil {
		return end, Verdict{}
	}
	c.mu.Lock()
	pd := r.cut
	r.cut = nil
	c.mu.Unlock()
	if pd == nil {
		return end, Verdict{}
	}
	if code >= 400 {
		return end, Verdict{Action: Release, Pending: pd}
	}
	if pd.point.Request != nil {
		pd.point.Request.Status = code
	}
	return end, Verdict{Action: Cut, Pending: pd, Tag: shorten(strings.TrimSpace(h.line[9:]), httpMaxTag)}
}

// release ends the armed cut of r unfired, if any.
func (c *httpConn) release(r *httpReq) Verdict {
	if r == nil {
		return Verdict{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if pd := r.cut; pd != nil {
		r.cut = nil
		return Verdict{Action: Release, Pending: pd}
	}
	return Verdict{}
}

// abandon is the verdict when the replies stop framing: the next armed cut (the one
// the unframed bytes may answer) ends unfired, and so will the rest (abandonQueued).
func (c *httpConn) abandon() Verdict {
	c.mu.Lock()
	var r *httpReq
	if len(c.queue) > 0 {
		r = c.queue[0]
		c.queue = c.queue[1:]
	}
	c.mu.Unlock()
	v := c.release(r)
	c.abandonQueued()
	return v
}

// abandonQueued forgets the cuts armed on requests whose responses will never be
// framed. Their reservations are returned when the connection ends (Session.end), so
// none of them can fire on bytes the proxy cannot pair.
func (c *httpConn) abandonQueued() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queue, c.last, c.lost = nil, nil, true
}

// leadingEOL returns the length of an empty line (CRLF or LF) at the start of b, 0 when
// there is none or b may still become one.
func leadingEOL(b []byte) int {
	switch {
	case b[0] == '\n':
		return 1
	case b[0] == '\r' && len(b) > 1 && b[1] == '\n':
		return 2
	}
	return 0
}

// headEnd finds the end of the head at the start of b: the offset after its empty line.
func (f *httpFramer) headEnd(b []byte) (int, lineStatus) {
	from := max(0, f.seen-3)
	for {
		i := bytes.IndexByte(b[from:], '\n')
		if i < 0 {
			break
		}
		i += from
		// An empty line: "\n\n" or "\n\r\n".
		if i+1 < len(b) && b[i+1] == '\n' {
			return f.headDone(i + 2)
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return f.headDone(i + 3)
		}
		if i+2 >= len(b) {
			break
		}
		from = i + 1
	}
	if len(b) > httpMaxHead {
		f.seen = 0
		return 0, lineRefused
	}
	f.seen = len(b)
	return 0, lineWait
}

func (f *httpFramer) headDone(end int) (int, lineStatus) {
	f.seen = 0
	if end > httpMaxHead {
		return 0, lineRefused
	}
	return end, lineEnd
}

// passAll switches the direction to pass-through for good and consumes b.
func (f *httpFramer) passAll(b []byte) int {
	f.opaque, f.body, f.seen = true, bodyNone, 0
	return len(b)
}

// bodyPiece consumes the next piece of a body, and the body's framing with it.
func (f *httpFramer) bodyPiece(b []byte) int {
	switch f.body {
	case bodyLength:
		n, done := f.take(b)
		if done {
			f.body = bodyNone
		}
		return n
	case bodyChunked:
		return f.chunkPiece(b)
	}
	return f.passAll(b)
}

// take consumes what b holds of a body or chunk of known length, f.left bytes at most;
// done when none is left.
func (f *httpFramer) take(b []byte) (n int, done bool) {
	n = int(min(f.left, int64(len(b))))
	f.left -= int64(n)
	return n, f.left == 0
}

// chunkPiece consumes the next unit of a chunked body: a chunk-size line, data, the
// CRLF after the data, or the trailers.
func (f *httpFramer) chunkPiece(b []byte) int {
	if f.inTrail {
		if n := leadingEOL(b); n > 0 {
			f.inTrail, f.body = false, bodyNone
			return n
		}
		end, st := f.headEnd(b)
		switch st {
		case lineWait:
			return 0
		case lineRefused:
			return f.passAll(b)
		}
		f.inTrail, f.body = false, bodyNone
		return end
	}
	switch f.chunk {
	case chunkData:
		n, done := f.take(b)
		if done {
			f.chunk = chunkEnd
		}
		return n
	case chunkEnd:
		n := leadingEOL(b)
		if n == 0 {
			if b[0] == '\r' && len(b) == 1 {
				return 0
			}
			return f.passAll(b)
		}
		f.chunk = chunkSize
		return n
	}
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > httpMaxLine {
			return f.passAll(b)
		}
		return 0
	}
	line := string(bytes.TrimSuffix(b[:i], []byte{'\r'}))
	if ext := strings.IndexByte(line, ';'); ext >= 0 {
		line = line[:ext]
	}
	size, err := strconv.ParseUint(strings.TrimRight(line, " \t"), 16, 62)
	if err != nil || line == "" {
		return f.passAll(b)
	}
	if size == 0 {
		f.inTrail = true
	} else {
		f.chunk, f.left = chunkData, int64(size)
	}
	return i + 1
}

// parseHead reads the fields of a head that framing and events need. ok is false for a
// head that a server or client would refuse: a field line without a colon, an
// obsolete folded line, a Content-Length that is not one number.
func parseHead(b []byte) head {
	h := head{length: -1, ok: true}
	lines := strings.Split(strings.TrimRight(string(b), "\r\n"), "\n")
	h.line = strings.TrimSuffix(lines[0], "\r")
	for _, l := range lines[1:] {
		l = strings.TrimSuffix(l, "\r")
		if l == "" || l[0] == ' ' || l[0] == '\t' {
			h.ok = false
			return h
		}
		name, value, found := strings.Cut(l, ":")
		if !found || name == "" || strings.ContainsAny(name, " \t") {
			h.ok = false
			return h
		}
		value = strings.Trim(value, " \t")
		switch strings.ToLower(name) {
		case "content-length":
			for _, v := range strings.Split(value, ",") {
				n, err := strconv.ParseInt(strings.Trim(v, " \t"), 10, 63)
				if err != nil || n < 0 || strings.HasPrefix(strings.Trim(v, " \t"), "+") || (h.length >= 0 && n != h.length) {
					h.ok = false
					return h
				}
				h.length = n
			}
		case "transfer-encoding":
			h.coded = true
			codings := strings.Split(value, ",")
			h.chunked = strings.EqualFold(strings.Trim(codings[len(codings)-1], " \t"), "chunked")
		case "idempotency-key":
			if h.key == "" {
				h.key = shorten(value, 256)
			}
		}
	}
	return h
}

// requestLine splits "METHOD TARGET HTTP/1.x".
func requestLine(line string) (method, target string, ok bool) {
	method, rest, ok1 := strings.Cut(line, " ")
	target, version, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || method == "" || target == "" || !strings.HasPrefix(version, "HTTP/1.") || len(version) != 8 {
		return "", "", false
	}
	for i := 0; i < len(method); i++ {
		if c := method[i]; c <= ' ' || c >= 0x7f || strings.IndexByte("()<>@,;:\\\"/[]?={}", c) >= 0 {
			return "", "", false
		}
	}
	for i := 0; i < len(target); i++ {
		if c := target[i]; c <= ' ' || c == 0x7f {
			return "", "", false
		}
	}
	return method, target, true
}

// statusLine reads the code of "HTTP/1.x CODE REASON".
func statusLine(line string) (int, bool) {
	if len(line) < 12 || !strings.HasPrefix(line, "HTTP/1.") || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, false
	}
	code, err := strconv.Atoi(line[9:12])
	if err != nil || code < 100 || line[9] == '+' || line[9] == '-' {
		return 0, false
	}
	return code, true
}
