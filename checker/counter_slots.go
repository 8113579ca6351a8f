package checker

import (
	"encoding/binary"
	"slices"
)

// counterRec gathers what the operations say about one slot: the acknowledged
// increments that wrote its value, and the reads that bound when it took effect. Each
// operation is kept by value, as the explanations name it.
type counterRec struct {
	claims int64     // acknowledged increments that wrote this slot's value
	first  counterOp // the first of them, in completion order
	more   *counterClaims
	reads  *counterReads
}

// counterClaims are the claims on a slot beyond the first: a lost update.
type counterClaims struct {
	listed []counterOp // the second and later, up to counterMaxOps in all with first
	// The lenient stand-in for the slot's claims (the loss is reported once, not again
	// as an ordering violation): the claim invoked first, and the one completed last.
	rel, dl counterOp
}

// counterReads are the reads that bound a slot k: of those that returned k - 1 (so k
// took effect after they began), the one invoked last; of those that returned k (so k
// took effect before they completed), the one completed first.
type counterReads struct {
	rel, dl       counterOp
	hasRel, hasDl bool
}

// claim adds an acknowledged increment that wrote the slot's value.
func (r *counterRec) claim(o *counterOp) {
	r.claims++
	if r.claims == 1 {
		r.first = *o
		return
	}
	if r.more == nil {
		r.more = &counterClaims{rel: r.first, dl: r.first}
	}
	m := r.more
	if len(m.listed)+1 < counterMaxOps {
		m.listed = append(m.listed, *o)
	}
	if o.inv < m.rel.inv {
		m.rel = *o
	}
	if o.ret > m.dl.ret {
		m.dl = *o
	}
}

// readBelow adds a read that returned the value just below the slot's.
func (r *counterRec) readBelow(o *counterOp) {
	if r.reads == nil {
		r.reads = &counterReads{}
	}
	if !r.reads.hasRel || o.inv > r.reads.rel.inv {
		r.reads.rel, r.reads.hasRel = *o, true
	}
}

// readAt adds a read that returned the slot's value.
func (r *counterRec) readAt(o *counterOp) {
	if r.reads == nil {
		r.reads = &counterReads{}
	}
	if !r.reads.hasDl || o.ret < r.reads.dl.ret {
		r.reads.dl, r.reads.hasDl = *o, true
	}
}

// claimRel and claimDl are the claims that bound the slot (claims >= 1): the one
// invoked first and the one completed last.
func (r *counterRec) claimRel() *counterOp {
	if r.more != nil {
		return &r.more.rel
	}
	return &r.first
}

func (r *counterRec) claimDl() *counterOp {
	if r.more != nil {
		return &r.more.dl
	}
	return &r.first
}

// listed calls fn on the claims a lost-update explanation names, in completion order.
func (r *counterRec) listed(fn func(o *counterOp)) {
	if r.claims == 0 {
		return
	}
	fn(&r.first)
	if r.more != nil {
		for i := range r.more.listed {
			fn(&r.more.listed[i])
		}
	}
}

// merge adds b, whose operations all completed after r's, to r.
func (r *counterRec) merge(b *counterRec) {
	if b.claims > 0 {
		if r.claims == 0 {
			r.claims, r.first, r.more = b.claims, b.first, b.more
		} else {
			var stand counterClaims
			stand.rel, stand.dl = *r.claimRel(), *r.claimDl()
			if r.more != nil {
				stand.listed = r.more.listed
			}
			b.listed(func(o *counterOp) {
				if len(stand.listed)+1 < counterMaxOps {
					stand.listed = append(stand.listed, *o)
				}
			})
			if o := b.claimRel(); o.inv < stand.rel.inv {
				stand.rel = *o
			}
			if o := b.claimDl(); o.ret > stand.dl.ret {
				stand.dl = *o
			}
			r.claims += b.claims
			r.more = &stand
		}
	}
	if b.reads != nil {
		if b.reads.hasRel {
			r.readBelow(&b.reads.rel)
		}
		if b.reads.hasDl {
			r.readAt(&b.reads.dl)
		}
	}
}

// counterSlots holds the slots by number, for a history read as a stream. The slots
// near the highest one touched so far sit in a window; below it they are frozen,
// written out in slot order to a spillLog, so that memory stays flat however many
// increments the history holds. An operation that still touches a frozen slot (one that
// completed long after others had gone past its value) is kept beside it, in late, and
// merged with it when the slots are walked at the end; a slot far above the window
// (only an invalid history's outlandish values reach one) waits in far until the
// window reaches it.
type counterSlots struct {
	before int64
	lo     int64        // the window's first slot; every slot from 1 below it is frozen
	win    []counterRec // win[head+i] is slot lo+i
	head   int
	late   map[int64]*counterRec
	far    map[int64]*counterRec
	log    spillLog
	empty  int64 // frozen slots without a record, not yet written out
	enc    counterCodec
}

// counterWindow is how many slots the window holds before it freezes the lowest;
// counterReach how far above it a slot may be and still extend it.
var (
	counterWindow = 1 << 13
	counterReach  = int64(1 << 16)
)

func newCounterSlots(before int64) *counterSlots {
	return &counterSlots{before: before, lo: 1}
}

// top is the first slot above the window.
func (s *counterSlots) top() int64 { return s.lo + int64(len(s.win)-s.head) }

// at returns the record of slot k >= 1, creating it empty. It is valid until the next
// call.
func (s *counterSlots) at(k int64) *counterRec {
	top := s.top()
	switch {
	case k < s.lo:
		return mapRec(&s.late, k)
	case k < top:
		return &s.win[s.head+int(k-s.lo)]
	case k-top >= counterReach:
		return mapRec(&s.far, k)
	}
	for j := top; j <= k; j++ {
		var r counterRec
		if len(s.far) > 0 {
			if f, ok := s.far[j]; ok {
				r = *f
				delete(s.far, j)
			}
		}
		s.win = append(s.win, r)
	}
	for len(s.win)-s.head > counterWindow {
		s.freeze()
	}
	return &s.win[s.head+int(k-s.lo)]
}

func mapRec(m *map[int64]*counterRec, k int64) *counterRec {
	if *m == nil {
		*m = map[int64]*counterRec{}
	}
	r, ok := (*m)[k]
	if !ok {
		r = &counterRec{}
		(*m)[k] = r
	}
	return r
}

// freeze writes the window's lowest slot out.
func (s *counterSlots) freeze() {
	r := &s.win[s.head]
	if r.claims == 0 && r.reads == nil {
		s.empty++
	} else {
		if s.empty > 0 {
			s.log.buf = append(s.log.buf, recEmpty)
			s.log.buf = binary.AppendUvarint(s.log.buf, uint64(s.empty))
			s.empty = 0
		}
		s.log.buf = s.enc.appendRec(s.log.buf, r, s.before+s.lo)
		s.log.record()
		*r = counterRec{}
	}
	s.head++
	s.lo++
	if s.head >= 1024 && s.head >= len(s.win)/2 {
		n := copy(s.win, s.win[s.head:])
		clear(s.win[n:])
		s.win, s.head = s.win[:n], 0
	}
}

// each walks the slots 1..k in order, calling fn on every slot that has a record
// and, while gaps says so, with nil on the slots between (slots no operation touched).
// It errs when the frozen slots cannot be read back.
func (s *counterSlots) each(k int64, gaps func() bool, fn func(k int64, r *counterRec)) error {
	next := int64(1) // the first slot not yet walked
	done := false
	emit := func(j int64, r *counterRec) {
		if done || j > k {
			done = true
			return
		}
		for ; next < j && gaps(); next++ {
			fn(next, nil)
		}
		fn(j, r)
		next = j + 1
	}
	lateKeys := sortedKeys(s.late)
	li := 0
	var dec counterCodec
	var r counterRec
	slot := int64(1)
	err := s.log.each(func(chunk []byte) error {
		in := spillReader{b: chunk}
		for len(in.b) > 0 && !done {
			if in.b[0] == recEmpty {
				in.byte()
				slot += int64(in.uvarint())
				if in.err != nil {
					return in.err
				}
				continue
			}
			dec.readRec(&in, &r, s.before+slot)
			if in.err != nil {
				return in.err
			}
			for ; li < len(lateKeys) && lateKeys[li] < slot; li++ {
				emit(lateKeys[li], s.late[lateKeys[li]])
			}
			if li < len(lateKeys) && lateKeys[li] == slot {
				r.merge(s.late[slot])
				li++
			}
			emit(slot, &r)
			slot++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for ; li < len(lateKeys); li++ {
		emit(lateKeys[li], s.late[lateKeys[li]])
	}
	for i := s.head; i < len(s.win); i++ {
		if r := &s.win[i]; r.claims > 0 || r.reads != nil {
			emit(s.lo+int64(i-s.head), r)
		}
	}
	for _, j := range sortedKeys(s.far) {
		emit(j, s.far[j])
	}
	for ; !done && next <= k && gaps(); next++ {
		fn(next, nil)
	}
	return nil
}

func sortedKeys(m map[int64]*counterRec) []int64 {
	keys := make([]int64, 0, len(m))
	for j := range m {
		keys = append(keys, j)
	}
	slices.Sort(keys)
	return keys
}

func (s *counterSlots) close() { s.log.close() }

// counterCodec writes and reads frozen slot records. Indices are written as differences
// from the last one written, values as differences from the slot's own, positions as
// differences from their indices: a few bytes each in an ordinary history.
type counterCodec struct {
	index int64 // the last invocation index written or read
}

const (
	recClaimed byte = 1 << iota
	recMore
	recReadRel
	recReadDl
	recEmpty // alone: a run of slots without a record, its length next
)

// appendRec appends r, the record of the slot whose value is v.
func (c *counterCodec) appendRec(b []byte, r *counterRec, v int64) []byte {
	var flags byte
	if r.claims > 0 {
		flags |= recClaimed
	}
	if r.more != nil {
		flags |= recMore
	}
	if r.reads != nil && r.reads.hasRel {
		flags |= recReadRel
	}
	if r.reads != nil && r.reads.hasDl {
		flags |= recReadDl
	}
	b = append(b, flags)
	if r.claims > 0 {
		b = c.appendOp(b, &r.first, v)
	}
	if r.more != nil {
		b = binary.AppendUvarint(b, uint64(r.claims))
		b = binary.AppendUvarint(b, uint64(len(r.more.listed)))
		for i := range r.more.listed {
			b = c.appendOp(b, &r.more.listed[i], v)
		}
		b = c.appendOp(b, &r.more.rel, v)
		b = c.appendOp(b, &r.more.dl, v)
	}
	if flags&recReadRel != 0 {
		b = c.appendOp(b, &r.reads.rel, v)
	}
	if flags&recReadDl != 0 {
		b = c.appendOp(b, &r.reads.dl, v)
	}
	return b
}

// readRec reads into r what appendRec wrote for the slot whose value is v.
func (c *counterCodec) readRec(in *spillReader, r *counterRec, v int64) {
	*r = counterRec{}
	flags := in.byte()
	if flags&recClaimed != 0 {
		r.claims = 1
		c.readOp(in, &r.first, v)
	}
	if flags&recMore != 0 {
		m := &counterClaims{}
		r.claims = int64(in.uvarint())
		n := in.uvarint()
		if n >= counterMaxOps || r.claims < 2 {
			in.fail()
			return
		}
		m.listed = make([]counterOp, n)
		for i := range m.listed {
			c.readOp(in, &m.listed[i], v)
		}
		c.readOp(in, &m.rel, v)
		c.readOp(in, &m.dl, v)
		r.more = m
	}
	if flags&(recReadRel|recReadDl) != 0 {
		r.reads = &counterReads{}
		if flags&recReadRel != 0 {
			r.reads.hasRel = true
			c.readOp(in, &r.reads.rel, v)
		}
		if flags&recReadDl != 0 {
			r.reads.hasDl = true
			c.readOp(in, &r.reads.dl, v)
		}
	}
}

const (
	opRead byte = 1 << iota
	opHasReadVal
	opDone // completed: retIndex and ret are its own
	opHasID
)

// appendOp appends o, of the slot whose value is v. Differences wrap as int64
// arithmetic does, and unwrap alike when read.
func (c *counterCodec) appendOp(b []byte, o *counterOp, v int64) []byte {
	flags := byte(o.kind) << 4
	if o.read {
		flags |= opRead
	}
	if o.hasReadVal {
		flags |= opHasReadVal
	}
	if o.retIndex >= 0 {
		flags |= opDone
	}
	if o.opID != "" {
		flags |= opHasID
	}
	b = append(b, flags)
	if o.opID != "" {
		b = binary.AppendUvarint(b, uint64(len(o.opID)))
		b = append(b, o.opID...)
	}
	b = binary.AppendVarint(b, int64(o.process))
	b = binary.AppendVarint(b, o.invIndex-c.index)
	c.index = o.invIndex
	b = binary.AppendVarint(b, o.invIndex-o.inv)
	if o.retIndex >= 0 {
		b = binary.AppendVarint(b, o.retIndex-o.invIndex)
		b = binary.AppendVarint(b, o.retIndex-o.ret)
	} else {
		b = binary.AppendVarint(b, o.retIndex)
		b = binary.AppendVarint(b, o.ret)
	}
	b = binary.AppendVarint(b, o.value-v)
	if o.hasReadVal {
		b = binary.AppendVarint(b, o.readVal-o.value)
	}
	return b
}

// readOp reads into o what appendOp wrote.
func (c *counterCodec) readOp(in *spillReader, o *counterOp, v int64) {
	flags := in.byte()
	*o = counterOp{kind: counterKind(flags >> 4), read: flags&opRead != 0, hasReadVal: flags&opHasReadVal != 0}
	if flags&opHasID != 0 {
		o.opID = string(in.bytes(in.uvarint()))
	}
	o.process = int(in.varint())
	o.invIndex = c.index + in.varint()
	c.index = o.invIndex
	o.inv = o.invIndex - in.varint()
	if flags&opDone != 0 {
		o.retIndex = o.invIndex + in.varint()
		o.ret = o.retIndex - in.varint()
	} else {
		o.retIndex = in.varint()
		o.ret = in.varint()
	}
	o.value = v + in.varint()
	if o.hasReadVal {
		o.readVal = o.value + in.varint()
	}
}
