package checker

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// spillLog is an append-only log of records that a streaming checker writes once and
// reads back once, in order, at the end of the history: what it must keep for every
// operation but looks at only then. It holds one chunk in memory and writes each full
// chunk to a temporary file (removed as soon as it is created, so that nothing is left
// behind), so that the checker's memory stays flat however long the history. When the
// file cannot be created or written the chunks stay in memory instead: the check is the
// same, only its memory grows. The zero value is ready to use; close releases it.
type spillLog struct {
	buf  []byte   // the records not yet written out
	mem  [][]byte // chunks kept in memory, after those in the file
	f    *os.File
	name string // the file's name while it could not be removed
	good int64  // bytes of f that hold whole chunks
	// noFile is set once the file failed: every later chunk stays in memory.
	noFile bool
}

// spillChunk is the size from which spillLog writes its chunk out.
var spillChunk = 1 << 20

// spillDir is where spillLog creates its file ("": os.TempDir).
var spillDir = ""

// record ends a record: the chunk is written out once it is full, never in the middle of
// a record.
func (l *spillLog) record() {
	if len(l.buf) >= spillChunk {
		l.flush()
	}
}

// flush writes the chunk out, length first.
func (l *spillLog) flush() {
	if len(l.buf) == 0 {
		return
	}
	if !l.noFile && l.f == nil {
		f, err := os.CreateTemp(spillDir, "indoubt-check-*")
		if err != nil {
			l.noFile = true
		} else {
			l.f = f
			if os.Remove(f.Name()) != nil {
				l.name = f.Name() // removed on close instead
			}
		}
	}
	if !l.noFile {
		var n [binary.MaxVarintLen64]byte
		head := binary.PutUvarint(n[:], uint64(len(l.buf)))
		if _, err := l.f.Write(n[:head]); err == nil {
			_, err = l.f.Write(l.buf)
			if err == nil {
				l.good += int64(head + len(l.buf))
				l.buf = l.buf[:0]
				return
			}
		}
		l.noFile = true
	}
	l.mem = append(l.mem, l.buf)
	l.buf = make([]byte, 0, spillChunk)
}

// each calls fn on every chunk in order, each a sequence of whole records; fn must not
// keep the slice. It errs when the file cannot be read back, or with fn's error.
func (l *spillLog) each(fn func(chunk []byte) error) error {
	if l.f != nil && l.good > 0 {
		r := bufio.NewReaderSize(io.NewSectionReader(l.f, 0, l.good), 1<<16)
		var chunk []byte
		for {
			n, err := binary.ReadUvarint(r)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil || n > uint64(l.good) {
				return fmt.Errorf("reading back the check's temporary file: %v", orCorrupt(err))
			}
			if uint64(cap(chunk)) < n {
				chunk = make([]byte, n)
			}
			chunk = chunk[:n]
			if _, err := io.ReadFull(r, chunk); err != nil {
				return fmt.Errorf("reading back the check's temporary file: %v", err)
			}
			if err := fn(chunk); err != nil {
				return err
			}
		}
	}
	for _, c := range l.mem {
		if err := fn(c); err != nil {
			return err
		}
	}
	if len(l.buf) > 0 {
		return fn(l.buf)
	}
	return nil
}

func orCorrupt(err error) error {
	if err == nil {
		return errors.New("corrupt chunk length")
	}
	return err
}

// close removes the file and forgets the records.
func (l *spillLog) close() {
	if l.f != nil {
		l.f.Close()
		if l.name != "" {
			os.Remove(l.name)
		}
	}
	*l = spillLog{}
}

// errSpillCorrupt is what decoding a record that spillLog gave back finds when the
// bytes are not what was written.
var errSpillCorrupt = errors.New("the check's temporary records are corrupt")

// spillReader decodes the records of one chunk.
type spillReader struct {
	b   []byte
	err error
}

func (r *spillReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *spillReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *spillReader) byte() byte {
	if len(r.b) == 0 {
		r.fail()
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *spillReader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *spillReader) fail() {
	r.err = errSpillCorrupt
	r.b = nil
}

// ackTimes are the times of a history's acknowledged effects, in history order, written
// out as differences to a spillLog (a byte or three each), so that a streamed check
// keeps none of them in memory: what the lost writes need of them, at the end, is how
// many came before a time and the i-th earliest of those, each a walk over them.
type ackTimes struct {
	log  spillLog
	n    int64 // how many
	prev int64 // the last one added
}

func (a *ackTimes) add(t int64) {
	a.log.buf = binary.AppendVarint(a.log.buf, t-a.prev)
	a.prev = t
	a.n++
	a.log.record()
}

// each calls fn on every time, in the order they were added.
func (a *ackTimes) each(fn func(t int64)) error {
	var t int64
	return a.log.each(func(chunk []byte) error {
		in := spillReader{b: chunk}
		for len(in.b) > 0 {
			t += in.varint()
			if in.err != nil {
				return in.err
			}
			fn(t)
		}
		return nil
	})
}

// countBefore is how many times are before t.
func (a *ackTimes) countBefore(t int64) (int64, error) {
	var n int64
	err := a.each(func(x int64) {
		if x < t {
			n++
		}
	})
	return n, err
}

// nthBefore is the i-th earliest (from 0) of the times before t, of which there are
// more than i: found 16 bits at a time, by counting the times in each of the 65536
// ranges the bits found so far leave.
func (a *ackTimes) nthBefore(t, i int64) (int64, error) {
	var counts [1 << 16]int64
	var prefix uint64 // the bits found, of the time with its sign bit flipped
	for shift := 48; shift >= 0; shift -= 16 {
		clear(counts[:])
		err := a.each(func(x int64) {
			u := uint64(x) ^ 1<<63
			if x < t && (shift == 48 || u>>(shift+16) == prefix) {
				counts[u>>shift&0xffff]++
			}
		})
		if err != nil {
			return 0, err
		}
		b := 0
		for ; b < len(counts)-1 && i >= counts[b]; b++ {
			i -= counts[b]
		}
		prefix = prefix<<16 | uint64(b)
	}
	return int64(prefix ^ 1<<63), nil
}

func (a *ackTimes) close() { a.log.close() }
