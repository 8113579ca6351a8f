package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// finalCmdTimeout bounds --final-cmd: a final read is one query, and a command that
// never ends must not hold the run (its directory, its server) forever.
var finalCmdTimeout = 5 * time.Minute

// finalCmdMost is the most --final-cmd may print for a history of size bytes: the
// final read becomes one line of history.jsonl, and a line may be as long as the
// history before it (histories.MaxLine at least), less the event around the value.
func finalCmdMost(size int64) int64 {
	return max(histories.MaxLine, size) - 4096
}

// errTooLong is the error of a writer that was given more than it holds.
var errTooLong = errors.New("too long")

// boundedBuffer keeps what is written to it up to most bytes; past that, writes fail
// (the command writing is then killed by its context).
type boundedBuffer struct {
	b    []byte
	most int64
	over bool
	stop func()
}

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if int64(len(w.b)+len(p)) > w.most {
		if !w.over {
			w.over = true
			w.stop()
		}
		return 0, errTooLong
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// runFinalCmd runs line with sh -c and env under the supervisor the program runs
// under (startProgram), so that everything it starts ends with it, a daemon in a
// session of its own included (one used to outlive indoubt, holding the output open);
// it is killed when it prints more than most bytes, or runs past finalCmdTimeout (or
// ctx ends), and returns what it printed, one JSON value.
func runFinalCmd(ctx context.Context, line string, env []string, most int64) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, finalCmdTimeout)
	defer cancel()
	out := &boundedBuffer{most: most, stop: cancel}
	p, err := startProgram([]string{"sh", "-c", line}, env, out, os.Stderr)
	if err != nil {
		return nil, fmt.Errorf("--final-cmd: %v", err)
	}
	var e programExit
	select {
	case e = <-p.done:
	case <-ctx.Done():
		p.kill()
		e = <-p.done
	}
	if !e.ok() {
		err = fmt.Errorf("sh -c %s", e)
	}
	switch {
	case out.over:
		return nil, fmt.Errorf("--final-cmd printed more than %d bytes: a final read is one line of the history, at most as long as the history before it", most)
	case ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("--final-cmd did not end within %v", finalCmdTimeout)
	case err != nil:
		return nil, fmt.Errorf("--final-cmd: %v", err)
	}
	b := []byte(strings.TrimSpace(string(out.b)))
	if !json.Valid(b) {
		return nil, fmt.Errorf("--final-cmd printed %q, not one JSON value", shorten(string(b), 80))
	}
	return b, nil
}
