package histories

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Writer streams a history to a file as JSONL. It keeps only a buffer in memory, flushes
// and fsyncs at least once per SyncInterval and at Close, so a harness crash leaves a
// file readable up to its last complete line. Writer is safe for concurrent use; it
// assigns Index in the order events are written.
type Writer struct {
	mu     sync.Mutex
	f      *os.File
	buf    *bufio.Writer
	line   []byte // the event being encoded, reused
	next   int64
	dirty  bool
	err    error
	done   chan struct{}
	closed bool
	wg     sync.WaitGroup
}

// SyncInterval is the longest a written event stays only in memory.
const SyncInterval = time.Second

// Create creates path and writes h as its first line.
func Create(path string, h Header) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	if h.Format == "" {
		h.Format = FormatV1
	}
	w := &Writer{f: f, buf: bufio.NewWriterSize(f, 64<<10), done: make(chan struct{})}
	line, err := json.Marshal(struct {
		Header Header `json:"header"`
	}{h})
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("encode history header: %w", err)
	}
	w.buf.Write(append(line, '\n'))
	if err := w.syncLocked(); err != nil {
		f.Close()
		return nil, err
	}
	w.wg.Add(1)
	go w.syncLoop()
	return w, nil
}

func (w *Writer) syncLoop() {
	defer w.wg.Done()
	t := time.NewTicker(SyncInterval / 2)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.mu.Lock()
			if w.dirty && w.err == nil {
				w.err = w.syncLocked()
			}
			w.mu.Unlock()
		}
	}
}

func (w *Writer) syncLocked() error {
	if err := w.buf.Flush(); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("sync history: %w", err)
	}
	w.dirty = false
	return nil
}

// Write appends op, setting its Index, and returns the Index given. The first error
// writing the file is returned by this and every later call.
func (w *Writer) Write(op Op) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return -1, w.err
	}
	if w.closed {
		return -1, fmt.Errorf("write history: writer closed")
	}
	op.Index = w.next
	line, err := appendOp(w.line[:0], op)
	if err != nil {
		return -1, fmt.Errorf("encode history event: %w", err)
	}
	w.line = line
	if _, err := w.buf.Write(append(line, '\n')); err != nil {
		w.err = fmt.Errorf("write history: %w", err)
		return -1, w.err
	}
	w.next++
	w.dirty = true
	return op.Index, nil
}

// Len returns the number of events written.
func (w *Writer) Len() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// Sync flushes and fsyncs what was written so far.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	w.err = w.syncLocked()
	return w.err
}

// Close flushes, fsyncs and closes the file. It is safe to call more than once.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return w.err
	}
	w.closed = true
	close(w.done)
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.syncLocked()
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("close history: %w", err)
	}
	return w.err
}
