package toxics

import (
	"encoding/binary"
)

// CQL framing: envelopes, unframed (v3, v4, and v5 before its handshake) and the
// framer of one direction. The v5 segments are in cql_segments.go.

// cqlRequestOps and cqlReplyOps are the opcodes each direction may carry.
var cqlRequestOps, cqlReplyOps [cqlOpAuthSuccess + 1]bool

func init() {
	for _, op := range []byte{cqlOpStartup, cqlOpOptions, cqlOpQuery, cqlOpPrepare, cqlOpExecute, cqlOpRegister, cqlOpBatch, cqlOpAuthResponse} {
		cqlRequestOps[op] = true
	}
	for _, op := range []byte{cqlOpError, cqlOpReady, cqlOpAuthenticate, cqlOpSupported, cqlOpResult, cqlOpEvent, cqlOpAuthChallenge, cqlOpAuthSuccess} {
		cqlReplyOps[op] = true
	}
}

// cqlHeader is an envelope's header.
type cqlHeader struct {
	version byte // without the direction bit
	flags   byte
	stream  int16
	opcode  byte
	length  int // of the body
}

// cqlEnvelope is one whole message.
type cqlEnvelope struct {
	cqlHeader
	body []byte // aliases the input when the envelope came in one piece
}

// parseCQLHeader reads an envelope header from the first 9 bytes of b. framed says the
// envelope came in a v5 segment, where only version 5 is allowed.
func parseCQLHeader(b []byte, response, framed bool) (cqlHeader, bool) {
	v := b[0]
	if (v&0x80 != 0) != response {
		return cqlHeader{}, false
	}
	h := cqlHeader{
		version: v & 0x7f,
		flags:   b[1],
		stream:  int16(binary.BigEndian.Uint16(b[2:])),
		opcode:  b[4],
	}
	if framed && h.version != 5 || h.version < 3 || h.version > 5 {
		// v1 and v2 have an 8-byte header: not framed here.
		return cqlHeader{}, false
	}
	ops := &cqlRequestOps
	if response {
		ops = &cqlReplyOps
	}
	if int(h.opcode) >= len(ops) || !ops[h.opcode] {
		return cqlHeader{}, false
	}
	n := int32(binary.BigEndian.Uint32(b[5:]))
	if n < 0 || n > cqlMaxBody {
		return cqlHeader{}, false
	}
	h.length = int(n)
	return h, true
}

type cqlPhase uint8

const (
	cqlEnvelopes cqlPhase = iota // unframed envelopes: v3, v4, and v5 before its handshake
	cqlSegments                  // v5 segments, after the handshake
	cqlOpaque                    // passed through unparsed, for good
)

// cqlUnit is what a framer found at the start of its input.
type cqlUnit struct {
	n    int           // bytes of input the unit covers
	envs []cqlEnvelope // whole envelopes: one when unframed, all those of a segment
	// piece: a piece of a long envelope streamed through; head is its header on the
	// first piece.
	piece  bool
	head   *cqlHeader
	opaque bool // bytes passed through unparsed
}

// cqlFramer splits one direction of a CQL connection into units. The zero value frames
// requests at the start of a connection.
type cqlFramer struct {
	response bool
	phase    cqlPhase
	matters  func(cqlHeader) bool

	lf    lengthFramer // unframed envelopes
	chain int          // framed: envelope bytes left, in segments streamed through one by one

	// framed: a long envelope being gathered whole from its segments, resumed where
	// the last call stopped (the input then starts at the same byte).
	gathering bool
	gHead     cqlHeader
	gTotal    int // envelope bytes, header included
	gScanned  int // input bytes of complete segments checked so far
	gGot      int // envelope bytes in them
}

// next returns the unit at the start of b, or false if b does not yet hold one.
func (f *cqlFramer) next(b []byte) (cqlUnit, bool) {
	if len(b) == 0 {
		return cqlUnit{}, false
	}
	switch {
	case f.phase == cqlOpaque:
		return cqlUnit{n: len(b), opaque: true}, true
	case f.phase == cqlEnvelopes || f.lf.skip > 0:
		// An envelope streaming through when the segments start still ends first.
		return f.envelope(b)
	}
	return f.segment(b)
}

func (f *cqlFramer) opaque(b []byte) (cqlUnit, bool) {
	f.phase = cqlOpaque
	f.lf.skip, f.chain, f.gathering = 0, 0, false
	return cqlUnit{n: len(b), opaque: true}, true
}

func (f *cqlFramer) wants(h cqlHeader) bool {
	return f.matters != nil && f.matters(h)
}

func (f *cqlFramer) envelope(b []byte) (cqlUnit, bool) {
	var h cqlHeader
	k, n, ok := f.lf.next(b, cqlHeaderLen, func(hb []byte) (int, bool, bool) {
		var ok bool
		h, ok = parseCQLHeader(hb, f.response, false)
		return cqlHeaderLen + h.length, f.wants(h), ok
	})
	switch {
	case !ok:
		return cqlUnit{}, false
	case k == unitOpaque:
		return f.opaque(b)
	case k == unitHead:
		return cqlUnit{n: n, piece: true, head: &h}, true
	case k == unitPiece:
		return cqlUnit{n: n, piece: true}, true
	}
	return cqlUnit{n: n, envs: []cqlEnvelope{{cqlHeader: h, body: b[cqlHeaderLen:n]}}}, true
}
