package toxics

import (
	"bytes"
	"strconv"
	"strings"
)

// Resp is the Redis serialization protocol (RESP2 and RESP3) for the commit toxics.
//
// Requests are arrays of bulk strings ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") or inline
// commands (a line of words ending in "\n"), framed the way Redis 7 reads them: an empty
// inline line and an array of zero or fewer elements get no reply and are skipped; a
// header line ends at its first "\r"; a NUL byte before the end of a header or inline
// line, a bulk length out of range or an element that is not a bulk string stops Redis
// for good, and switches the direction to pass-through.
//
// Commit points (upstream):
//   - a command outside MULTI: it counts by default when it writes (SET, INCR, DECR, DEL,
//     HSET, LPUSH, ZADD, XADD, EXPIRE, ... and the scripts EVAL, EVALSHA and FCALL, whose
//     effects are unknown to the proxy), and with a match function when its text matches;
//   - EXEC ending a MULTI (counts by default).
//
// Connection commands (HELLO, AUTH, SELECT, CLIENT ..., PING, ECHO, QUIT, RESET, WATCH,
// UNWATCH, MULTI, DISCARD, COMMAND, READONLY, READWRITE, ASKING) are never points, and the
// commands queued inside MULTI are points only through their EXEC. Point.Text is the
// command's words with the command name in upper case, each word quoted (Go syntax) when
// it is not plain printable text ("EVALSHA 1f0e... 2 {b}:balance {b}:ops \"\""); EXEC's
// text is the queued commands, each followed by "; ", then "EXEC". An EVALSHA names its
// script by its SHA1 only: a match function compares it with the script's hash (go-redis:
// Script.Hash). Whether a MULTI is open is predicted from the commands forwarded: a MULTI
// the server refuses (NOAUTH) leaves later writes unjudged until the EXEC, which then
// fails and is released.
//
// A request longer than 64 MiB (the package's bound for a message judged whole) is passed
// on in pieces unjudged (never a point), so that one huge value cannot pin memory; it
// still counts in the pairing. Replies are never buffered beyond one header line.
//
// Pairing (downstream): RESP replies carry no request id, so the replies are paired with
// the requests in order, per connection. A push frame (">") is not a reply; an attribute
// frame ("|") is part of the reply it precedes. SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their
// UNSUBSCRIBE forms, MONITOR, SYNC, PSYNC and CLIENT REPLY break the one-reply-per-request
// rule: from such a command on both directions pass through unjudged for the rest of the
// connection.
//
// Proof of commit: Redis executes a command before it replies, so any reply that is not
// an error proves the command ran: the cut drops that reply (and its attribute, if any)
// and everything after. A command that ran and changed nothing (SET NX on an existing
// key, a pop on an empty list) counts as applied, as PostgreSQL's "UPDATE 0" does. An
// EXEC replied with a null array (a WATCHed key changed: nothing ran) ends the armed cut
// unfired, as does an error reply ("-ERR ..." or a bulk error "!"): the command was
// refused, or, for a script, failed part way. Redis does not roll a script back, so a
// script that wrote and then failed did apply those writes; the proxy cannot tell how
// many, so it claims neither truth and lets the error through to the client (no fault,
// as for a PostgreSQL statement that fails). An EXEC whose reply array holds some errors
// ran the other commands and is cut.
//
// What a cut commit changed is read from the replies (resp_effect.go): a cut EXEC's
// array is held until whole, each element read against the command queued (DEL :0 and
// SETNX :0 changed nothing, INCR changed its key), and the event carries the elements'
// first lines (Txn.Tags) and what they prove (Txn.Changed); a single command's reply
// likewise.
type Resp struct{}

// Name returns "resp".
func (Resp) Name() string { return "resp" }

// NewConn implements Protocol.
func (Resp) NewConn() Conn {
	return &respConn{up: respReqFramer{maxWhole: maxWhole}}
}

const (
	// respMaxInline is Redis's PROTO_INLINE_MAX_SIZE: an inline request or a request's
	// header line longer than this is refused. It also bounds the header lines of
	// replies that are numbers.
	respMaxInline = 64 << 10
	// respMaxBulk is Redis's default proto-max-bulk-len: longer bulk strings in a
	// request are refused.
	respMaxBulk = 512 << 20
	// respMaxCount bounds a reply aggregate's element count, far above what a server
	// sends, so that counts never overflow.
	respMaxCount = 1 << 40
	// respKeepArgs and respMaxArg bound what a point's text shows of a request.
	respKeepArgs = 64
	respMaxArg   = 1 << 10
	// respMaxTag bounds a reply line reported as an event's tag.
	respMaxTag = 64
)

// respWrites are the commands that count as commits by default: Redis's write commands
// in common use, and the scripts and functions that may write.
var respWrites = setOf(
	"SET", "SETNX", "SETEX", "PSETEX", "GETSET", "GETDEL", "GETEX", "MSET", "MSETNX",
	"APPEND", "SETRANGE", "INCR", "INCRBY", "INCRBYFLOAT", "DECR", "DECRBY",
	"DEL", "UNLINK", "EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "RENAME",
	"RENAMENX", "MOVE", "COPY", "RESTORE", "SORT",
	"HSET", "HSETNX", "HMSET", "HDEL", "HINCRBY", "HINCRBYFLOAT",
	"LPUSH", "RPUSH", "LPUSHX", "RPUSHX", "LPOP", "RPOP", "LINSERT", "LSET", "LREM",
	"LTRIM", "RPOPLPUSH", "LMOVE", "LMPOP", "BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP",
	"SADD", "SREM", "SPOP", "SMOVE", "SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE",
	"ZADD", "ZINCRBY", "ZREM", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZREMRANGEBYLEX",
	"ZPOPMIN", "ZPOPMAX", "BZPOPMIN", "BZPOPMAX", "ZMPOP", "BZMPOP", "ZUNIONSTORE",
	"ZINTERSTORE", "ZDIFFSTORE", "ZRANGESTORE",
	"XADD", "XDEL", "XTRIM", "XACK", "XCLAIM", "XAUTOCLAIM", "XGROUP", "XSETID", "XREADGROUP",
	"PFADD", "PFMERGE", "SETBIT", "BITOP", "BITFIELD", "GEOADD", "GEOSEARCHSTORE",
	"FLUSHDB", "FLUSHALL", "SWAPDB",
	"EVAL", "EVALSHA", "FCALL",
)

// respReads are the commands that only read. Event.Txn.Wrote is false for a
// transaction of these alone; any other command, a name not known here included, may
// write.
var respReads = setOf(
	"GET", "MGET", "GETRANGE", "SUBSTR", "STRLEN", "LCS", "EXISTS", "TYPE", "TTL", "PTTL",
	"EXPIRETIME", "PEXPIRETIME", "KEYS", "SCAN", "RANDOMKEY", "DBSIZE", "DUMP", "OBJECT",
	"MEMORY", "TOUCH", "TIME", "INFO", "LASTSAVE", "SORT_RO",
	"HGET", "HMGET", "HGETALL", "HKEYS", "HVALS", "HLEN", "HEXISTS", "HSTRLEN", "HSCAN",
	"HRANDFIELD", "LRANGE", "LLEN", "LINDEX", "LPOS", "SMEMBERS", "SISMEMBER",
	"SMISMEMBER", "SCARD", "SRANDMEMBER", "SSCAN", "SINTER", "SINTERCARD", "SUNION",
	"SDIFF", "ZRANGE", "ZREVRANGE", "ZRANGEBYSCORE", "ZREVRANGEBYSCORE", "ZRANGEBYLEX",
	"ZREVRANGEBYLEX", "ZSCORE", "ZMSCORE", "ZCARD", "ZCOUNT", "ZLEXCOUNT", "ZRANK",
	"ZREVRANK", "ZSCAN", "ZRANDMEMBER", "ZUNION", "ZINTER", "ZINTERCARD", "ZDIFF",
	"XRANGE", "XREVRANGE", "XLEN", "XREAD", "XINFO", "XPENDING", "BITCOUNT", "BITPOS",
	"GETBIT", "BITFIELD_RO", "PFCOUNT", "GEOPOS", "GEODIST", "GEOHASH", "GEOSEARCH",
	"GEORADIUS_RO", "GEORADIUSBYMEMBER_RO", "EVAL_RO", "EVALSHA_RO", "FCALL_RO",
)

// respNames maps the upper-case names of the commands these tables know to themselves,
// so that naming a request of one of them takes no allocation.
var respNames = func() map[string]string {
	m := map[string]string{}
	for _, set := range []map[string]bool{respWrites, respReads, respControl, respUnpaired} {
		for n := range set {
			m[n] = n
		}
	}
	return m
}()

// respName returns a command's name in upper case.
func respName(b []byte) string {
	var up [32]byte
	n := copy(up[:], b)
	for i, c := range up[:n] {
		if 'a' <= c && c <= 'z' {
			up[i] = c - 'a' + 'A'
		}
	}
	if name, ok := respNames[string(up[:n])]; ok {
		return name
	}
	return string(up[:n])
}

// respControl are connection commands: never commit points.
var respControl = setOf(
	"HELLO", "AUTH", "SELECT", "CLIENT", "PING", "ECHO", "QUIT", "RESET", "WATCH", "UNWATCH",
	"MULTI", "DISCARD", "EXEC", "COMMAND", "READONLY", "READWRITE", "ASKING",
)

// respUnpaired are the commands after which replies no longer answer requests one to one.
var respUnpaired = setOf(
	"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE",
	"MONITOR", "SYNC", "PSYNC",
)

// respReq is one request sent, awaiting its reply.
type respReq struct {
	name string   // upper case; "" when not known
	exec bool     // an EXEC ending a MULTI: a null reply means nothing ran
	cmds []string // an EXEC's: the names of the commands queued, in order
	last bool     // replies stop pairing with requests from this one's reply on
	replyCut
}

type respConn struct {
	up   respReqFramer
	down respReplyFramer

	// Upstream goroutine only.
	multi      bool
	block      strings.Builder // commands queued in the open MULTI
	blockCmds  []string        // their names, for reading EXEC's reply (resp_effect.go)
	blockWrote bool            // one of them writes
	txns       uint64          // transactions seen start: the number of the last

	lastArmed            // its mu guards the fields below
	queue     []*respReq // sent, awaiting their replies, in order

	exec *respExecHold // downstream only: a cut EXEC whose reply is held until whole
}

// respReqFramer frames client-to-server bytes.
type respReqFramer struct {
	opaque   bool
	maxWhole int // framer.go's maxWhole; tests lower it

	// A request array not yet whole: its scan resumes where it stopped, since every call
	// starts at the same request.
	scanning bool
	pos      int      // bytes of the request scanned
	left     int      // elements not yet scanned
	args     [][2]int // spans of the first respKeepArgs elements' contents
	nargs    int

	// A request passed on in pieces.
	streamLeft int // elements whose header is still to come
	streamBulk int // bytes left of the current element, CRLF included

	// seen: bytes of the line being waited for (from its start) already searched for
	// its end, so that a line arriving a byte at a time is not searched again and again.
	seen int
}

// Request implements Conn.
func (c *respConn) Request(b []byte) (int, *Point) {
	f := &c.up
	if len(b) == 0 {
		return 0, nil
	}
	if f.opaque {
		return len(b), nil
	}
	if f.streamLeft > 0 || f.streamBulk > 0 {
		return f.stream(b), nil
	}
	if !f.scanning && b[0] != '*' {
		return c.inline(b)
	}
	if !f.scanning {
		end, st := respLine(b, '\r', f.seen)
		switch st {
		case lineRefused:
			f.opaque = true
			return len(b), nil
		case lineWait:
			f.seen = end
			return 0, nil
		}
		f.seen = 0
		n, ok := respInt(b[1:end])
		if !ok || n > 1<<31-1 {
			f.opaque = true
			return len(b), nil
		}
		if n <= 0 {
			// Redis skips an empty array without a reply.
			return end + 2, nil
		}
		f.scanning, f.pos, f.left, f.nargs, f.args = true, end+2, int(n), 0, f.args[:0]
	}
	for f.left > 0 {
		if f.pos >= len(b) {
			return 0, nil
		}
		if b[f.pos] != '$' {
			f.opaque, f.scanning = true, false
			return len(b), nil
		}
		end, st := respLine(b[f.pos:], '\r', f.seen)
		switch st {
		case lineRefused:
			f.opaque, f.scanning = true, false
			return len(b), nil
		case lineWait:
			f.seen = end
			return 0, nil
		}
		n, ok := respInt(b[f.pos+1 : f.pos+end])
		if !ok || n < 0 || n > respMaxBulk {
			f.opaque, f.scanning = true, false
			return len(b), nil
		}
		data := f.pos + end + 2
		next := data + int(n) + 2
		if next > f.maxWhole {
			// Decided on the declared sizes, not on what has arrived, so that any
			// chunking of the same bytes gives the same verdict (framer.go's rule:
			// every request matters).
			return c.startStream(b), nil
		}
		if next > len(b) {
			return 0, nil
		}
		if f.nargs < respKeepArgs {
			f.args = append(f.args, [2]int{data, data + int(n)})
		}
		f.nargs++
		f.pos = next
		f.left--
		f.seen = 0
	}
	f.scanning = false
	return f.pos, c.request(f.scanned(b), f.nargs, true)
}

// scanned returns the kept words of the request being scanned.
func (f *respReqFramer) scanned(b []byte) [][]byte {
	args := make([][]byte, len(f.args))
	for i, s := range f.args {
		args[i] = b[s[0]:s[1]]
	}
	return args
}

// startStream passes the scanned part of an oversized request on, and sets the rest to
// stream. The request still gets its reply, so it is queued, unjudged: its name is
// known unless the first word itself is the oversized one.
func (c *respConn) startStream(b []byte) int {
	f := &c.up
	c.request(f.scanned(b), f.nargs+f.left, false)
	f.streamLeft, f.streamBulk = f.left, 0
	f.scanning = false
	return f.pos
}

func (f *respReqFramer) stream(b []byte) int {
	if f.streamBulk > 0 {
		n := min(f.streamBulk, len(b))
		f.streamBulk -= n
		return n
	}
	if b[0] != '$' {
		f.opaque, f.streamLeft = true, 0
		return len(b)
	}
	end, st := respLine(b, '\r', f.seen)
	switch st {
	case lineRefused:
		f.opaque, f.streamLeft = true, 0
		return len(b)
	case lineWait:
		f.seen = end
		return 0
	}
	f.seen = 0
	n, ok := respInt(b[1:end])
	if !ok || n < 0 || n > respMaxBulk {
		f.opaque, f.streamLeft = true, 0
		return len(b)
	}
	f.streamLeft--
	f.streamBulk = int(n) + 2
	return end + 2
}

// respLine finds the end of a line as Redis does (strchr on a NUL-terminated buffer):
// the first stop byte, which must be followed by one more byte (the "\n" Redis skips
// without looking). The search starts at from: the bytes before it are known to hold
// neither the stop byte nor NUL. It returns the stop byte's index and lineEnd; or
// lineWait with the index to resume from when more bytes may complete the line; or
// lineRefused when Redis would never read it (a NUL first, or longer than
// respMaxInline).
func respLine(b []byte, stop byte, from int) (int, lineStatus) {
	lim := min(len(b), respMaxInline+1)
	for i := from; i < lim; i++ {
		switch b[i] {
		case stop:
			if i+1 < len(b) {
				return i, lineEnd
			}
			return i, lineWait
		case 0:
			return 0, lineRefused
		}
	}
	if len(b) > respMaxInline {
		return 0, lineRefused
	}
	return max(from, lim), lineWait
}

type lineStatus uint8

const (
	lineEnd lineStatus = iota
	lineWait
	lineRefused
)

// inline frames an inline command: a line of words up to "\n".
func (c *respConn) inline(b []byte) (int, *Point) {
	lim := min(len(b), respMaxInline+1)
	i := c.up.seen
	for ; i < lim; i++ {
		if b[i] == '\n' {
			break
		}
		if b[i] == 0 {
			c.up.opaque = true
			return len(b), nil
		}
	}
	if i == lim {
		if len(b) > respMaxInline {
			c.up.opaque = true
			return len(b), nil
		}
		c.up.seen = i
		return 0, nil
	}
	c.up.seen = 0
	line := b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args := respSplit(line)
	if len(args) == 0 {
		// Redis skips an empty line without a reply.
		return i + 1, nil
	}
	n := len(args)
	if len(args) > respKeepArgs {
		args = args[:respKeepArgs]
	}
	return i + 1, c.request(args, n, true)
}

// respSplit splits an inline command into words, as Redis's sdssplitargs does in the
// common cases: words are separated by blanks; "..." and '...' quote a word. An
// unbalanced quote still makes one request (Redis answers it with an error).
func respSplit(line []byte) [][]byte {
	var args [][]byte
	i := 0
	for {
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		if i >= len(line) {
			return args
		}
		var w []byte
		switch q := line[i]; q {
		case '"', '\'':
			i++
			for i < len(line) && line[i] != q {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				w = append(w, line[i])
				i++
			}
			i++
		default:
			j := i
			for i < len(line) && !isBlank(line[i]) {
				i++
			}
			w = line[j:i]
		}
		args = append(args, w)
	}
}

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// respInt parses a RESP integer as Redis's string2ll does: an optional minus, digits,
// no leading zeros, no plus sign, within int64.
func respInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) > 1 && b[0] == '0' {
		return 0, false
	}
	if b[0] == '-' && (len(b) == 1 || b[1] == '0') {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || b[0] == '+' {
		return 0, false
	}
	return n, true
}

// request takes one request, queues it for its reply and returns its point (none unless
// judge: the request was not consumed whole). args holds at most respKeepArgs of its
// nargs words; none when not known.
func (c *respConn) request(args [][]byte, nargs int, judge bool) *Point {
	r := &respReq{}
	if len(args) > 0 && len(args[0]) <= 32 {
		r.name = respName(args[0])
	}
	var p *Point
	name := r.name
	switch {
	case respUnpaired[name] || (name == "CLIENT" && len(args) > 1 && strings.EqualFold(string(args[1]), "REPLY")):
		r.last = true
		c.up.opaque = true
	case c.multi:
		switch name {
		case "EXEC":
			c.multi = false
			r.exec, r.cmds = true, c.blockCmds
			p = &Point{Statement: "EXEC", Text: c.block.String() + "EXEC", Default: true, Txn: c.txns, Wrote: c.blockWrote}
			c.block.Reset()
			c.blockCmds = nil
		case "DISCARD", "RESET":
			c.multi = false
			c.block.Reset()
			c.blockCmds = nil
		case "MULTI", "WATCH":
			// Refused inside MULTI; the transaction goes on.
		default:
			c.blockWrote = c.blockWrote || !respReads[name]
			c.blockCmds = append(c.blockCmds, name)
			if t := respText(args, nargs); c.block.Len()+len(t)+2 <= maxBlockText {
				c.block.WriteString(t)
				c.block.WriteString("; ")
			}
		}
	case name == "MULTI":
		c.multi = true
		c.block.Reset()
		c.blockCmds = nil
		c.blockWrote = false
		c.txns++
	case name == "" || respControl[name]:
	default:
		c.txns++
		p = &Point{Default: respWrites[name], Txn: c.txns, Wrote: !respReads[name]}
		// Rendered only for a match function or a fault: most requests need no text.
		p.render = func() (string, string) {
			t := respText(args, nargs)
			return t, t
		}
	}
	if !judge {
		p = nil
	}
	c.mu.Lock()
	c.queue = append(c.queue, r)
	c.mu.Unlock()
	if p != nil {
		c.last = &r.replyCut
	}
	return p
}

// respText renders a request's words for events and match functions.
func respText(args [][]byte, nargs int) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		s := string(a[:min(len(a), respMaxArg)])
		if i == 0 {
			s = strings.ToUpper(s)
		}
		if plainWord(s) {
			b.WriteString(s)
		} else {
			b.WriteString(strconv.Quote(s))
		}
		if len(a) > respMaxArg {
			b.WriteString("...")
		}
	}
	if nargs > len(args) {
		b.WriteString(" ...")
	}
	return b.String()
}

func plainWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' {
			return false
		}
	}
	return true
}

// respAgg is an aggregate reply still open.
type respAgg struct {
	left int64 // elements to come
	attr bool  // an attribute: it does not count as an element of its parent
}

// respReplyFramer frames server-to-client bytes, one token at a time: a header line, a
// piece of a long simple line, or a piece of a blob's payload. Nothing is buffered
// beyond one header line, whatever the reply's size.
type respReplyFramer struct {
	opaque bool
	stack  []respAgg
	bulk   int64 // bytes left of a blob's payload and its CRLF
	line   bool  // inside a long simple string or error, passed on in pieces

	push     bool // the top-level value in progress is a push
	attr     bool // an attribute has started the next reply
	holdAttr bool // ... and is held, the reply's request having an armed cut
	replies  int  // replies started, for tests
	seen     int  // bytes of a header line being waited for already searched
}

// crlf returns the index of the first "\r\n" in b, searching from from-1 (the bytes
// before from are known to hold none, but the last of them may be its "\r"); -1 if none.
func crlf(b []byte, from int) int {
	from = max(from-1, 0)
	if i := bytes.Index(b[from:], []byte("\r\n")); i >= 0 {
		return from + i
	}
	return -1
}

// Reply implements Conn. It frames one token at a time; the first token of a top-level
// value that is neither a push nor an attribute starts a reply, judged against the
// request it answers.
func (c *respConn) Reply(b []byte) (int, Verdict) {
	f := &c.down
	if len(b) == 0 {
		return 0, Verdict{}
	}
	if c.exec != nil {
		return c.execReply(b)
	}
	if n, ok := f.inside(b); ok {
		return n, Verdict{}
	}
	top := len(f.stack) == 0
	typ := b[0]
	n, tag, null, ok := f.token(b)
	if !ok {
		if n > 0 && f.holdAttr {
			// Framing lost while an attribute is held: let it go.
			f.holdAttr = false
			return n, Verdict{Action: Release}
		}
		return n, Verdict{}
	}
	if !top || f.push {
		return n, Verdict{}
	}
	switch typ {
	case '>':
		f.push = len(f.stack) > 0 // an empty push is already over
		return n, Verdict{}
	case '|':
		return n, c.attribute()
	}
	return c.reply(b, n, typ, tag, null)
}

// inside consumes bytes that continue a value already started: everything once the
// replies stopped framing, a blob's payload, a piece of a long simple line. False when
// b starts a token.
func (f *respReplyFramer) inside(b []byte) (int, bool) {
	switch {
	case f.opaque:
		return len(b), true
	case f.bulk > 0:
		n := int(min(f.bulk, int64(len(b))))
		f.bulk -= int64(n)
		if f.bulk == 0 {
			f.done(false)
		}
		return n, true
	case f.line:
		i := crlf(b[:min(len(b), respMaxInline+2)], 0)
		if i >= 0 {
			f.line = false
			f.done(false)
			return i + 2, true
		}
		// Keep a last "\r": its "\n" may be next.
		return min(len(b), respMaxInline+2) - 1, true
	}
	return 0, false
}

// attribute judges a top-level attribute frame: it belongs to the reply that follows,
// so it is held when that reply's request has an armed cut.
func (c *respConn) attribute() Verdict {
	f := &c.down
	if f.attr {
		return Verdict{}
	}
	f.attr = true
	c.mu.Lock()
	armed := len(c.queue) > 0 && c.queue[0].cut != nil
	c.mu.Unlock()
	if armed {
		f.holdAttr = true
		return Verdict{Action: Hold}
	}
	return Verdict{}
}

// reply judges the first token of a reply, n bytes at the start of b, against the
// request it answers: the oldest one awaiting its reply.
func (c *respConn) reply(b []byte, n int, typ byte, tag string, null bool) (int, Verdict) {
	f := &c.down
	held := f.holdAttr
	f.attr, f.holdAttr = false, false
	f.replies++
	r, p := c.answered()
	release := Verdict{}
	if held {
		release.Action = Release
	}
	if r != nil && r.last {
		// This reply and all after it pass unjudged.
		f.opaque = true
		return len(b), release
	}
	switch {
	case p == nil:
		return n, release
	case typ == '-' || typ == '!':
		return n, Verdict{Action: Release, Pending: p}
	case r.exec && null:
		return n, Verdict{Action: Release, Pending: p}
	case r.exec && len(f.stack) > 0:
		// The array of the commands' replies follows: hold it, and cut once it is read.
		c.exec = &respExecHold{p: p, tag: tag, eff: respTxnEffect{cmds: r.cmds}}
		return n, Verdict{Action: Hold}
	case r.exec:
		eff := respTxnEffect{cmds: r.cmds}
		tags, changed := eff.result()
		return n, Verdict{Action: Cut, Pending: p, Tag: tag, Tags: tags, Changed: changed}
	}
	eff := respTxnEffect{cmds: []string{r.name}}
	eff.add(typ, tag, null)
	tags, changed := eff.result()
	return n, Verdict{Action: Cut, Pending: p, Tag: tag, Tags: tags, Changed: changed}
}

// answered takes the oldest request awaiting its reply off the queue, with its armed
// cut; nil when none awaits.
func (c *respConn) answered() (*respReq, *Pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil, nil
	}
	r := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	p := r.cut
	r.cut = nil
	return r, p
}

// token consumes one token at the start of b (not inside a blob or a long line). It
// returns false with 0 when more bytes are needed, or with len(b) when the bytes do
// not frame (the framer is opaque from then on). tag is the token's line for events;
// null reports a null value.
func (f *respReplyFramer) token(b []byte) (n int, tag string, null, ok bool) {
	typ := b[0]
	if !strings.ContainsRune("+-:,(#_$=!*%~>|", rune(typ)) {
		f.opaque = true
		return len(b), "", false, false
	}
	lim := min(len(b), respMaxInline+2)
	i := crlf(b[:lim], f.seen)
	if i < 0 {
		if (typ == '+' || typ == '-') && len(b) > respMaxInline {
			// A long simple line: on in pieces, keeping a last "\r".
			f.line, f.seen = true, 0
			return lim - 1, string(b[:respMaxTag]), false, true
		}
		if len(b) > respMaxInline+1 {
			f.opaque = true
			return len(b), "", false, false
		}
		f.seen = lim
		return 0, "", false, false
	}
	f.seen = 0
	line := b[1:i]
	tag = string(b[:min(i, respMaxTag)])
	n = i + 2
	switch typ {
	case '+', '-', ':', ',', '(', '#':
		f.done(false)
		return n, tag, false, true
	case '_':
		f.done(false)
		return n, tag, true, true
	case '$', '=', '!', '*', '%', '~', '>', '|':
		// A blob's length or an aggregate's count; -1 is RESP2's null blob or array.
		v, good := respInt(line)
		switch {
		case good && v == -1 && (typ == '$' || typ == '*'):
			f.done(false)
			return n, tag, true, true
		case !good || v < 0 || v > respMaxCount:
			f.opaque = true
			return len(b), "", false, false
		case typ == '$' || typ == '=' || typ == '!':
			f.bulk = v + 2
			return n, tag, false, true
		case v == 0:
			f.done(typ == '|')
			return n, tag, false, true
		}
		if typ == '%' || typ == '|' {
			v *= 2
		}
		f.stack = append(f.stack, respAgg{left: v, attr: typ == '|'})
		return n, tag, false, true
	}
	// Unreachable: the type was checked first.
	f.opaque = true
	return len(b), "", false, false
}

// done records that a value (attr: an attribute) ended, closing the aggregates it
// completes.
func (f *respReplyFramer) done(attr bool) {
	for len(f.stack) > 0 {
		if attr {
			// Attributes are not elements of their parent.
			return
		}
		top := &f.stack[len(f.stack)-1]
		top.left--
		if top.left > 0 {
			return
		}
		attr = top.attr
		f.stack = f.stack[:len(f.stack)-1]
	}
	if !attr {
		// A top-level value ended: a push, or a reply.
		f.push = false
	}
}
