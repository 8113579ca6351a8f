package toxics

import (
	"encoding/binary"
	"hash/crc32"
)

// CQL v5 segments: checksummed frames that carry envelopes once a v5 handshake is
// done. A self-contained segment holds whole envelopes; a longer envelope spans several.

// segHeader checks the segment header at the start of b (at least 6 bytes).
func segHeader(b []byte) (payload int, selfContained, ok bool) {
	v := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
	crc := uint32(b[3]) | uint32(b[4])<<8 | uint32(b[5])<<16
	if cqlCRC24(v) != crc {
		return 0, false, false
	}
	return int(v & cqlMaxPayload), v&(1<<17) != 0, true
}

// segPayloadOK checks the CRC32 trailer of a whole segment of payload length n.
func segPayloadOK(seg []byte, n int) bool {
	p := seg[cqlSegHeader : cqlSegHeader+n]
	return cqlCRC32(p) == binary.LittleEndian.Uint32(seg[cqlSegHeader+n:])
}

func (f *cqlFramer) segment(b []byte) (cqlUnit, bool) {
	if f.gathering {
		return f.gather(b)
	}
	if len(b) < cqlSegHeader {
		return cqlUnit{}, false
	}
	plen, self, ok := segHeader(b)
	if !ok {
		return f.opaque(b)
	}
	size := cqlSegHeader + plen + cqlSegTrailer
	if len(b) < size {
		return cqlUnit{}, false
	}
	if !segPayloadOK(b, plen) {
		return f.opaque(b)
	}
	payload := b[cqlSegHeader : cqlSegHeader+plen]
	if f.chain > 0 {
		if self || plen > f.chain {
			return f.opaque(b)
		}
		f.chain -= plen
		return cqlUnit{n: size, piece: true}, true
	}
	if self {
		var envs []cqlEnvelope
		for p := payload; len(p) > 0; {
			if len(p) < cqlHeaderLen {
				return f.opaque(b)
			}
			h, ok := parseCQLHeader(p, f.response, true)
			if !ok || cqlHeaderLen+h.length > len(p) {
				return f.opaque(b)
			}
			envs = append(envs, cqlEnvelope{cqlHeader: h, body: p[cqlHeaderLen : cqlHeaderLen+h.length]})
			p = p[cqlHeaderLen+h.length:]
		}
		return cqlUnit{n: size, envs: envs}, true
	}
	// The first segment of an envelope too long for one: it holds that envelope's
	// start and nothing else.
	if plen < cqlHeaderLen {
		return f.opaque(b)
	}
	h, ok := parseCQLHeader(payload, f.response, true)
	if !ok {
		return f.opaque(b)
	}
	total := cqlHeaderLen + h.length
	if total <= plen {
		return f.opaque(b)
	}
	if streams(total, f.wants(h)) {
		f.chain = total - plen
		return cqlUnit{n: size, piece: true, head: &h}, true
	}
	f.gathering = true
	f.gHead, f.gTotal, f.gScanned, f.gGot = h, total, size, plen
	return f.gather(b)
}

// gather consumes the segments of one long envelope whole, once all have arrived.
func (f *cqlFramer) gather(b []byte) (cqlUnit, bool) {
	for f.gGot < f.gTotal {
		rest := b[f.gScanned:]
		if len(rest) < cqlSegHeader {
			return cqlUnit{}, false
		}
		plen, self, ok := segHeader(rest)
		if !ok || self || plen > f.gTotal-f.gGot {
			return f.opaque(b)
		}
		size := cqlSegHeader + plen + cqlSegTrailer
		if len(rest) < size {
			return cqlUnit{}, false
		}
		if !segPayloadOK(rest, plen) {
			return f.opaque(b)
		}
		f.gScanned += size
		f.gGot += plen
	}
	body := make([]byte, 0, f.gTotal-cqlHeaderLen)
	skip := cqlHeaderLen
	for off := 0; off < f.gScanned; {
		plen, _, _ := segHeader(b[off:])
		p := b[off+cqlSegHeader : off+cqlSegHeader+plen]
		if skip > 0 {
			p = p[skip:]
			skip = 0
		}
		body = append(body, p...)
		off += cqlSegHeader + plen + cqlSegTrailer
	}
	u := cqlUnit{n: f.gScanned, envs: []cqlEnvelope{{cqlHeader: f.gHead, body: body}}}
	f.gathering = false
	f.gScanned, f.gGot, f.gTotal = 0, 0, 0
	return u, true
}

// cqlCRC24 is the v5 segment header's checksum of the 3 header bytes (as a
// little-endian integer): CRC24 with polynomial 0x1974F0B and initial value 0x875060,
// fed the least significant byte first.
func cqlCRC24(v uint32) uint32 {
	crc := uint32(0x875060)
	for i := 0; i < 3; i++ {
		crc ^= (v & 0xff) << 16
		v >>= 8
		for j := 0; j < 8; j++ {
			crc <<= 1
			if crc&0x1000000 != 0 {
				crc ^= 0x1974F0B
			}
		}
	}
	return crc & 0xffffff
}

// cqlCRC32Seed is the IEEE CRC32 state after the four bytes Cassandra feeds before
// every payload (the protocol specification does not mention them).
var cqlCRC32Seed = crc32.ChecksumIEEE([]byte{0xfa, 0x2d, 0x55, 0xca})

func cqlCRC32(p []byte) uint32 { return crc32.Update(cqlCRC32Seed, crc32.IEEETable, p) }
