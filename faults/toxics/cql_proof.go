package toxics

import (
	"sort"
)

// CQL proof of commit: which reply answers an armed write, and whether it proves it.

// replyMatters tells the downstream framer which long replies to buffer whole: all but
// RESULTs nobody waits for (rows of reads).
func (c *cqlConn) replyMatters(h cqlHeader) bool {
	if h.opcode != cqlOpResult {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, watched := c.watch[h.stream]
	_, preparing := c.preparing[h.stream]
	return watched || preparing
}

// ExpectCut implements Conn.
func (c *cqlConn) ExpectCut(p *Pending) bool {
	streams := c.last
	c.last = nil
	if len(streams) != 1 {
		// Several writes in one segment: one reply would not prove the others.
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blind || c.compressed {
		return false
	}
	if _, dup := c.watch[streams[0]]; dup {
		return false
	}
	c.watch[streams[0]] = p
	return true
}

// Reply implements Conn.
func (c *cqlConn) Reply(b []byte) (int, Verdict) {
	if c.down.phase != cqlOpaque {
		c.mu.Lock()
		if c.compressed {
			c.down.phase = cqlOpaque
		}
		c.mu.Unlock()
	}
	u, ok := c.down.next(b)
	if !ok {
		return 0, Verdict{}
	}
	if u.opaque {
		c.goBlind()
		return u.n, c.nextRelease()
	}
	if u.head != nil {
		// Too long to judge: whatever it answers is not a proof.
		if p := c.answered(u.head.stream); p != nil {
			c.released = append(c.released, p)
		}
	}
	var cut *Pending
	var tag string
	for i := range u.envs {
		e := &u.envs[i]
		switch e.opcode {
		case cqlOpReady, cqlOpAuthenticate:
			if c.down.phase == cqlEnvelopes && e.version == 5 {
				c.mu.Lock()
				if c.v5 && !c.framed {
					c.framed = true
					c.down.phase = cqlSegments
				}
				c.mu.Unlock()
			}
		case cqlOpEvent:
			// Pushed by the server (stream -1): not a reply.
			continue
		}
		if e.stream < 0 {
			continue
		}
		c.mu.Lock()
		stmt, preparing := c.preparing[e.stream]
		delete(c.preparing, e.stream)
		p := c.watch[e.stream]
		delete(c.watch, e.stream)
		c.mu.Unlock()
		if preparing && e.opcode == cqlOpResult {
			if id, ok := cqlPreparedID(e); ok {
				c.ids.put(id, stmt)
			}
		}
		if p == nil {
			continue
		}
		if t, ok := cqlProof(e); ok && cut == nil {
			cut, tag = p, t
		} else {
			c.released = append(c.released, p)
		}
	}
	if cut != nil {
		return u.n, Verdict{Action: Cut, Pending: cut, Tag: tag}
	}
	return u.n, c.nextRelease()
}

// answered forgets what waited for the reply on stream and returns its armed cut.
func (c *cqlConn) answered(stream int16) *Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.preparing, stream)
	p := c.watch[stream]
	delete(c.watch, stream)
	return p
}

// goBlind: the replies pass through unread from now on, so every armed cut ends.
func (c *cqlConn) goBlind() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.blind = true
	streams := make([]int, 0, len(c.watch))
	for s := range c.watch {
		streams = append(streams, int(s))
	}
	sort.Ints(streams)
	for _, s := range streams {
		c.released = append(c.released, c.watch[int16(s)])
	}
	clear(c.watch)
	clear(c.preparing)
}

// nextRelease hands back one armed cut that ended without a commit. Replies are never
// held, so Release forwards the bytes just as Pass does; a unit that ended several cuts
// hands them back over the following calls (and the session returns any left when the
// connection ends).
func (c *cqlConn) nextRelease() Verdict {
	if len(c.released) == 0 {
		return Verdict{}
	}
	p := c.released[0]
	c.released[0] = nil
	c.released = c.released[1:]
	return Verdict{Action: Release, Pending: p}
}

// cqlReplyBody returns a reader at the message of a reply, past the tracing id, the
// warnings and the custom payload its flags announce; false if it cannot be read.
func cqlReplyBody(e *cqlEnvelope) (*cqlReader, bool) {
	if e.version < 5 && e.flags&cqlFlagCompressed != 0 {
		return nil, false
	}
	r := &cqlReader{b: e.body}
	if e.flags&cqlFlagTracing != 0 {
		r.take(16)
	}
	if e.flags&cqlFlagWarning != 0 {
		r.stringList()
	}
	if e.flags&cqlFlagCustomPayload != 0 {
		r.bytesMap()
	}
	return r, !r.bad
}

// cqlProof tells whether the reply to a write proves that it was applied, with the
// tag that says how.
func cqlProof(e *cqlEnvelope) (string, bool) {
	if e.opcode != cqlOpResult {
		return "", false
	}
	r, ok := cqlReplyBody(e)
	if !ok {
		return "", false
	}
	switch r.int32() {
	case cqlResultVoid:
		return "RESULT Void", !r.bad
	case cqlResultSchemaChange:
		return "RESULT Schema_change", !r.bad
	case cqlResultRows:
		if cqlApplied(r, e.version) {
			return "RESULT Rows [applied]=true", true
		}
	}
	return "", false
}

// cqlApplied reads a Rows result and reports whether its first row's first column, a
// lightweight transaction's [applied], is true. Anything else, or anything unreadable,
// is false: only a proven write is cut.
func cqlApplied(r *cqlReader, version byte) bool {
	const (
		globalSpec   = 0x0001
		morePages    = 0x0002
		noMetadata   = 0x0004
		metaChanged  = 0x0008
		appliedLabel = "[applied]"
	)
	flags := r.int32()
	cols := r.int32()
	if r.bad || cols < 1 {
		return false
	}
	if flags&morePages != 0 {
		r.bytes()
	}
	if version >= 5 && flags&metaChanged != 0 {
		r.shortBytes()
	}
	if flags&noMetadata == 0 {
		if flags&globalSpec != 0 {
			r.str()
			r.str()
		}
		for i := int32(0); i < cols && !r.bad; i++ {
			if flags&globalSpec == 0 {
				r.str()
				r.str()
			}
			name := r.str()
			if i == 0 && name != appliedLabel {
				return false
			}
			r.option(0)
		}
	}
	if rows := r.int32(); r.bad || rows < 1 {
		return false
	}
	v, ok := r.bytes()
	return ok && len(v) == 1 && v[0] != 0
}
