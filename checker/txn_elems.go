package checker

// elemTable maps (key, value) to what the list-append checker knows of that element:
// which transaction appended it and where it stands in the key's version order. The
// entries live in an arena and keep their index for good, so that what refers to an
// element (an append micro-op, a position of a key's list) holds the index and never
// looks it up again; an open-addressing hash table of indices finds an element by its
// key and value. A Go map of the same entries takes about three times the memory and
// twice the time on histories of millions of appends.
type elemTable struct {
	entries []elemEntry
	slots   []int32 // index+1 of an indexed entry; 0 for an empty slot
	indexed int
}

// elemEntry is one element.
type elemEntry struct {
	elem   int64
	key    uint32
	pos    int32 // position in the key's version order; -1 when not in it
	writer int32 // transaction that appended it; -1 when none did
	im     int32 // a transaction that appended it and then appended to the key again; -1 if none
}

// elemHash mixes the key and all but the low six bits of the element, and adds those
// bits back unmixed: the elements of a key that are close together, as the values a
// history appends or writes to one key mostly are, are then in neighbouring slots, a
// cache line or two rather than one each, while any other elements spread as well as
// before.
func elemHash(key uint32, elem int64) uint64 {
	h := uint64(elem>>6)*0x9e3779b97f4a7c15 ^ uint64(key)*0xc2b2ae3d27d4eb4f
	return (h ^ h>>29) + uint64(elem&63)
}

// get returns the index of (key, elem)'s entry, or -1.
func (t *elemTable) get(key uint32, elem int64) int32 {
	if len(t.slots) == 0 {
		return -1
	}
	mask := uint64(len(t.slots) - 1)
	for i := elemHash(key, elem) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == 0 {
			return -1
		}
		if e := &t.entries[s-1]; e.key == key && e.elem == elem {
			return s - 1
		}
	}
}

// add appends an entry for (key, elem), without indexing it, and returns its index.
func (t *elemTable) add(key uint32, elem int64) int32 {
	t.entries = grown(t.entries, 1)
	t.entries = append(t.entries, elemEntry{elem: elem, key: key, pos: -1, writer: -1, im: -1})
	return int32(len(t.entries) - 1)
}

// index makes entry ei found by get.
func (t *elemTable) index(ei int32) {
	if 2*(t.indexed+1) > len(t.slots) {
		t.grow()
	}
	t.put(ei)
	t.indexed++
}

func (t *elemTable) put(ei int32) {
	mask := uint64(len(t.slots) - 1)
	e := &t.entries[ei]
	i := elemHash(e.key, e.elem) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = ei + 1
}

func (t *elemTable) grow() {
	t.resize(max(1024, 2*len(t.slots)))
}

// reserve sizes the index for n entries at once, rather than doubling it as they come.
func (t *elemTable) reserve(n int) {
	if 2*n > len(t.slots) {
		size := 1024
		for size < 2*n {
			size *= 2
		}
		t.resize(size)
	}
}

// resize makes the index size slots, a power of two, and indexes every entry again.
func (t *elemTable) resize(size int) {
	old := t.slots
	t.slots = make([]int32, size)
	for _, s := range old {
		if s != 0 {
			t.put(s - 1)
		}
	}
}
