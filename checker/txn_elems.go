package checker

// elemTable maps (key, value) to what the list-append checker knows of that element:
// which transaction appended it and where it stands in the key's version order. It
// is an open-addressing hash table: a Go map of the same entries takes about three
// times the memory and twice the time on histories of millions of appends.
type elemTable struct {
	slots []elemEntry
	n     int
}

// elemEntry is one element. keyPlus1 is 0 in an empty slot.
type elemEntry struct {
	elem     int64
	keyPlus1 uint32
	pos      int32 // position in the key's version order; -1 when not in it
	writer   int32 // transaction that appended it; -1 when none did
	im       int32 // a transaction that appended it and then appended to the key again; -1 if none
}

func elemHash(key uint32, elem int64) uint64 {
	h := uint64(elem)*0x9e3779b97f4a7c15 ^ uint64(key)*0xc2b2ae3d27d4eb4f
	return h ^ h>>29
}

// get returns the entry of (key, elem), or nil.
func (t *elemTable) get(key uint32, elem int64) *elemEntry {
	if len(t.slots) == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := elemHash(key, elem) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.keyPlus1 == 0 {
			return nil
		}
		if s.keyPlus1 == key+1 && s.elem == elem {
			return s
		}
	}
}

// upsert returns the entry of (key, elem), adding an empty one when absent. The
// pointer is valid until the next upsert.
func (t *elemTable) upsert(key uint32, elem int64) *elemEntry {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := uint64(len(t.slots) - 1)
	for i := elemHash(key, elem) & mask; ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.keyPlus1 == 0 {
			*s = elemEntry{elem: elem, keyPlus1: key + 1, pos: -1, writer: -1, im: -1}
			t.n++
			return s
		}
		if s.keyPlus1 == key+1 && s.elem == elem {
			return s
		}
	}
}

func (t *elemTable) grow() {
	old := t.slots
	size := max(1024, 2*len(old))
	t.slots = make([]elemEntry, size)
	mask := uint64(size - 1)
	for _, s := range old {
		if s.keyPlus1 == 0 {
			continue
		}
		i := elemHash(s.keyPlus1-1, s.elem) & mask
		for t.slots[i].keyPlus1 != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}
