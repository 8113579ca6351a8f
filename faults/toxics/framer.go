package toxics

import "bytes"

// The framing of the length-prefixed protocols (PostgreSQL, MongoDB, CQL envelopes and
// v5 segments) follows one rule for a long message:
//
//	A message is buffered whole and judged, unless its header says it is longer than
//	maxWhole (64 MiB), or longer than streamAbove (64 KiB) and of a kind that never
//	matters to commit faults. Such a message streams through in pieces as its bytes
//	come, unjudged: never a commit point, never a proof.
//
// The rule reads the header alone, never how much of the message has arrived, so any
// chunking of the same bytes gives the same units. The first bound keeps one huge value
// from pinning memory (a point that large is not judged: it goes through, and its reply
// proves nothing); the second keeps large reads (rows, CopyData, cursor batches) from
// waiting in the proxy before the client sees their first byte. RESP, whose requests
// have no length prefix, frames lines instead, and applies the same maxWhole to the
// requests it buffers.
const (
	streamAbove = 64 << 10
	maxWhole    = 64 << 20
)

// streams applies the rule to a message of total bytes, header included.
func streams(total int, matters bool) bool {
	return total > maxWhole || (!matters && total > streamAbove)
}

// unitKind is what a lengthFramer found at the start of its input.
type unitKind uint8

const (
	unitWhole  unitKind = iota // a whole message
	unitHead                   // the first piece of a streamed message: its header is whole
	unitPiece                  // a later piece of a streamed message
	unitOpaque                 // bytes that do not frame, passed through unparsed
)

// lengthFramer splits one direction of a stream of messages whose header gives their
// length. The protocol reads the header; the framer owns buffering, streaming by the
// rule above, and the switch to pass-through for good when a header does not parse (a
// framer that guessed could cut the wrong reply). The zero value expects a header.
type lengthFramer struct {
	skip   int  // bytes still to pass of a streamed message
	opaque bool // passing everything through, for good
}

// sizer reads a header of the length the framer was asked for: the message's total
// length, header included (at least the header's), whether the message matters (may be
// a point, or a proof), and false if the header does not parse.
type sizer func(header []byte) (total int, matters, ok bool)

// next returns the kind and length of the unit at the start of b, or false if b does
// not yet hold one. header is the length size reads; size is called only with that
// many bytes, and only when a message starts at b.
func (f *lengthFramer) next(b []byte, header int, size sizer) (unitKind, int, bool) {
	switch {
	case len(b) == 0:
		return 0, 0, false
	case f.opaque:
		return unitOpaque, len(b), true
	case f.skip > 0:
		n := min(f.skip, len(b))
		f.skip -= n
		return unitPiece, n, true
	case len(b) < header:
		return 0, 0, false
	}
	total, matters, ok := size(b[:header])
	if !ok || total < header {
		return f.passAll(b)
	}
	if streams(total, matters) {
		n := min(total, len(b))
		f.skip = total - n
		return unitHead, n, true
	}
	if len(b) < total {
		return 0, 0, false
	}
	return unitWhole, total, true
}

// passAll switches the direction to pass-through for good and consumes b.
func (f *lengthFramer) passAll(b []byte) (unitKind, int, bool) {
	f.opaque, f.skip = true, 0
	return unitOpaque, len(b), true
}

// cstring splits a NUL-terminated string off the front of b.
func cstring(b []byte) (string, []byte, bool) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", nil, false
	}
	return string(b[:i]), b[i+1:], true
}
