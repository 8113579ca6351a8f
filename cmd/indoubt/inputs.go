package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// Inputs named on the command line may be anything: a FIFO with no writer (whose
// open waits for one), /dev/zero (which never ends), a pipe a program keeps writing.
// openInput and readInput keep such an input from holding a command past the signal
// that ends its context, and readInput bounds how much of it is read.

// openInput opens path for reading, returning when ctx ends if the open has not: a
// FIFO's open waits for a writer, where no context reaches. Once open, the file is
// closed when ctx ends, which ends a read blocked on a pipe; such a read then returns
// ctx's error, not the closed file's.
func openInput(ctx context.Context, path string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := openNoWait(path)
		ch <- opened{f, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, o.err
		}
		context.AfterFunc(ctx, func() { o.f.Close() })
		return o.f, nil
	case <-ctx.Done():
		go func() {
			if o := <-ch; o.f != nil {
				o.f.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

// openNoWait opens path for reading without waiting for a FIFO's writer: a FIFO is
// opened non-blocking, so that its reads go through Go's poller (they wait for data
// all the same, and a Close ends them) and a FIFO no program has opened for writing
// reads as empty, at once, where its open used to hold the command until a signal.
func openNoWait(path string) (*os.File, error) {
	if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
		return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	}
	return os.Open(path)
}

// ctxFile is an input opened by openInput whose reads, once ctx has ended, return
// ctx's error rather than the error of the file ctx closed.
type ctxFile struct {
	ctx context.Context
	f   *os.File
}

func (c ctxFile) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := c.f.Read(p)
	if err != nil && errors.Is(err, os.ErrClosed) && c.ctx.Err() != nil {
		return n, c.ctx.Err()
	}
	return n, err
}

// readInput reads the whole of path, at most max bytes of it (more is an error naming
// the bound), returning when ctx ends: --final /dev/zero used to be read until memory
// ran out, 10 GB at 68 s, and SIGTERM did not stop it.
func readInput(ctx context.Context, path string, max int64) ([]byte, error) {
	f, err := openInput(ctx, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(ctxFile{ctx, f}, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is longer than %d bytes", path, max)
	}
	return b, nil
}

// minFinal is the least --final may be: a final state longer than the history it
// ends (a read that names every effect of the run, a few bytes each) is not one.
const minFinal = 64 << 20

// readFinal reads --final, when given, into a.opt.Final: a JSON value of at most
// minFinal bytes or the history's size, read until ctx ends.
func (a *checkArgs) readFinal(ctx context.Context) error {
	if a.finalPath == "" {
		return nil
	}
	most := int64(minFinal)
	if fi, err := os.Stat(a.path); err == nil && fi.Mode().IsRegular() {
		most = max(most, fi.Size())
	}
	b, err := readInput(ctx, a.finalPath, most)
	if err != nil {
		return fmt.Errorf("check: --final: %w", err)
	}
	if !json.Valid(b) {
		return fmt.Errorf("check: --final %s: not a JSON value", a.finalPath)
	}
	a.opt.Final = b
	return nil
}
