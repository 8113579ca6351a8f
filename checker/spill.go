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
