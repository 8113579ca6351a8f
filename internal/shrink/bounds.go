package shrink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
)

// run runs cfg within the time budget: a run of config.json's duration (which may be
// anything: 1e18 ns was given) ends when the budget does, and is then Interrupted.
func (s *shrinker) run(cfg runner.Config) (*results.Results, error) {
	ctx, cancel := context.WithDeadline(s.ctx, s.deadline)
	defer cancel()
	return runner.Run(ctx, cfg)
}

// budgetSpent reports whether the budget, and not the caller's context, ended a run.
func (s *shrinker) budgetSpent() bool {
	return s.ctx.Err() == nil && s.spent()
}

// outMarker is the file Shrink puts in its output directory first: a directory with
// it and no shrink.json is what a shrink that was killed left, and the next shrink
// may take it over; any other directory at Out is the user's and is refused.
const outMarker = ".indoubt-shrink"

// prepareOut makes out, Shrink's output directory. A leftover of a shrink that did not
// finish (outMarker, no shrink.json) is removed first, and said so in the returned
// note; a finished shrink's directory, or any other, is refused.
func prepareOut(out string) (note string, err error) {
	if _, err := os.Lstat(out); err == nil {
		_, marked := os.Lstat(filepath.Join(out, outMarker))
		_, done := os.Lstat(filepath.Join(out, "shrink.json"))
		if marked != nil || done == nil {
			return "", fmt.Errorf("%s exists: remove it, or give another output directory", out)
		}
		if err := os.RemoveAll(out); err != nil {
			return "", err
		}
		note = fmt.Sprintf("removed %s, left by a shrink that did not finish", out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(out, 0o700); err != nil {
		return "", err
	}
	return note, os.WriteFile(filepath.Join(out, outMarker), nil, 0o600)
}
