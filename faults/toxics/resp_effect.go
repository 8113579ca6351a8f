package toxics

// What a Redis command or MULTI/EXEC block changed, from the server's own replies.
//
// A Redis reply says what a command did for many writes: DEL answers how many keys it
// removed, SADD how many members it added, SETNX 1 or 0, LPOP the value or nil, INCR the
// new value (it always changes the key). A cut EXEC's reply is the array of its
// commands' replies, in the order they were queued; a cut single command's is its own
// reply. So the proxy holds a cut EXEC's reply until the array is whole, reads each
// element against the command it answers, and says what the commit changed (Txn.Tags,
// Txn.Changed): something when one reply proves a change, nothing when every command's
// reply proves it changed nothing (a read, DEL :0, SETNX :0, an error inside EXEC, whose
// command did not run), not known when one reply does not tell (HSET answers the number
// of new fields, 0 also when it updated one; SET ... GET answers the old value).

// respEffect is what one reply proves its command changed.
type respEffect int8

const (
	respUnknown respEffect = iota
	respChanged
	respNothing
)

// respAlways change their key whenever they succeed: a non-null, non-error reply.
var respAlways = setOf(
	"INCR", "INCRBY", "DECR", "DECRBY", "INCRBYFLOAT", "HINCRBY", "HINCRBYFLOAT", "ZINCRBY",
	"APPEND", "LPUSH", "RPUSH", "MSET", "HMSET", "SETEX", "PSETEX", "GETSET", "LSET", "RENAME",
)

// respCounted answer an integer that counts what they changed: 0 is nothing.
var respCounted = setOf(
	"DEL", "UNLINK", "SADD", "SREM", "ZREM", "HDEL", "LREM", "SETNX", "HSETNX", "MSETNX",
	"EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT", "PERSIST", "SMOVE", "RENAMENX", "LPUSHX",
	"RPUSHX", "ZREMRANGEBYSCORE", "ZREMRANGEBYRANK", "ZREMRANGEBYLEX",
)

// respPops answer what they removed, or null when there was nothing to remove.
var respPops = setOf("LPOP", "RPOP", "SPOP", "ZPOPMIN", "ZPOPMAX", "LMOVE", "RPOPLPUSH", "GETDEL")

// effectOfReply reads the reply (its first token: type, line, null) to command name.
func effectOfReply(name string, typ byte, line string, null bool) respEffect {
	switch {
	case typ == '-' || typ == '!':
		return respNothing // an error: the command did not run
	case respReads[name]:
		return respNothing
	case respAlways[name]:
		if null {
			return respUnknown
		}
		return respChanged
	case name == "SET":
		if typ == '+' {
			return respChanged // OK: it set the key (with NX or XX, nil when it did not)
		}
		return respUnknown // nil (NX or XX not met) or, with GET, the old value
	case respCounted[name]:
		if typ != ':' {
			return respUnknown
		}
		n, ok := respInt([]byte(line[1:]))
		switch {
		case !ok:
			return respUnknown
		case n > 0:
			return respChanged
		}
		return respNothing
	case respPops[name]:
		if null {
			return respNothing
		}
		return respChanged
	}
	return respUnknown
}

// respTxnEffect gathers the replies to the commands of one transaction (a single
// command, or the commands of a MULTI ... EXEC block in order).
type respTxnEffect struct {
	cmds    []string // the commands, in the order their replies come
	n       int      // replies read so far
	tags    []string
	changed bool // one reply proves a change
	unknown bool // one reply does not tell, or a command is not known
}

// add reads the next reply.
func (t *respTxnEffect) add(typ byte, tag string, null bool) {
	name := ""
	if t.n < len(t.cmds) {
		name = t.cmds[t.n]
	}
	t.n++
	if len(t.tags) < maxShownTags {
		t.tags = append(t.tags, tag)
	}
	switch effectOfReply(name, typ, tag, null) {
	case respChanged:
		t.changed = true
	case respUnknown:
		t.unknown = true
	}
}

// result returns the tags read and what they prove: nil unless every command's reply
// was read and says.
func (t *respTxnEffect) result() ([]string, *bool) {
	yes, no := true, false
	switch {
	case t.changed:
		return t.tags, &yes
	case t.unknown || t.n != len(t.cmds):
		return t.tags, nil
	}
	return t.tags, &no
}

// respExecHold is a cut EXEC whose reply is held until its array is whole.
type respExecHold struct {
	p   *Pending
	tag string // the array's header, the proof of commit
	eff respTxnEffect
}

// execReply consumes the bytes of a held EXEC reply: each element at the array's top
// level is read against the command it answers, and the cut falls once the array ends.
func (c *respConn) execReply(b []byte) (int, Verdict) {
	f := &c.down
	depth := len(f.stack)
	if n, ok := f.inside(b); ok {
		return n, c.execVerdict(false)
	}
	typ := b[0]
	n, tag, null, ok := f.token(b)
	switch {
	case !ok && n == 0:
		return 0, Verdict{}
	case !ok:
		// The replies stopped framing: the array's header proved the commit already.
		return n, c.execVerdict(true)
	case depth == 1 && (typ == '|' || typ == '>'):
		c.exec.eff.unknown = true
	case depth == 1:
		c.exec.eff.add(typ, tag, null)
	}
	return n, c.execVerdict(false)
}

// execVerdict cuts the held EXEC once its reply is whole (or framing is lost); until
// then the bytes are held.
func (c *respConn) execVerdict(lost bool) Verdict {
	f := &c.down
	if !lost && (len(f.stack) > 0 || f.bulk > 0 || f.line) {
		return Verdict{}
	}
	h := c.exec
	c.exec = nil
	if lost {
		h.eff.unknown = true
	}
	tags, changed := h.eff.result()
	return Verdict{Action: Cut, Pending: h.p, Tag: h.tag, Tags: tags, Changed: changed}
}
