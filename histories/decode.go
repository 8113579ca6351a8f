package histories

import (
	"encoding/binary"
	"unicode/utf8"
)

// decodeFast decodes one event line in the plain form the Writer gives it: the exact
// lowercase field names, each at most once, integers of at most 18 digits, strings
// without escapes, a value that is any valid JSON. Anything else, including everything
// that is an error, it declines (ok false) and leaves to encoding/json, whose reading
// it must equal: FuzzDecodeFast holds the two together. encoding/json took most of the
// time of `indoubt check` on a budget history, four fifths of it in reflection and
// per-field work this path does not need. op must be the zero Op; on a decline it may
// have been written to and must be reset.
func decodeFast(b []byte, op *Op) bool {
	var d decoder
	return d.decode(b, op)
}

// decoder is decodeFast with memory across lines: the connection addresses seen, which
// repeat on every line of a worker, so that a Reader allocates each once, and a block
// that small values are copied into, one allocation for many events.
type decoder struct {
	conns map[string]string
	slab  []byte
	// values, when set, reads each value in place of skipValue and the copy into the
	// slab (Reader.Values); taken says it read the last line's.
	values ValueReader
	taken  bool
}

// slabSize is the size of the blocks values are copied into; a value longer than
// slabSize/8 gets an allocation of its own, so that a block is never mostly waste.
const slabSize = 16 << 10

// value returns a copy of v, capped at its length so that appending to it can never
// reach the value copied after it.
func (d *decoder) value(v []byte) []byte {
	if len(v) > slabSize/8 {
		return append([]byte(nil), v...)
	}
	if len(d.slab)+len(v) > cap(d.slab) {
		d.slab = make([]byte, 0, slabSize)
	}
	n := len(d.slab)
	d.slab = append(d.slab, v...)
	return d.slab[n : n+len(v) : n+len(v)]
}

// maxConns bounds the addresses a decoder keeps; past it, each is allocated again.
const maxConns = 4096

func (d *decoder) conn(s []byte) string {
	if c, ok := d.conns[string(s)]; ok {
		return c
	}
	c := string(s)
	if len(d.conns) < maxConns {
		if d.conns == nil {
			d.conns = map[string]string{}
		}
		d.conns[c] = c
	}
	return c
}

func (d *decoder) decode(b []byte, op *Op) bool {
	d.taken = false
	var seen uint16
	// after says i is after a field's value, where a comma or the end comes.
	i, after := written(b, op)
	if after {
		seen = 1<<fIndex | 1<<fTime | 1<<fProcess | 1<<fType | 1<<fF
	} else {
		i = skipSpace(b, 0)
		if i >= len(b) || b[i] != '{' {
			return false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return skipSpace(b, i+1) == len(b)
		}
	}
	for {
		if !after {
			var ok bool
			if i, ok = d.field(b, i, op, &seen); !ok {
				return false
			}
		}
		after = false
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// field reads the field at b[i], its key and value, into op, and returns the index
// after the value; seen records the fields read, each at most once.
func (d *decoder) field(b []byte, i int, op *Op, seen *uint16) (int, bool) {
	f, j := writtenKey(b, i)
	if f < 0 {
		key, j, ok := plainString(b, i)
		if !ok {
			return 0, false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		f = fieldOf(key)
	} else {
		i = j - 1 // the colon
	}
	i = skipSpace(b, i+1)
	if f < 0 || *seen&(1<<f) != 0 {
		// An unknown key may name a field case-insensitively, and a repeated one
		// is resolved by encoding/json's rules: both are left to it.
		return 0, false
	}
	*seen |= 1 << f
	switch f {
	case fIndex, fTime, fProcess, fAttempt:
		n, j, ok := plainInt(b, i)
		if !ok {
			return 0, false
		}
		i = j
		switch f {
		case fIndex:
			op.Index = n
		case fTime:
			op.Time = n
		case fProcess:
			op.Process = int(n)
		case fAttempt:
			op.Attempt = int(n)
		}
	case fValue:
		if d.values != nil {
			if n, ok := d.values.ReadValue(b[i:]); ok && n > 0 && n <= len(b)-i {
				d.taken = true
				return i + n, true
			}
		}
		j, ok := skipValue(b, i, 0)
		if !ok {
			return 0, false
		}
		op.Value = d.value(b[i:j])
		i = j
	default:
		s, j, ok := plainString(b, i)
		if !ok {
			return 0, false
		}
		i = j
		switch f {
		case fType:
			if op.Type, ok = typeNamed(s); !ok {
				return 0, false
			}
		case fF:
			op.F = internF(s)
		case fKey:
			op.Key = string(s)
		case fOpID:
			op.OpID = string(s)
		case fConn:
			op.Conn = d.conn(s)
		case fError:
			op.Error = string(s)
		}
	}
	return i, true
}

// written reads the fields every line the Writer writes begins with, in its order and
// spelling, as one: {"index":N,"time":N,"process":N,"type":"T","f":"F". It returns the
// index after them, having set them in op, or false, having set nothing, for a line
// that begins otherwise, which the field-by-field reading takes. The fields it reads
// are read as that reading reads them (plainInt, plainString, internF). The keys are
// compared 8 bytes at a time: string comparisons with a slice of the line each called
// memequal.
func written(b []byte, op *Op) (int, bool) {
	if word(b, 0) != wIndex || len(b) < 9 || b[8] != ':' {
		return 0, false
	}
	index, i, ok := plainInt(b, 9)
	if !ok || word(b, i) != wTime {
		return 0, false
	}
	t, i, ok := plainInt(b, i+8)
	if !ok || word(b, i) != wProcess || len(b)-i < 11 || b[i+8] != 's' || b[i+9] != '"' || b[i+10] != ':' {
		return 0, false
	}
	p, i, ok := plainInt(b, i+11)
	if !ok || word(b, i) != wType || len(b)-i < 9 || b[i+8] != '"' {
		return 0, false
	}
	i += 9
	var typ Type
	switch word(b, i) {
	case wInvoke: // invoke","f":
		typ, i = Invoke, i+12
		if len(b) < i || b[i-4] != '"' || b[i-3] != 'f' || b[i-2] != '"' || b[i-1] != ':' {
			return 0, false
		}
	case wOK: // ok","f":
		typ, i = OK, i+8
	case wFail, wInfo: // fail","f": and info","f":
		typ, i = Fail, i+10
		if b[i-10+1] == 'n' {
			typ = Info
		}
		if len(b) < i || b[i-2] != '"' || b[i-1] != ':' {
			return 0, false
		}
	default:
		return 0, false
	}
	f, i, ok := plainString(b, i)
	if !ok {
		return 0, false
	}
	op.Index, op.Time, op.Process, op.Type, op.F = index, t, int(p), typ, internF(f)
	return i, true
}

// word returns the 8 bytes of b at i as a little-endian word, 0 when b has fewer.
func word(b []byte, i int) uint64 {
	if i < 0 || len(b)-i < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b[i:])
}

// The words written compares lines with: the first 8 bytes of each literal.
var (
	wIndex   = word([]byte(`{"index"`), 0)
	wTime    = word([]byte(`,"time":`), 0)
	wProcess = word([]byte(`,"proces`), 0)
	wType    = word([]byte(`,"type":`), 0)
	wInvoke  = word([]byte(`invoke",`), 0)
	wOK      = word([]byte(`ok","f":`), 0)
	wFail    = word([]byte(`fail","f`), 0)
	wInfo    = word([]byte(`info","f`), 0)
)

// The fields of Op, as bits of decodeFast's record of the keys seen.
const (
	fIndex = iota
	fTime
	fProcess
	fType
	fF
	fKey
	fValue
	fOpID
	fConn
	fError
	fAttempt
)

// keyLits are the keys of the fields as the Writer writes them: quoted, the colon
// straight after.
var keyLits = [...]string{fIndex: `"index":`, fTime: `"time":`, fProcess: `"process":`, fType: `"type":`,
	fF: `"f":`, fKey: `"key":`, fValue: `"value":`, fOpID: `"op_id":`, fConn: `"conn":`, fError: `"error":`, fAttempt: `"attempt":`}

// writtenKey returns the field of the key at b[i] when it is written exactly as the
// Writer writes it, and the index after its colon; -1 for any other key, or the same
// key written otherwise, which the general reading takes.
func writtenKey(b []byte, i int) (int, int) {
	if len(b)-i < 5 {
		return -1, 0
	}
	f := -1
	switch b[i+1] {
	case 'i':
		f = fIndex
	case 't':
		f = fTime
		if b[i+2] == 'y' {
			f = fType
		}
	case 'p':
		f = fProcess
	case 'f':
		f = fF
	case 'k':
		f = fKey
	case 'v':
		f = fValue
	case 'o':
		f = fOpID
	case 'c':
		f = fConn
	case 'e':
		f = fError
	case 'a':
		f = fAttempt
	default:
		return -1, 0
	}
	lit := keyLits[f]
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1, 0
	}
	return f, i + len(lit)
}

func fieldOf(key []byte) int {
	switch string(key) {
	case "index":
		return fIndex
	case "time":
		return fTime
	case "process":
		return fProcess
	case "type":
		return fType
	case "f":
		return fF
	case "key":
		return fKey
	case "value":
		return fValue
	case "op_id":
		return fOpID
	case "conn":
		return fConn
	case "error":
		return fError
	case "attempt":
		return fAttempt
	}
	return -1
}

// internF returns the function names indoubt's workloads use without allocating: they
// occur on every line.
func internF(s []byte) string {
	switch string(s) {
	case "decrement":
		return "decrement"
	case "read":
		return "read"
	case "increment":
		return "increment"
	case "write":
		return "write"
	case "cas":
		return "cas"
	case "txn":
		return "txn"
	}
	return string(s)
}

func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i // the usual case: no space at all
	}
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at b[i] without escapes or control characters whose
// bytes are valid UTF-8, which encoding/json reads as exactly those bytes. It returns
// the contents and the index after the closing quote.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	// Plain ASCII, as in every string indoubt writes, takes one table look-up a byte.
	j := i + 1
	for j < len(b) && !strStop[b[j]] {
		j++
	}
	high := false
	for ; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if high && !utf8.Valid(s) {
				return nil, 0, false
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	return nil, 0, false
}

// strStop marks the bytes that end plainString's ASCII scan: the quote, the backslash,
// control characters and the bytes of multi-byte UTF-8.
var strStop = func() (t [256]bool) {
	for c := range t {
		t[c] = c == '"' || c == '\\' || c < 0x20 || c >= utf8.RuneSelf
	}
	return t
}()

// plainInt reads a JSON integer of at most 18 digits (which cannot overflow an int64)
// at b[i], and returns it and the index after it. A number with a fraction or exponent
// is declined: encoding/json refuses it for an integer field.
func plainInt(b []byte, i int) (int64, int, bool) {
	j := i
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	start := j
	var n int64
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		n = n*10 + int64(b[j]-'0')
		j++
	}
	digits := j - start
	if digits == 0 || digits > 18 || digits > 1 && b[start] == '0' {
		return 0, 0, false
	}
	if j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
		return 0, 0, false
	}
	if neg {
		n = -n
	}
	return n, j, true
}

// maxDepth bounds the nesting skipValue follows; deeper values are left to
// encoding/json, which has its own limit.
const maxDepth = 64

// skipValue checks that a valid JSON value starts at b[i] and returns the index after
// it. It follows the JSON grammar strictly, as encoding/json's scanner does: a value it
// accepts is one encoding/json accepts, byte for byte the same. depth is how deeply the
// value is nested already; containers nested deeper than maxDepth are declined. It
// reads without recursion, the open containers a stack of bits: a transaction's value,
// an array of arrays of short tokens, costs a few comparisons a byte.
func skipValue(b []byte, i, depth int) (int, bool) {
	// open holds a bit for each container open around i, the innermost lowest: 1 for
	// an object, 0 for an array; n is how many are open.
	var open uint64
	n := 0
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return 0, false
		}
		var ok bool
		switch c := b[i]; {
		case c == '[' || c == '{':
			if depth+n >= maxDepth {
				return 0, false
			}
			obj := c == '{'
			open <<= 1
			if obj {
				open |= 1
			}
			n++
			i = skipSpace(b, i+1)
			if i < len(b) && (b[i] == ']' && !obj || b[i] == '}' && obj) {
				i++
				n--
				open >>= 1
				break
			}
			if obj {
				if i, ok = skipKey(b, i); !ok {
					return 0, false
				}
			}
			continue
		case c >= '0' && c <= '9' || c == '-':
			if i, ok = skipNumber(b, i); !ok {
				return 0, false
			}
		case c == '"':
			if i, ok = skipString(b, i); !ok {
				return 0, false
			}
		case c == 'n':
			if i, ok = literal(b, i, "null"); !ok {
				return 0, false
			}
		case c == 't':
			if i, ok = literal(b, i, "true"); !ok {
				return 0, false
			}
		case c == 'f':
			if i, ok = literal(b, i, "false"); !ok {
				return 0, false
			}
		default:
			return 0, false
		}
		// A value ended at b[i]: what follows it in the containers open around it.
	after:
		for {
			if n == 0 {
				return i, true
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return 0, false
			}
			obj := open&1 != 0
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
				if obj {
					if i, ok = skipKey(b, i); !ok {
						return 0, false
					}
				}
				break after
			case ']', '}':
				if (b[i] == '}') != obj {
					return 0, false
				}
				i++
				n--
				open >>= 1
			default:
				return 0, false
			}
		}
	}
}

// skipKey reads an object member's key and its colon at b[i], and returns the index of
// the member's value.
func skipKey(b []byte, i int) (int, bool) {
	j, ok := skipString(b, i)
	if !ok {
		return 0, false
	}
	i = skipSpace(b, j)
	if i >= len(b) || b[i] != ':' {
		return 0, false
	}
	return skipSpace(b, i+1), true
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// skipString checks a JSON string at b[i], escapes included, and returns the index after
// its closing quote. Bytes that are not valid UTF-8 are declined, though encoding/json's
// scanner passes them: declining is always safe.
func skipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	j := i + 1
	for j < len(b) && !strStop[b[j]] {
		j++ // plain ASCII: one table look-up a byte
	}
	for ; j < len(b); j++ {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			j++
			if j >= len(b) {
				return 0, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-j < 5 {
					return 0, false
				}
				for _, h := range b[j+1 : j+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, false
					}
				}
				j += 4
			default:
				return 0, false
			}
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError && size == 1 {
				return 0, false
			}
			j += size - 1
		}
	}
	return 0, false
}

// skipNumber checks a JSON number at b[i]: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func skipNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, false
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
