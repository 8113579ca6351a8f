package checker

import "encoding/binary"

// txnScan reads the values of a transactional history's events as histories.Reader
// reads the lines (it is the Reader's ValueReader), straight into the micro-ops of the
// batch being decoded. Without it each value is parsed twice: the Reader checks that
// it is JSON and copies it, and txnDecoder parses the copy again; on a history of
// millions of transactions the first reading alone took a third of the check.
//
// It reads only the form indoubt's workloads and scripts/txngen write: an array of
// micro-ops over integer keys and values, without spaces,
//
//	[["append",3,7],["r",4,[1,2,5]],["w",5,9],["r",6,null],["r",7,2]]
//
// or null, and only values that txnDecoder decodes without error. Anything else it
// declines, and the Reader and txnDecoder read it as they always did: what it accepts
// is valid JSON, and decodes to exactly the micro-ops txnDecoder gives the same bytes
// (FuzzTxnScan holds the two together). It interns nothing while it reads: a line can
// still be refused after its value, and an invocation's value is decoded only if its
// transaction ends without a value of its own, so the keys are interned (commit) only
// once txnPrep knows the value is one txnDecoder would have decoded, in the same order.
type txnScan struct {
	val *txnValue // the staged micro-ops go at the end of its mops and list
	// The value read last, staged: its micro-ops are val.mops[m0:], their keys in
	// rawKey, not interned yet, and their list elements val.list[l0:].
	staged bool
	m0, l0 int
	null   bool   // the value was null
	raw    []byte // its bytes, valid until the Reader reads its next line
}

// ReadValue implements histories.ValueReader.
func (s *txnScan) ReadValue(b []byte) (int, bool) {
	s.discard()
	d := s.val
	s.m0, s.l0, s.null = len(d.mops), len(d.list), false
	n, ok := s.scan(b)
	if !ok {
		d.mops, d.list = d.mops[:s.m0], d.list[:s.l0]
		return 0, false
	}
	s.staged, s.raw = true, b[:n]
	return n, true
}

// discard drops the staged value's micro-ops.
func (s *txnScan) discard() {
	if s.staged {
		s.val.mops, s.val.list = s.val.mops[:s.m0], s.val.list[:s.l0]
		s.staged = false
	}
}

// keep keeps the staged micro-ops, val.mops[mop:mop+n], for txnPrep.commit; null says
// the value was null.
func (s *txnScan) keep() (mop, n int32, null bool) {
	s.staged = false
	return int32(s.m0), int32(len(s.val.mops) - s.m0), s.null
}

// scan reads a value at the start of b, appending its micro-ops to s.dec, and returns
// its length; false for anything outside the form it reads.
func (s *txnScan) scan(b []byte) (int, bool) {
	if isNull(b, 0) {
		s.null = true
		return 4, true
	}
	if len(b) < 2 || b[0] != '[' {
		return 0, false
	}
	if b[1] == ']' {
		return 2, true
	}
	d := s.val
	i := 1
	for {
		// A micro-op: ["append",k,v], ["w",k,v], or ["r",k,x] with x null, a list of
		// integers or an integer.
		var m rawMop
		if len(b)-i < 6 || b[i] != '[' || b[i+1] != '"' {
			return 0, false
		}
		switch {
		case b[i+2] == 'r' && b[i+3] == '"' && b[i+4] == ',':
			m.kind, i = mopRead, i+5
		case b[i+2] == 'w' && b[i+3] == '"' && b[i+4] == ',':
			m.kind, i = mopWrite, i+5
		case len(b)-i >= 10 && binary.LittleEndian.Uint64(b[i:]) == wordAppend && b[i+8] == '"' && b[i+9] == ',':
			m.kind, i = mopAppend, i+10
		default:
			return 0, false
		}
		k, j, ok := scanNum(b, i)
		if !ok || j >= len(b) || b[j] != ',' {
			return 0, false
		}
		i = j + 1
		if i >= len(b) {
			return 0, false
		}
		switch {
		case m.kind != mopRead:
			if m.val, i, ok = scanNum(b, i); !ok {
				return 0, false
			}
			m.hasValue = true
		case b[i] == 'n':
			if !isNull(b, i) {
				return 0, false
			}
			m.val, i = valueNil, i+4
		case b[i] == '[':
			m.hasValue, m.isList, m.list = true, true, len(d.list)
			i++
			if i < len(b) && b[i] == ']' {
				i++
				break
			}
			// The elements of a read are most of a history's bytes: a small
			// non-negative one is read here, anything else by scanInt, into a list
			// held in a local until the end (the batch's, through d, would be
			// stored back at every element).
			list := d.list
			for {
				// Most elements are one or two digits long: those are read at once.
				if len(b)-i >= 3 {
					c0, c1 := b[i]-'0', b[i+1]
					switch {
					case c0 <= 9 && (c1 == ',' || c1 == ']'):
						list = append(list, int64(c0))
						i += 2
						if c1 == ']' {
							goto end
						}
						continue
					case c0-1 <= 8 && c1-'0' <= 9 && (b[i+2] == ',' || b[i+2] == ']'):
						list = append(list, int64(c0)*10+int64(c1-'0'))
						i += 3
						if b[i-1] == ']' {
							goto end
						}
						continue
					}
				}
				var v int64
				start := i
				for i < len(b) {
					c := b[i] - '0'
					if c > 9 {
						break
					}
					v = v*10 + int64(c)
					i++
				}
				if n := i - start; n == 0 || n > 18 || n > 1 && b[start] == '0' {
					if v, i, ok = scanInt(b, start); !ok {
						return 0, false
					}
				}
				if i >= len(b) {
					return 0, false
				}
				list = append(list, v)
				if b[i] == ']' {
					i++
					break
				}
				if b[i] != ',' {
					return 0, false
				}
				i++
			}
		end:
			m.len = len(list) - m.list
			d.list = list
		default:
			if m.val, i, ok = scanNum(b, i); !ok {
				return 0, false
			}
			m.hasValue = true
		}
		if i >= len(b) || b[i] != ']' {
			return 0, false
		}
		i++
		m.rawKey = k
		d.mops = append(d.mops, m)
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case ',':
			i++
		case ']':
			return i + 1, true
		default:
			return 0, false
		}
	}
}

// isNull reports whether b holds null at i.
func isNull(b []byte, i int) bool {
	return len(b)-i >= 4 && b[i] == 'n' && b[i+1] == 'u' && b[i+2] == 'l' && b[i+3] == 'l'
}

// wordAppend is `["append` as a little-endian word: compared with a line's 8 bytes at
// once (a comparison of strings called memequal).
var wordAppend = binary.LittleEndian.Uint64([]byte(`["append`))

// scanNum is scanInt, the digits of a non-negative integer, the usual case, read
// without its checks for a sign, an overflow and a leading zero unless needed.
func scanNum(b []byte, i int) (int64, int, bool) {
	var v int64
	start := i
	for i < len(b) {
		c := b[i] - '0'
		if c > 9 {
			break
		}
		v = v*10 + int64(c)
		i++
	}
	if n := i - start; n == 0 || n > 18 || n > 1 && b[start] == '0' {
		return scanInt(b, start)
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, 0, false
	}
	return v, i, true
}

// scanInt reads at b[i] an integer as txnDecoder.plainInt does: an optional minus, one
// to 18 digits without a leading zero, and then neither a digit, a fraction nor an
// exponent; -0 is 0. It returns the integer and the index after it.
func scanInt(b []byte, i int) (int64, int, bool) {
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	start := j
	var n int64
	for j < len(b) && j-start < 18 {
		c := b[j] - '0'
		if c > 9 {
			break
		}
		n = n*10 + int64(c)
		j++
	}
	if j == start || j-start > 1 && b[start] == '0' {
		return 0, 0, false
	}
	if j < len(b) {
		if c := b[j]; c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' {
			return 0, 0, false
		}
	}
	if neg {
		n = -n
	}
	return n, j, true
}
