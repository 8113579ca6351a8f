package toxics

import (
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
// to pass-through for good. Long messages follow the rule of framer.go.

const (
	pgSSLRequest    = 80877103
	pgGSSENCRequest = 80877104
	pgCancelRequest = 80877102

	// pgMaxStartup bounds an untyped startup message (PostgreSQL's own limit).
	pgMaxStartup = 10000
	// pgMaxMessage bounds a typed message (PostgreSQL refuses more than 1 GB).
	pgMaxMessage = 1 << 30
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
// (with upstream and matters set) is ready for the start of a connection.
type pgFramer struct {
	upstream bool
	typed    bool // past the startup messages
	lf       lengthFramer
	matters  func(typ byte) bool // which typed messages may be points or proofs
}

// next returns the frame at the start of b, or false if b does not yet hold one.
func (f *pgFramer) next(b []byte) (pgFrame, bool) {
	if len(b) == 0 {
		return pgFrame{}, false
	}
	if !f.typed && !f.lf.opaque {
		if f.upstream {
			return f.startupRequest(b)
		}
		switch b[0] {
		case 'N':
			return pgFrame{kind: frameByte, typ: 'N', n: 1}, true
		case 'S', 'G':
			f.lf.opaque = true
			return pgFrame{kind: frameByte, typ: b[0], n: 1}, true
		}
		// The server's first real message ('R', 'E' or 'v') starts the typed phase.
		f.typed = true
	}
	k, n, ok := f.lf.next(b, 5, f.typedSize)
	switch {
	case !ok:
		return pgFrame{}, false
	case k == unitOpaque:
		return pgFrame{kind: frameOpaque, n: n}, true
	case k != unitWhole:
		return pgFrame{kind: framePartial, n: n}, true
	}
	return pgFrame{kind: frameMessage, typ: b[0], body: b[5:n], n: n}, true
}

func (f *pgFramer) typedSize(h []byte) (int, bool, bool) {
	size := binary.BigEndian.Uint32(h[1:])
	if size < 4 || size > pgMaxMessage {
		return 0, false, false
	}
	return 1 + int(size), f.matters != nil && f.matters(h[0]), true
}

func pgStartupSize(h []byte) (int, bool, bool) {
	size := int(binary.BigEndian.Uint32(h))
	// Out of range: a TLS ClientHello sent directly (sslnegotiation=direct), or garbage.
	return size, true, size >= 8 && size <= pgMaxStartup
}

func (f *pgFramer) startupRequest(b []byte) (pgFrame, bool) {
	k, n, ok := f.lf.next(b, 4, pgStartupSize)
	switch {
	case !ok:
		return pgFrame{}, false
	case k != unitWhole:
		// Startup messages are short and matter: never streamed, so this is opaque.
		return pgFrame{kind: frameOpaque, n: n}, true
	}
	code := binary.BigEndian.Uint32(b[4:])
	fr := pgFrame{kind: frameMessage, code: code, body: b[8:n], n: n}
	switch {
	case code == pgSSLRequest || code == pgGSSENCRequest:
		// The answer decides; if it is 'S' or 'G' the next bytes are a TLS or GSS
		// handshake, which does not frame as a startup message and goes opaque.
	case code == pgCancelRequest:
		f.lf.opaque = true
	case code>>16 == 3:
		f.typed = true
	default:
		_, n, _ := f.lf.passAll(b)
		return pgFrame{kind: frameOpaque, n: n}, true
	}
	return fr, true
}
