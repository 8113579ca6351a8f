package toxics

import (
	"bytes"
	"encoding/binary"
)

// PostgreSQL wire protocol framing (protocol 3.x), one direction at a time.
//
// A connection starts with untyped messages from the client (Int32 length, Int32 code,
// payload): SSLRequest and GSSENCRequest, each answered by one byte ('S' or 'G': the
// rest of the connection is encrypted; 'N': go on in plain text), then StartupMessage,
// after which both directions carry typed messages (Byte1 type, Int32 length including
// itself, payload). A CancelRequest is the only message of its connection. Anything that
// does not frame (encrypted bytes, garbage, a length out of range) switches the direction
// to pass-through for good: a framer that guessed could cut the wrong reply.

const (
	pgSSLRequest    = 80877103
	pgGSSENCRequest = 80877104
	pgCancelRequest = 80877102

	// pgMaxStartup bounds an untyped startup message (PostgreSQL's own limit).
	pgMaxStartup = 10000
	// pgMaxMessage bounds a typed message (PostgreSQL refuses more than 1 GB).
	pgMaxMessage = 1 << 30
	// pgStreamAbove: longer messages of types that never matter to commit faults
	// (DataRow, CopyData) pass on in pieces instead of being buffered whole.
	pgStreamAbove = 64 << 10
	// pgMaxWhole: a message that matters is buffered whole up to this size; past it,
	// it streams on unjudged rather than pinning memory.
	pgMaxWhole = 64 << 20
)

type pgPhase uint8

const (
	pgStartup pgPhase = iota
	pgTyped
	pgOpaque
)

type frameKind uint8

const (
	frameMessage frameKind = iota // a whole message: typ, body
	framePartial                  // a piece of a long message streamed through
	frameByte                     // a one-byte answer to SSLRequest or GSSENCRequest
	frameOpaque                   // bytes passed through unparsed
)

// pgFrame is one unit a framer found at the start of its input.
type pgFrame struct {
	kind frameKind
	typ  byte   // message type; 0 for an untyped startup message; the byte of a frameByte
	code uint32 // startup messages: the request code or protocol version
	body []byte // whole messages: the payload after the length (aliases the input)
	n    int    // bytes of input the unit covers
}

// pgFramer splits one direction of a PostgreSQL connection into frames. The zero value
// is ready for the start of a connection.
type pgFramer struct {
	upstream bool
	phase    pgPhase
	skip     int  // bytes still to pass of a streamed message
	skipTyp  byte // its type
	matters  func(typ byte) bool
}

// next returns the frame at the start of b, or false if b does not yet hold one.
func (f *pgFramer) next(b []byte) (pgFrame, bool) {
	if len(b) == 0 {
		return pgFrame{}, false
	}
	if f.skip > 0 {
		n := min(f.skip, len(b))
		f.skip -= n
		return pgFrame{kind: framePartial, typ: f.skipTyp, n: n}, true
	}
	switch f.phase {
	case pgOpaque:
		return pgFrame{kind: frameOpaque, n: len(b)}, true
	case pgStartup:
		if f.upstream {
			return f.startupRequest(b)
		}
		switch b[0] {
		case 'N':
			return pgFrame{kind: frameByte, typ: 'N', n: 1}, true
		case 'S', 'G':
			f.phase = pgOpaque
			return pgFrame{kind: frameByte, typ: b[0], n: 1}, true
		}
		// The server's first real message ('R', 'E' or 'v') starts the typed phase.
		f.phase = pgTyped
	}
	return f.typed(b)
}

func (f *pgFramer) startupRequest(b []byte) (pgFrame, bool) {
	if len(b) < 4 {
		return pgFrame{}, false
	}
	size := int(binary.BigEndian.Uint32(b))
	if size < 8 || size > pgMaxStartup {
		// A TLS ClientHello sent directly (sslnegotiation=direct), or garbage.
		f.phase = pgOpaque
		return pgFrame{kind: frameOpaque, n: len(b)}, true
	}
	if len(b) < size {
		return pgFrame{}, false
	}
	code := binary.BigEndian.Uint32(b[4:])
	fr := pgFrame{kind: frameMessage, code: code, body: b[8:size], n: size}
	switch {
	case code == pgSSLRequest || code == pgGSSENCRequest:
		// The answer decides; if it is 'S' or 'G' the next bytes are a TLS or GSS
		// handshake, which does not frame as a startup message and goes opaque.
	case code == pgCancelRequest:
		f.phase = pgOpaque
	case code>>16 == 3:
		f.phase = pgTyped
	default:
		f.phase = pgOpaque
		return pgFrame{kind: frameOpaque, n: len(b)}, true
	}
	return fr, true
}

func (f *pgFramer) typed(b []byte) (pgFrame, bool) {
	if len(b) < 5 {
		return pgFrame{}, false
	}
	size := binary.BigEndian.Uint32(b[1:])
	if size < 4 || size > pgMaxMessage {
		f.phase = pgOpaque
		return pgFrame{kind: frameOpaque, n: len(b)}, true
	}
	total := 1 + int(size)
	if total <= len(b) {
		return pgFrame{kind: frameMessage, typ: b[0], body: b[5:total], n: total}, true
	}
	matters := f.matters != nil && f.matters(b[0])
	if (!matters && total > pgStreamAbove) || total > pgMaxWhole {
		f.skip = total - len(b)
		f.skipTyp = b[0]
		return pgFrame{kind: framePartial, typ: b[0], n: len(b)}, true
	}
	return pgFrame{}, false
}

// cstring splits a NUL-terminated string off the front of b.
func cstring(b []byte) (string, []byte, bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}
