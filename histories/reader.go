package histories

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/indoubt/indoubt/internal/jsonkeys"
)

// MaxLine is the longest line the readers accept at the start of a history. Further
// on, a line may be as long as everything before it: the longest line indoubt writes,
// a final read that lists every effect of the run (exactly-once, insert), names each
// operation in fewer bytes than the operation's own two lines took, so that what
// indoubt writes is always read back, however long the run. Input that is one endless
// line (/dev/zero, a file of no newlines) is refused after MaxLine bytes, and a long
// line costs memory in proportion to the history read before it, never more.
// ReadJepsenEDN and JepsenEDNReader hold each value to the same rule.
const MaxLine = 4 << 20

// lineLimit is the longest line allowed after read bytes of a history: MaxLine, or as
// long as what came before it.
func lineLimit(read int64) int64 {
	return max(MaxLine, read)
}

// ErrTruncated reports a last line without its newline that does not parse: the file was
// cut while it was being written.
var ErrTruncated = errors.New("history ends in a truncated line")

// ErrEmpty reports input with nothing of a history in it: no header line and no event.
// Such input is refused rather than read as a history of no operations, which every
// checker would call valid.
var ErrEmpty = errors.New("no history in it")

// Reader reads a JSONL history one event at a time. Errors name the file and the line.
// It refuses input with neither a header nor an event (ErrEmpty), a line that is not an
// event, and an event whose Index does not increase on the one before it: a history
// whose order cannot be trusted cannot be checked.
type Reader struct {
	name   string
	br     *bufio.Reader
	long   []byte // a line longer than br's buffer, put together
	read   int64  // bytes of the lines before the current one
	line   int
	header *Header
	// Partial makes a truncated last line end the history instead of failing with
	// ErrTruncated, as after a harness crash.
	Partial bool
	// Values, when set, reads the values of the events Next returns (see ValueReader);
	// ValueRead says of each event whether it did.
	Values ValueReader
	// Size, when known, is the history's size in bytes, for Progress.
	Size    int64
	taken   bool
	err     error // the first error of Next
	peeked  *Op
	eofNoNL bool
	// last is the Index and line of the previous event, for the order check.
	last, lastLine int64
	seen           bool
	dec            decoder
	times          openTimes
}

// ValueReader reads the values of a Reader's events in its place (Reader.Values). A
// consumer that decodes every value, as the transactional checkers do, would otherwise
// parse each twice: once as the Reader checks that it is JSON and copies it into
// Op.Value, and once as it decodes it.
type ValueReader interface {
	// ReadValue is given the bytes of an event's line from the first byte of its value
	// to the end of the line. It returns the length of the JSON value they start with,
	// having read it, or false to leave the value to the Reader, which then checks it
	// and copies it into Op.Value as it does without a ValueReader. What it accepts
	// must be a valid JSON value as encoding/json reads it: the Reader checks it no
	// further. The line may yet be refused after it (a field after the value), or be
	// read again by encoding/json, so what ReadValue keeps of it holds only once Next
	// returns the event and ValueRead says so. b stays valid until the Reader's next
	// call of Next.
	ReadValue(b []byte) (n int, ok bool)
}

// Progress returns the share of Size that the lines read so far make up, from 0 to 1;
// 0 when Size is unknown. A consumer sizes its tables from it once, rather than
// doubling them as the history goes.
func (r *Reader) Progress() float64 {
	if r.Size <= 0 {
		return 0
	}
	return min(1, float64(r.read)/float64(r.Size))
}

// ValueRead reports whether Values read the value of the event Next returned last: its
// Op then has no Value, and what the value was is for Values to say.
func (r *Reader) ValueRead() bool { return r.taken }

// NewReader returns a Reader of r; name is used in errors. It reads the header line, if
// any, at once.
func NewReader(r io.Reader, name string) (*Reader, error) {
	rd := &Reader{name: name, br: bufio.NewReaderSize(r, 64<<10)}
	if b, _ := rd.br.Peek(3); string(b) == "\xef\xbb\xbf" {
		return nil, fmt.Errorf("%s line 1: starts with a byte-order mark (U+FEFF), which JSON text does not begin with: write the file without it (Python: encoding=\"utf-8\", not \"utf-8-sig\")", name)
	}
	if err := rd.readFirst(); err != nil {
		return nil, err
	}
	return rd, nil
}

// nextLine returns the next line, its newline included when it has one, and io.EOF
// after the last. A line longer than lineLimit allows is an error. The line is valid
// until the next call.
func (r *Reader) nextLine() ([]byte, error) {
	if len(r.long) > MaxLine {
		r.long = nil // a long line's memory goes with it
	}
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		limit := lineLimit(r.read)
		r.long = append(r.long[:0], b...)
		for err == bufio.ErrBufferFull {
			if int64(len(r.long)) > limit {
				return nil, fmt.Errorf("%s line %d: line longer than %d bytes", r.name, r.line+1, limit)
			}
			b, err = r.br.ReadSlice('\n')
			r.long = append(r.long, b...)
		}
		b = r.long
		if int64(len(b)) > limit+1 {
			return nil, fmt.Errorf("%s line %d: line longer than %d bytes", r.name, r.line+1, limit)
		}
	}
	r.read += int64(len(b))
	switch {
	case err == io.EOF && len(b) > 0:
		return b, nil
	case err == io.EOF:
		return nil, io.EOF
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", r.name, err)
	}
	return b, nil
}

// Header returns the header line, or nil for a history without one.
func (r *Reader) Header() *Header { return r.header }

func (r *Reader) errf(format string, a ...any) error {
	return fmt.Errorf("%s line %d: %s", r.name, r.line, fmt.Sprintf(format, a...))
}

func (r *Reader) readFirst() error {
	raw, ok, err := r.rawLine()
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s: %w: expected a %s header line or JSON events, one per line", r.name, ErrEmpty, FormatV1)
	}
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte(`{"header"`)) {
		var h struct {
			Header *Header `json:"header"`
		}
		if err := json.Unmarshal(raw, &h); err != nil || h.Header == nil {
			return r.errf("malformed header: %v", jsonErr(err))
		}
		if !utf8.Valid(raw) {
			return r.errf("malformed header: not valid UTF-8")
		}
		if err := jsonkeys.Twice(raw, true); err != nil {
			return r.errf("malformed header: %v", err)
		}
		if h.Header.Format != "" && h.Header.Format != FormatV1 {
			return r.errf("unsupported history format %q", h.Header.Format)
		}
		r.header = h.Header
		return nil
	}
	var op Op
	if err := r.decode(raw, &op); err != nil {
		if r.eofNoNL && r.Partial {
			return nil
		}
		return err
	}
	if err := r.order(&op); err != nil {
		return err
	}
	r.peeked = &op
	return nil
}

// order refuses an event whose Index is negative or does not increase on the previous
// event's, a process that is neither a worker's nor the nemesis's, and a completion
// earlier than its invocation (see order.go).
func (r *Reader) order(op *Op) error {
	if op.Index < 0 {
		return r.errf("event index %d is negative", op.Index)
	}
	if r.seen && op.Index <= r.last {
		return r.errf("event index %d does not increase on index %d of line %d: duplicated or reordered events", op.Index, r.last, r.lastLine)
	}
	if err := checkProcess(int64(op.Process)); err != nil {
		return r.errf("%v", err)
	}
	var err error
	if op.Type == Invoke {
		err = r.times.invoke(op.Process, op.Time, int64(r.line))
	} else {
		err = r.times.complete(op.Process, op.Type, op.Time, int64(r.line))
	}
	if err != nil {
		return r.errf("%v", err)
	}
	r.last, r.lastLine, r.seen = op.Index, int64(r.line), true
	return nil
}

func jsonErr(err error) error {
	if err == nil {
		return errors.New("no header object")
	}
	return err
}

// rawLine returns the next non-blank line.
func (r *Reader) rawLine() ([]byte, bool, error) {
	for {
		b, err := r.nextLine()
		if err == io.EOF {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		r.line++
		r.eofNoNL = b[len(b)-1] != '\n'
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		return b, true, nil
	}
}

// decode reads event line raw into op, the zero Op.
func (r *Reader) decode(raw []byte, op *Op) error {
	r.dec.values, r.taken = r.Values, false
	if fastDecode && r.dec.decode(raw, op) {
		r.taken = r.dec.taken
	} else {
		var err error
		if *op, err = decodeJSON(raw); err != nil {
			if r.eofNoNL && !errors.Is(err, errTrailing) {
				return r.errf("%v", ErrTruncated)
			}
			return r.errf("malformed event: %v", err)
		}
	}
	if op.Type < Invoke || op.Type > Info {
		return r.errf("event has no type")
	}
	if !utf8.Valid(raw) {
		// JSON is UTF-8; encoding/json would read the bad bytes as U+FFFD, and two
		// different op ids or keys as one.
		return r.errf("malformed event: not valid UTF-8")
	}
	return nil
}

// fastDecode turns decodeFast on; the tests turn it off to hold the Reader's two paths
// together.
var fastDecode = true

// errTrailing reports data after an event's object on its line.
var errTrailing = errors.New("trailing data after the object")

// decodeJSON is the reading of an event line that decodeFast must equal: encoding/json,
// refusing data after the object.
func decodeJSON(raw []byte) (Op, error) {
	var op Op
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&op); err != nil {
		return Op{}, err
	}
	if dec.More() {
		return Op{}, errTrailing
	}
	if err := jsonkeys.Twice(raw, false); err != nil {
		return Op{}, err
	}
	return op, nil
}

// Next returns the next event; io.EOF at the end of the history.
func (r *Reader) Next() (Op, error) {
	var op Op
	if err := r.next(&op); err != nil {
		if err != io.EOF && r.err == nil {
			r.err = err
		}
		return Op{}, err
	}
	return op, nil
}

// NextInto is Next that reads the event into *op, overwriting all of it, rather than
// returning a copy: a reader of millions of events, some 170 bytes each, copies
// fewer. *op is the zero Op on an error.
func (r *Reader) NextInto(op *Op) error {
	*op = Op{}
	if err := r.next(op); err != nil {
		if err != io.EOF && r.err == nil {
			r.err = err
		}
		*op = Op{}
		return err
	}
	return nil
}

// Err returns the first error Next or NextInto returned, other than io.EOF: the one to
// report of a history whose events were taken by someone else (checker.CheckReader).
func (r *Reader) Err() error { return r.err }

// next reads the next event into op, the zero Op, which it leaves as it may on an error.
// An event is some 170 bytes, and a history millions of them: it is read in place.
func (r *Reader) next(op *Op) error {
	if r.peeked != nil {
		// Read by NewReader, before Values could be set.
		*op = *r.peeked
		r.peeked, r.taken = nil, false
		return nil
	}
	raw, ok, err := r.rawLine()
	if err != nil {
		return err
	}
	if !ok {
		return io.EOF
	}
	err = r.decode(raw, op)
	if err != nil && r.eofNoNL && r.Partial {
		return io.EOF
	}
	if err != nil {
		return err
	}
	return r.order(op)
}

// ReadAll reads the remaining events into memory.
func (r *Reader) ReadAll() ([]Op, error) {
	return r.readAll(nil)
}

// readAll appends every remaining event to ops.
func (r *Reader) readAll(ops []Op) ([]Op, error) {
	for {
		op, err := r.Next()
		if err == io.EOF {
			return ops, nil
		}
		if err != nil {
			return ops, err
		}
		ops = append(ops, op)
	}
}

// ReadFile reads a whole JSONL history file. With partial, a truncated last line is
// dropped instead of being an error.
func ReadFile(path string, partial bool) (*Header, []Op, error) {
	return ReadFileContext(context.Background(), path, partial)
}

// ReadFileContext is ReadFile that stops when ctx ends, returning ctx's error: a
// history of millions of events takes seconds to read, and a command given SIGTERM
// meanwhile must not read on to its end first.
func ReadFileContext(ctx context.Context, path string, partial bool) (*Header, []Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	h, ops, err := readFile(f, path, partial)
	if err != nil && ctx.Err() != nil {
		return nil, nil, ctx.Err()
	}
	return h, ops, err
}

// readFile reads the history f, named path, from its start.
func readFile(f *os.File, path string, partial bool) (*Header, []Op, error) {
	// One event per line after the header: counting the lines first lets the events go
	// into one slice of the right size, not a slice copied each time it grows.
	lines, err := countLines(f)
	if err != nil {
		return nil, nil, fmt.Errorf("read history: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, fmt.Errorf("read history: %w", err)
	}
	r, err := NewReader(f, path)
	if err != nil {
		return nil, nil, err
	}
	r.Partial = partial
	ops, err := r.readAll(make([]Op, 0, lines))
	if err != nil {
		return nil, nil, err
	}
	return r.Header(), ops, nil
}

// countLines counts the newlines from f's offset to its end.
func countLines(f io.Reader) (int, error) {
	buf := make([]byte, 1<<20)
	n := 0
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
	}
}
