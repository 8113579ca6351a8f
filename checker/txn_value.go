package checker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// A transaction's value is a JSON array of micro-ops, each itself an array: the
// function, the key, and the argument or result.
//
//	[["append","x",1],["r","y",[1,2]],["w","z",3],["r","z",null]]
//
// Keys and values may be any JSON value; Jepsen's EDN keywords arrive as strings,
// its vectors as arrays. Checking compares them by identity only, so each is interned
// once: a key becomes a small integer, a value an int64 — itself when it is an integer
// outside the reserved range below, otherwise a code for its canonical JSON text.
// txnDecoder reads micro-ops without building a tree of interface values: on the
// millions of transactions of a long history encoding/json's []any took most of the
// time of a check.

// Values that are not plain integers (strings, big or fractional numbers, arrays,
// objects) and the integers that happen to fall in the reserved range are coded as
// valueCodeBase + an index into txnInterner.valueText; JSON null is valueNil.
const (
	valueNil       int64 = math.MinInt64
	valueCodeBase  int64 = math.MinInt64 + 1
	valueCodeLimit int64 = math.MinInt64 + 1<<40
)

// mopKind is the function of a micro-op.
type mopKind uint8

const (
	mopAppend mopKind = 1 + iota // ["append", k, v]
	mopRead                      // ["r", k, v]: a list, a value, or null
	mopWrite                     // ["w", k, v]
)

func (k mopKind) String() string {
	switch k {
	case mopAppend:
		return "append"
	case mopRead:
		return "r"
	case mopWrite:
		return "w"
	}
	return "?"
}

// txnInterner numbers keys and non-integer values in the order it first sees them.
//
// Its maps belong to the one goroutine that decodes and checks (txnPrep runs beside
// the model); mu guards the texts, which the analysis's goroutines also read when
// they explain what they found.
type txnInterner struct {
	mu        sync.Mutex
	intKeys   map[int64]uint32
	strKeys   map[string]uint32 // plain strings, by their bytes
	otherKeys map[string]uint32 // anything else, by canonical JSON text
	keyText   []string          // canonical JSON text of each key
	values    map[string]int64  // canonical JSON text to code
	valueText []string          // canonical JSON text of each code
	// recent caches intKeys: the integer keys seen last, by the key's residue.
	recent [256]recentKey
}

// recentKey is an integer key and its id + 1 (0: an empty entry).
type recentKey struct {
	key int64
	id  uint32
}

func newTxnInterner() *txnInterner {
	return &txnInterner{intKeys: map[int64]uint32{}, strKeys: map[string]uint32{},
		otherKeys: map[string]uint32{}, values: map[string]int64{}}
}

// nkeys is the number of keys seen.
func (in *txnInterner) nkeys() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.keyText)
}

func (in *txnInterner) newKey(text string) uint32 {
	in.mu.Lock()
	defer in.mu.Unlock()
	id := uint32(len(in.keyText))
	in.keyText = append(in.keyText, text)
	return id
}

// valueJSON returns the JSON text of value code v.
func (in *txnInterner) valueJSON(v int64) string {
	switch {
	case v == valueNil:
		return "null"
	case v >= valueCodeBase && v < valueCodeLimit:
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.valueText[v-valueCodeBase]
	}
	return strconv.FormatInt(v, 10)
}

// valueString returns value code v as a person reads it: strings without quotes.
func (in *txnInterner) valueString(v int64) string {
	return plainJSON(in.valueJSON(v))
}

// keyString names key k in a sentence: "key x", "key 7".
func (in *txnInterner) keyString(k uint32) string { return "key " + plainJSON(in.keyJSON(k)) }

// keyJSON returns the JSON text of key k.
func (in *txnInterner) keyJSON(k uint32) string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.keyText[k]
}

// plainJSON shows a JSON string without its quotes when it needs no escapes, and any
// other JSON text as it is.
func plainJSON(s string) string {
	if len(s) >= 2 && s[0] == '"' {
		var out string
		if json.Unmarshal([]byte(s), &out) == nil && out != "" && !bytes.ContainsAny([]byte(out), " \t\n\"[],") {
			return out
		}
	}
	return s
}

func (in *txnInterner) code(text string) int64 {
	if c, ok := in.values[text]; ok {
		return c
	}
	in.mu.Lock()
	c := valueCodeBase + int64(len(in.valueText))
	in.valueText = append(in.valueText, text)
	in.mu.Unlock()
	in.values[text] = c
	return c
}

// rawMop is one decoded micro-op. A list read's elements are in the decoder's list
// buffer from list to list+n; val holds an append's or write's value, a register
// read's value, or valueNil.
type rawMop struct {
	kind      mopKind
	key       uint32
	val       int64
	rawKey    int64 // txnScan's: the key as read, before txnPrep.commit interns it
	hasValue  bool  // false for a missing or null argument
	isList    bool  // the argument was a JSON array
	list, len int   // elements of a list argument, in txnDecoder.list
}

// txnValue is decoded micro-ops: those of one transaction, or of a batch of them, each
// list read's elements in list from mops[i].list to mops[i].list+mops[i].len.
type txnValue struct {
	mops []rawMop
	list []int64
}

// txnDecoder decodes transaction values into micro-ops, reusing its buffers.
type txnDecoder struct {
	in *txnInterner
	txnValue
	b []byte
	i int
}

var errNotTxn = errors.New("not a transaction")

// decode reads value b into d.mops and d.list, replacing what they held. An empty or
// null value is a transaction of no micro-ops.
func (d *txnDecoder) decode(b []byte) error {
	d.mops, d.list = d.mops[:0], d.list[:0]
	return d.decodeMore(b)
}

// decodeMore is decode that appends to what d.mops and d.list hold.
func (d *txnDecoder) decodeMore(b []byte) error {
	d.b, d.i = b, 0
	d.ws()
	if d.i == len(b) {
		return nil
	}
	if d.lit("null") {
		return d.end()
	}
	if !d.eat('[') {
		return fmt.Errorf("%w: want a JSON array of micro-ops such as [\"append\",\"x\",1]", errNotTxn)
	}
	d.ws()
	if d.eat(']') {
		return d.end()
	}
	for {
		if err := d.mop(); err != nil {
			return err
		}
		d.ws()
		if d.eat(']') {
			return d.end()
		}
		if !d.eat(',') {
			return d.errf("want , or ] after a micro-op")
		}
		d.ws()
	}
}

func (d *txnDecoder) end() error {
	d.ws()
	if d.i != len(d.b) {
		return d.errf("data after the transaction")
	}
	return nil
}

func (d *txnDecoder) errf(format string, a ...any) error {
	return fmt.Errorf("%w: %s at byte %d", errNotTxn, fmt.Sprintf(format, a...), d.i)
}

func (d *txnDecoder) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *txnDecoder) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *txnDecoder) lit(s string) bool {
	if bytes.HasPrefix(d.b[d.i:], []byte(s)) {
		d.i += len(s)
		return true
	}
	return false
}

// mop reads one ["f", key] or ["f", key, value].
func (d *txnDecoder) mop() error {
	if !d.eat('[') {
		return d.errf("want a micro-op array")
	}
	d.ws()
	f, ok := d.plainString()
	if !ok {
		return d.errf("want the micro-op's function as a string")
	}
	var m rawMop
	switch string(f) {
	case "append":
		m.kind = mopAppend
	case "r":
		m.kind = mopRead
	case "w":
		m.kind = mopWrite
	default:
		return d.errf("unknown micro-op function %q (want append, r or w)", f)
	}
	d.ws()
	if !d.eat(',') {
		return d.errf("micro-op %s has no key", m.kind)
	}
	d.ws()
	k, err := d.key()
	if err != nil {
		return err
	}
	m.key = k
	d.ws()
	if d.eat(',') {
		d.ws()
		if err := d.arg(&m); err != nil {
			return err
		}
		d.ws()
	}
	if !d.eat(']') {
		return d.errf("micro-op %s has more than a key and a value", m.kind)
	}
	if !m.hasValue && m.kind != mopRead {
		return d.errf("micro-op %s has no value", m.kind)
	}
	d.mops = append(d.mops, m)
	return nil
}

// arg reads a micro-op's third element.
func (d *txnDecoder) arg(m *rawMop) error {
	if d.lit("null") {
		m.val = valueNil
		return nil
	}
	m.hasValue = true
	if d.i < len(d.b) && d.b[d.i] == '[' && m.kind == mopRead {
		m.isList, m.list = true, len(d.list)
		d.i++
		d.ws()
		if d.eat(']') {
			return nil
		}
		for {
			if d.compactInts(m) {
				return nil
			}
			d.ws() // compactInts stops at a space after a comma: [1, 2]
			v, err := d.value()
			if err != nil {
				return err
			}
			d.list = append(d.list, v)
			m.len++
			d.ws()
			if d.eat(']') {
				return nil
			}
			if !d.eat(',') {
				return d.errf("want , or ] in a read's list")
			}
			d.ws()
		}
	}
	v, err := d.value()
	m.val = v
	return err
}

// compactInts reads a run of small non-negative integers separated by commas alone,
// as writers of histories write lists, through the list's closing bracket; it stops
// early, having read what it could, at anything else (a sign, a space, a long number)
// and returns false, leaving the rest to the general reading.
func (d *txnDecoder) compactInts(m *rawMop) bool {
	b, i := d.b, d.i
	for {
		start := i
		var n int64
		for i < len(b) && i-start < 18 {
			c := b[i] - '0'
			if c > 9 {
				break
			}
			n = n*10 + int64(c)
			i++
		}
		if i == start || i >= len(b) || i-start > 1 && b[start] == '0' {
			return false
		}
		switch b[i] {
		case ',':
			d.list = append(d.list, n)
			m.len++
			i++
			d.i = i
		case ']':
			d.list = append(d.list, n)
			m.len++
			d.i = i + 1
			return true
		default:
			return false
		}
	}
}

// plainString reads a string without escapes, returning its bytes.
func (d *txnDecoder) plainString() ([]byte, bool) {
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	j := d.i + 1
	for j < len(d.b) {
		c := d.b[j]
		if c == '"' {
			s := d.b[d.i+1 : j]
			d.i = j + 1
			return s, true
		}
		if c == '\\' || c < 0x20 {
			return nil, false
		}
		j++
	}
	return nil, false
}

// plainInt reads an integer of at most 18 digits followed by a delimiter.
func (d *txnDecoder) plainInt() (int64, bool) {
	j, neg := d.i, false
	if j < len(d.b) && d.b[j] == '-' {
		neg = true
		j++
	}
	start := j
	var n int64
	for j < len(d.b) && d.b[j] >= '0' && d.b[j] <= '9' && j-start < 18 {
		n = n*10 + int64(d.b[j]-'0')
		j++
	}
	if j == start || j < len(d.b) && (d.b[j] >= '0' && d.b[j] <= '9' || d.b[j] == '.' || d.b[j] == 'e' || d.b[j] == 'E') {
		return 0, false
	}
	if j-start > 1 && d.b[start] == '0' {
		return 0, false
	}
	d.i = j
	if neg {
		return -n, true
	}
	return n, true
}

// key reads a key and interns it. A key is identified by its JSON value: the string
// "1" and the integer 1 are two keys, a string escaped or not is one.
func (d *txnDecoder) key() (uint32, error) {
	in := d.in
	if n, ok := d.plainInt(); ok {
		return in.intKey(n), nil
	}
	start := d.i
	if s, ok := d.plainString(); ok {
		if id, ok := in.strKeys[string(s)]; ok {
			return id, nil
		}
		if utf8.Valid(s) {
			return in.strKey(string(s)), nil
		}
		// Invalid UTF-8 reads as encoding/json reads it.
		d.i = start
	}
	text, v, err := d.other()
	if err != nil {
		return 0, err
	}
	switch v := v.(type) {
	case nil:
		return 0, d.errf("a micro-op's key is null")
	case string:
		if id, ok := in.strKeys[v]; ok {
			return id, nil
		}
		return in.strKey(v), nil
	case json.Number:
		if n, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
			return in.intKey(n), nil
		}
	}
	if id, ok := in.otherKeys[text]; ok {
		return id, nil
	}
	id := in.newKey(text)
	in.otherKeys[text] = id
	return id, nil
}

func (in *txnInterner) intKey(n int64) uint32 {
	// A history works on few keys at a time (Elle's generator retires a key after a
	// few dozen writes for the next one): most look-ups find the key where it was put
	// last, without the map's hashing.
	c := &in.recent[uint64(n)%uint64(len(in.recent))]
	if c.id != 0 && c.key == n {
		return c.id - 1
	}
	id, ok := in.intKeys[n]
	if !ok {
		id = in.newKey(strconv.FormatInt(n, 10))
		in.intKeys[n] = id
	}
	*c = recentKey{key: n, id: id + 1}
	return id
}

func (in *txnInterner) strKey(s string) uint32 {
	b, _ := json.Marshal(s)
	id := in.newKey(string(b))
	in.strKeys[s] = id
	return id
}

// value reads a value and codes it.
func (d *txnDecoder) value() (int64, error) {
	if n, ok := d.plainInt(); ok && (n < valueNil || n >= valueCodeLimit) {
		return n, nil
	}
	text, v, err := d.other()
	if err != nil {
		return 0, err
	}
	if v == nil {
		return valueNil, nil
	}
	if n, ok := v.(json.Number); ok {
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil && (i < valueNil || i >= valueCodeLimit) {
			return i, nil
		}
	}
	return d.in.code(text), nil
}

// other reads any JSON value and returns it decoded (numbers as json.Number) with its
// canonical text: compact, as encoding/json writes it back, integers by their digits.
func (d *txnDecoder) other() (string, any, error) {
	start := d.i
	end, ok := skipJSON(d.b, d.i)
	if !ok || end == start {
		return "", nil, d.errf("not a JSON value")
	}
	d.i = end
	var v any
	dec := json.NewDecoder(bytes.NewReader(d.b[start:end]))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", nil, d.errf("not a JSON value: %v", err)
	}
	if dec.More() {
		return "", nil, d.errf("not a JSON value")
	}
	if n, ok := v.(json.Number); ok {
		if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
			return strconv.FormatInt(i, 10), v, nil
		}
		return n.String(), v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", nil, d.errf("not a JSON value: %v", err)
	}
	return string(b), v, nil
}

// skipJSON returns the end of the JSON value that starts at b[i]: the first comma,
// closing bracket or space outside any string, array or object. It checks only the
// value's shape; encoding/json checks the rest.
func skipJSON(b []byte, i int) (int, bool) {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return 0, false
			}
		case '[', '{':
			depth++
		case ']', '}':
			if depth == 0 {
				return i, true
			}
			depth--
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i, true
			}
		}
	}
	return i, depth == 0
}
