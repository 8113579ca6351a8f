package toxics

import (
	"encoding/binary"
)

// The notations of CQL message bodies ([short], [string], [bytes], [option] ...), read
// without ever reading past the body.

// cqlReader reads the protocol's notations from a body; any shortfall sets bad.
type cqlReader struct {
	b   []byte
	bad bool
}

func (r *cqlReader) take(n int) []byte {
	if r.bad || n < 0 || n > len(r.b) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *cqlReader) byte1() byte {
	if v := r.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (r *cqlReader) short() int {
	if v := r.take(2); v != nil {
		return int(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (r *cqlReader) int32() int32 {
	if v := r.take(4); v != nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (r *cqlReader) str() string { return string(r.take(r.short())) }

func (r *cqlReader) longString() string {
	n := r.int32()
	if n < 0 {
		r.bad = true
		return ""
	}
	return string(r.take(int(n)))
}

func (r *cqlReader) shortBytes() []byte { return r.take(r.short()) }

// bytes reads [bytes]; nil with ok for null.
func (r *cqlReader) bytes() ([]byte, bool) {
	n := r.int32()
	if r.bad {
		return nil, false
	}
	if n < 0 {
		return nil, true
	}
	v := r.take(int(n))
	return v, !r.bad
}

// value skips a [value]: bytes, null (-1) or not set (-2).
func (r *cqlReader) value() {
	n := r.int32()
	switch {
	case n >= 0:
		r.take(int(n))
	case n < -2:
		r.bad = true
	}
}

func (r *cqlReader) stringList() {
	for n := r.short(); n > 0 && !r.bad; n-- {
		r.str()
	}
}

func (r *cqlReader) bytesMap() {
	for n := r.short(); n > 0 && !r.bad; n-- {
		r.str()
		r.bytes()
	}
}

// option skips a type [option], nested types included.
func (r *cqlReader) option(depth int) {
	if depth > 64 {
		r.bad = true
		return
	}
	switch id := r.short(); {
	case r.bad:
	case id == 0x0000: // custom: class name
		r.str()
	case id >= 0x0001 && id <= 0x0015: // native types
	case id == 0x0020 || id == 0x0022: // list, set
		r.option(depth + 1)
	case id == 0x0021: // map
		r.option(depth + 1)
		r.option(depth + 1)
	case id == 0x0030: // UDT: keyspace, name, fields
		r.str()
		r.str()
		for n := r.short(); n > 0 && !r.bad; n-- {
			r.str()
			r.option(depth + 1)
		}
	case id == 0x0031: // tuple
		for n := r.short(); n > 0 && !r.bad; n-- {
			r.option(depth + 1)
		}
	default:
		r.bad = true
	}
}
