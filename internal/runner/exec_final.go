package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/supervise"
)

// FinalCmdTimeout bounds --final-cmd: a final read is one query, and a command that
// never ends must not hold the run (its directory, its server) forever. A variable so
// that a test can shorten it.
var FinalCmdTimeout = 5 * time.Minute

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
// under (supervise.Start), so that everything it starts ends with it, a daemon in a
// session of its own included (one used to outlive indoubt, holding the output open);
// it is killed when it prints more than most bytes, or runs past FinalCmdTimeout (or
// ctx ends), and returns what it printed, one JSON value. Its standard error goes to
// stderr.
func runFinalCmd(ctx context.Context, line string, env []string, stderr io.Writer, most int64) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, FinalCmdTimeout)
	defer cancel()
	out := &boundedBuffer{most: most, stop: cancel}
	p, err := supervise.Start([]string{"sh", "-c", line}, env, out, stderr)
	if err != nil {
		return nil, fmt.Errorf("--final-cmd: %v", err)
	}
	var e supervise.Exit
	select {
	case e = <-p.Done:
	case <-ctx.Done():
		p.Kill()
		e = <-p.Done
	}
	if !e.OK() {
		err = fmt.Errorf("sh -c %s", e)
	}
	switch {
	case out.over:
		return nil, fmt.Errorf("--final-cmd printed more than %d bytes: a final read is one line of the history, at most as long as the history before it", most)
	case ctx.Err() == context.DeadlineExceeded:
		return nil, fmt.Errorf("--final-cmd did not end within %v", FinalCmdTimeout)
	case err != nil:
		return nil, fmt.Errorf("--final-cmd: %v", err)
	}
	b := []byte(strings.TrimSpace(string(out.b)))
	if !json.Valid(b) {
		return nil, fmt.Errorf("--final-cmd printed %q, not one JSON value", shorten(string(b), 80))
	}
	return b, nil
}
