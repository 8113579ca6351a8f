package toxics

import "encoding/binary"

// MySQL client/server protocol framing (MySQL 4.1 and later, MariaDB), one direction at
// a time.
//
// Both directions carry packets: a 3-byte little-endian payload length, a 1-byte
// sequence id, the payload. A payload of 0xFFFFFF bytes (16 MiB - 1) is continued by the
// next packet, until one shorter: the pieces form one message. The sequence id restarts
// at 0 with every command of the client, and counts the packets of the exchange that
// follows; so in the command phase a packet of the client with sequence id 0 starts a
// command, and one with another id carries data for the current one (a LOCAL INFILE's
// file, an authentication answer).
//
// Long packets follow the rule of framer.go: every request is buffered whole (a packet
// is at most 16 MiB, within maxWhole) and so is every reply up to 64 KiB; a longer reply
// packet (a row) streams through unjudged, as do the continuations of a message longer
// than one packet. The proofs of commit (OK, ERR, EOF packets) are short. Bytes that
// do not frame (TLS after an SSLRequest) switch the direction to pass-through for good.

const (
	myMaxPayload = 0xFFFFFF // a payload this long is continued by the next packet
	myHeader     = 4
)

// myPacket is one unit a myFramer found at the start of its input.
type myPacket struct {
	kind frameKind // frameMessage: a whole packet; framePartial: a piece of a streamed one; frameOpaque
	seq  byte
	body []byte // frameMessage: the payload (aliases the input)
	n    int    // bytes of input the unit covers
	// cont: the packet continues a message begun by a packet of myMaxPayload bytes; it
	// is not a message of its own. For framePartial, set on the first piece only when
	// the whole packet is a continuation.
	cont bool
}

// myFramer splits one direction of a MySQL connection into packets. The zero value (with
// upstream set) is ready for the start of a connection.
type myFramer struct {
	upstream bool
	lf       lengthFramer
	// more: the last packet was myMaxPayload long, so the next one continues it.
	more bool
	// cur: the streamed packet in progress continues a message (cont of its pieces).
	cur bool
}

// next returns the packet at the start of b, or false if b does not yet hold one.
func (f *myFramer) next(b []byte) (myPacket, bool) {
	k, n, ok := f.lf.next(b, myHeader, f.size)
	switch {
	case !ok:
		return myPacket{}, false
	case k == unitOpaque:
		return myPacket{kind: frameOpaque, n: n}, true
	case k == unitPiece:
		return myPacket{kind: framePartial, n: n, cont: f.cur}, true
	}
	size := int(binary.LittleEndian.Uint32([]byte{b[0], b[1], b[2], 0}))
	cont := f.more
	f.more = size == myMaxPayload
	if k == unitHead {
		f.cur = cont
		return myPacket{kind: framePartial, seq: b[3], n: n, cont: cont}, true
	}
	return myPacket{kind: frameMessage, seq: b[3], body: b[myHeader:n], n: n, cont: cont}, true
}

// size reads a packet header: every request matters (it may be a command to judge);
// a reply matters up to streamAbove, past which it can only be a row.
func (f *myFramer) size(h []byte) (int, bool, bool) {
	size := int(binary.LittleEndian.Uint32([]byte{h[0], h[1], h[2], 0}))
	return myHeader + size, f.upstream, true
}

// lenenc reads a length-encoded integer off the front of b: the value, the rest, and
// false if b is too short or starts with a byte that is not an integer's (0xFB is NULL,
// 0xFF an error).
func lenenc(b []byte) (uint64, []byte, bool) {
	if len(b) == 0 {
		return 0, nil, false
	}
	switch c := b[0]; {
	case c < 0xFB:
		return uint64(c), b[1:], true
	case c == 0xFC && len(b) >= 3:
		return uint64(binary.LittleEndian.Uint16(b[1:])), b[3:], true
	case c == 0xFD && len(b) >= 4:
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, b[4:], true
	case c == 0xFE && len(b) >= 9:
		return binary.LittleEndian.Uint64(b[1:]), b[9:], true
	}
	return 0, nil, false
}
