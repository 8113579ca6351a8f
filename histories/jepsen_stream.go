package histories

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// JepsenEDNReader reads a Jepsen EDN history one op at a time, as Reader reads JSONL:
// memory follows the op being read, never the file, so that a history of any length
// can be checked by the checkers that take events as they come, and reading stops
// within one op when its caller stops asking (on SIGINT, say).
//
// It reads what ReadJepsenEDN documents, with these rules for what only a reader of
// the whole file could otherwise decide:
//   - The first op says whether the file numbers its ops: when it has an :index, every
//     op must have one (0 or more, increasing), and Index is the file's; when it has
//     none, no op may have one, and Index is the op's position (0, 1, ...). :time is
//     read the same way (position when absent). An op that breaks the rule is refused
//     at its line.
//   - A client's completion whose time is earlier than its invocation's is refused at
//     its line.
//   - An op map, like a JSONL line, may be MaxLine bytes long or as long as the history
//     before it; a longer one is refused at its line without being read whole.
//
// Next returns io.EOF at the end of the history, and an error wrapping ErrEmpty when
// the input holds no op at all. A JepsenEDNReader is not safe for concurrent use.
type JepsenEDNReader struct {
	name string
	src  io.Reader
	opt  JepsenOptions
	buf  []byte // the window: p.src is buf[:n]
	p    jepsenParser
	// consumed is how many bytes of the input came before buf[0].
	consumed int64
	started  bool
	closer   byte // ']' or ')' for a history that is one collection, else 0
	done     bool
	err      error // sticky
	fast     jepsenFast

	count             int64 // ops returned
	useIndex, useTime bool
	lastIndex, lastLn int64
	times             openTimes
}

// jepsenWindow is the size the window starts at; it grows for a longer op map.
const jepsenWindow = 256 << 10

// NewJepsenEDNReader returns a reader of the Jepsen EDN history r; name is used in
// errors, which give the line. Nothing is read until the first Next.
func NewJepsenEDNReader(r io.Reader, name string, opt JepsenOptions) *JepsenEDNReader {
	er := &JepsenEDNReader{name: name, src: r, opt: opt, buf: make([]byte, 0, jepsenWindow)}
	er.p = jepsenParser{name: name, line: 1, f: opt.F}
	er.times.several = opt.SeveralOpen
	return er
}

// fill keeps the window from mark on (moving it to the front) and reads more of the
// input after it, growing the window when the value being read fills it. It errs
// when the input cannot be read or the value at mark is longer than lineLimit allows.
func (r *JepsenEDNReader) fill(mark int) error {
	keep := copy(r.buf[:cap(r.buf)], r.buf[mark:])
	r.consumed += int64(mark)
	r.buf = r.buf[:keep]
	r.p.pos -= mark
	if keep > cap(r.buf)/2 {
		// Grow early, so that a long value is parsed again only a few times.
		limit := lineLimit(r.consumed)
		if int64(keep) > limit {
			return r.p.errAt(r.p.line, "value longer than %d bytes", limit)
		}
		if size := min(2*int64(cap(r.buf)), limit+1); size > int64(cap(r.buf)) {
			grown := make([]byte, keep, size)
			copy(grown, r.buf)
			r.buf = grown
		}
	}
	r.p.src = r.buf
	for range 100 {
		n, err := r.src.Read(r.buf[keep:cap(r.buf)])
		r.buf = r.buf[:keep+n]
		r.p.src = r.buf
		if err == io.EOF {
			r.p.final = true
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", r.name, err)
		}
		if n > 0 {
			return nil
		}
	}
	return fmt.Errorf("read %s: %w", r.name, io.ErrNoProgress)
}

// retry reports whether the parse that started at mark looked past the window, and
// if so rewinds to mark and reads more; a parse with the whole value before it is
// final.
func (r *JepsenEDNReader) retry(mark, line int) (bool, error) {
	if !r.p.short {
		return false, nil
	}
	r.p.pos, r.p.line, r.p.short = mark, line, false
	return true, r.fill(mark)
}

// skipSpace moves past space, commas and comments, reading more of the input as it
// goes: what lies between values is consumed, never held, however long it is. Only a
// comment cut by the window's end is kept, to be read again whole.
func (r *JepsenEDNReader) skipSpace() error {
	p := &r.p
	for {
		for p.pos < len(p.src) {
			c := p.src[p.pos]
			switch {
			case c == '\n':
				p.line++
				p.pos++
				continue
			case c == ' ' || c == '\t' || c == '\r' || c == ',' || c == '\f' || c == '\v':
				p.pos++
				continue
			case c == ';':
				if i := bytes.IndexByte(p.src[p.pos:], '\n'); i >= 0 {
					p.pos += i
					continue
				}
				if p.final {
					p.pos = len(p.src)
					continue
				}
				if err := r.fill(p.pos); err != nil {
					return err
				}
				continue
			}
			return nil
		}
		if p.final {
			return nil
		}
		if err := r.fill(p.pos); err != nil {
			return err
		}
	}
}

// start reads up to the first significant byte: a history that is one vector or list
// is read element by element.
func (r *JepsenEDNReader) start() error {
	if err := r.skipSpace(); err != nil {
		return err
	}
	if r.p.pos < len(r.p.src) {
		switch r.p.src[r.p.pos] {
		case '[':
			r.closer = ']'
		case '(':
			r.closer = ')'
		}
	}
	if r.closer != 0 {
		r.p.pos++
	}
	r.started = true
	return nil
}

// Next returns the next op; io.EOF at the end of the history.
func (r *JepsenEDNReader) Next() (Op, error) {
	if r.err != nil {
		return Op{}, r.err
	}
	op, err := r.next()
	if err != nil {
		r.err = err
	}
	return op, err
}

func (r *JepsenEDNReader) next() (Op, error) {
	if !r.started {
		if err := r.start(); err != nil {
			return Op{}, err
		}
	}
	for !r.done {
		if err := r.skipSpace(); err != nil {
			return Op{}, err
		}
		mark, line := r.p.pos, r.p.line
		var op Op
		var m jepsenMeta
		ok := false
		if jepsenFastOn {
			op, m, ok = r.fast.op(&r.p)
		}
		var v jepsenValue
		var err error
		if !ok {
			r.p.pos, r.p.line = mark, line
			v, err = r.p.next(r.closer, 1)
		}
		if again, ferr := r.retry(mark, line); again || ferr != nil {
			if ferr != nil {
				return Op{}, ferr
			}
			continue
		}
		if ok {
			if err := r.number(&op, m); err != nil {
				return Op{}, err
			}
			return op, nil
		}
		if err == errJepsenEnd {
			if err := r.end(); err != nil {
				return Op{}, err
			}
			break
		}
		if err != nil {
			return Op{}, err
		}
		op, m, err = jepsenOp(&r.p, v)
		if err != nil && r.opt.SkipBadLines {
			continue
		}
		if err != nil {
			return Op{}, err
		}
		if err := r.number(&op, m); err != nil {
			return Op{}, err
		}
		return op, nil
	}
	if r.count == 0 {
		return Op{}, fmt.Errorf("%s: %w: expected Jepsen op maps in EDN (--format jepsen-edn) such as {:type :invoke, :f :read, :process 0}", r.name, ErrEmpty)
	}
	return Op{}, io.EOF
}

// end reads past the closing bracket of a history that is one collection, and makes
// sure nothing but space and comments follows it.
func (r *JepsenEDNReader) end() error {
	r.done = true
	if r.closer == 0 {
		return nil
	}
	r.p.pos++
	if err := r.skipSpace(); err != nil {
		return err
	}
	if r.p.pos < len(r.p.src) {
		return r.p.errAt(r.p.line, "data after the history's closing %q", r.closer)
	}
	return nil
}

// number sets op's Index and Time by the rules of JepsenEDNReader, and refuses what
// breaks them at m's line.
func (r *JepsenEDNReader) number(op *Op, m jepsenMeta) error {
	if r.count == 0 {
		r.useIndex, r.useTime = m.hasIndex, m.hasTime
	}
	switch {
	case m.hasIndex && !r.useIndex:
		return r.p.errAt(m.line, "op has an :index, but the first op has none: give every op an :index, or none")
	case !m.hasIndex && r.useIndex:
		return r.p.errAt(m.line, "op has no :index, but the first op has one: give every op an :index, or none")
	case m.hasTime && !r.useTime:
		return r.p.errAt(m.line, "op has a :time, but the first op has none: give every op a :time, or none")
	case !m.hasTime && r.useTime:
		return r.p.errAt(m.line, "op has no :time, but the first op has one: give every op a :time, or none")
	}
	op.Index, op.Time = r.count, r.count
	if m.hasIndex {
		if m.index < 0 {
			return r.p.errAt(m.line, ":index %d is negative", m.index)
		}
		if r.count > 0 && m.index <= r.lastIndex {
			return r.p.errAt(m.line, ":index %d does not increase on :index %d of line %d: duplicated or reordered ops", m.index, r.lastIndex, r.lastLn)
		}
		op.Index, r.lastIndex, r.lastLn = m.index, m.index, int64(m.line)
	}
	if m.hasTime {
		op.Time = m.time
	}
	if op.Process >= 0 {
		var err error
		if op.Type == Invoke {
			err = r.times.invoke(op.Process, op.Time, int64(m.line))
		} else {
			err = r.times.complete(op.Process, op.Type, op.Time, int64(m.line))
		}
		if err != nil {
			return r.p.errAt(m.line, "%v", err)
		}
	}
	r.count++
	return nil
}

// jepsenFastOn turns jepsenFast on; the tests turn it off to hold the two paths
// together.
var jepsenFastOn = true

// ReadJepsenEDN reads a Jepsen history in EDN: a vector or list of op maps, or op maps
// one after another, with or without commas. name is used in errors, which give the
// line. Keys other than :type, :f, :process, :value, :time, :index, :error, :op-id,
// :conn and :attempt are ignored. :process is a worker's number (0 or more) or
// :nemesis: ops of the nemesis (with :f :start, :stop or any other) are kept as events
// of the Nemesis process with their own type (checkers skip them, and show them as
// fault annotations), and any other process (a negative number, another keyword or a
// string) is refused at its line, so that no client op is ever dropped or read as the
// nemesis's. An op with no :process, or :process nil, is no client's (Jepsen's
// client-op? holds for an integer process alone, and Elle's checkers keep client ops
// only): it is read as an event of the Nemesis process, which no checker checks. Index and Time are numbered as JepsenEDNReader says: the file's when its
// first op gives them (and then every op must), positions otherwise.
//
// Input with no op at all (empty, only values that are not ops under
// opt.SkipBadLines) is refused with an error wrapping ErrEmpty. A history of nemesis
// events alone is a history: its check says nothing was checked. ReadJepsenEDN holds
// every op in memory; JepsenEDNReader reads one at a time.
func ReadJepsenEDN(r io.Reader, name string, opt JepsenOptions) ([]Op, error) {
	er := NewJepsenEDNReader(r, name, opt)
	var ops []Op
	for {
		op, err := er.Next()
		if errors.Is(err, io.EOF) {
			return ops, nil
		}
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
}
