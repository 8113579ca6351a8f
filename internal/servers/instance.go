package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// instance is the lifecycle that every launcher shares: a temporary directory, a log file
// the caller opened, and a Stop that runs once. The launchers embed it and keep their own
// exported Pid, Exited and Stop, whose doc comments state each server's shutdown.
type instance struct {
	name  string   // the server, "postgres": prefixes errors
	keep  bool     // leave dirs in place after Stop or a failed start
	dirs  []string // removed by cleanup unless keep; dirs[0] is the server's temporary directory
	log   *os.File // the server log, closed by cleanup
	proc  *Process // the server process once it is ready; nil for a server run in-process
	sig   syscall.Signal
	grace time.Duration // how long stop waits after sig before it kills the process group
	// discardSig, when set, is the signal stop sends instead of sig when the directories
	// are removed afterwards (no keep): what a clean shutdown would save is thrown away.
	discardSig syscall.Signal

	stopOnce sync.Once
	stopErr  error

	// For the process faults (process_faults.go): relaunch starts the server again on
	// its data and port; mu guards proc and down against a concurrent Stop.
	relaunch func(ctx context.Context) error
	mu       sync.Mutex
	down     bool

	// mount is the filesystem the data directory sits on (mount.go); nil without one.
	// cleanup unmounts it before removing dirs.
	mount Mount
	// mountBacking and mountPoint are its directories when the launch asked for one,
	// set before the server's files are made.
	mountBacking, mountPoint string
}

// makeTempDir makes the server's temporary directory under parent ("" means os.TempDir())
// after checking that acct can reach parent, records it as dirs[0] and returns its
// absolute path: the server runs with its own working directory, and MkdirTemp may return
// a relative one.
func (s *instance) makeTempDir(parent string, acct Account) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	if err := acct.CheckReach(parent); err != nil {
		return "", fmt.Errorf("%s: %w", s.name, err)
	}
	reapLeftovers(parent, os.TempDir())
	dir, err := s.makeOwnedDir(parent, s.name)
	if err != nil {
		return "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %w", s.name, err)
	}
	s.dirs[len(s.dirs)-1] = dir
	return dir, nil
}

// makeOwnedDir makes a temporary directory under parent named for kind and this
// process, with the owner marker that lets a later launch or `indoubt clean` remove it
// should this process die without cleaning up, and appends it to dirs.
func (s *instance) makeOwnedDir(parent, kind string) (string, error) {
	dir, err := os.MkdirTemp(parent, tempDirPattern(kind))
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.name, err)
	}
	if err := writeOwner(dir, s.keep, nil); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %w", s.name, err)
	}
	s.dirs = append(s.dirs, dir)
	return dir, nil
}

// openLog opens the server log for appending. The caller opens it and hands it to the
// server as stdout and stderr, so the server's user needs no permission for it and it can
// live anywhere the caller can write.
func (s *instance) openLog(path string) error {
	log, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log: %w", s.name, err)
	}
	s.log = log
	return nil
}

// abandon cleans up after a failed start and returns err, naming the kept directory when
// keep is set. The start's error is the one worth reporting, so cleanup's is dropped.
func (s *instance) abandon(err error) error {
	_ = s.cleanup()
	if s.keep && len(s.dirs) > 0 {
		err = fmt.Errorf("%w (kept %s)", err, s.dirs[0])
	}
	return err
}

// stop sends sig to the server process, waits up to grace, kills its process group if
// need be, then cleans up. Every call returns the first call's result, after the server
// is gone.
func (s *instance) stop() error {
	return s.stopWith(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			// Killed by a process fault and not started again: nothing runs.
			return nil
		}
		// A paused server must run to hear the signal.
		_ = syscall.Kill(-s.proc.Pid(), syscall.SIGCONT)
		sig := s.sig
		if s.discardSig != 0 && !s.keep {
			sig = s.discardSig
		}
		return s.proc.Stop(sig, s.grace)
	})
}

// stopWith runs halt and then cleanup, once; every call returns the first call's result.
func (s *instance) stopWith(halt func() error) error {
	s.stopOnce.Do(func() {
		s.stopErr = errors.Join(halt(), s.cleanup())
	})
	return s.stopErr
}

// cleanup closes the log and, unless keep, removes dirs.
func (s *instance) cleanup() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
		s.log = nil
	}
	if s.mount != nil {
		// Unmount is a clean shutdown: what the server wrote stays, for Keep.
		if err := s.mount.Unmount(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
		}
		s.mount = nil
	}
	if !s.keep {
		for _, dir := range s.dirs {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sayer returns the progress printer of a start: one line to w, prefixed with the server's
// name, or nothing when w is nil.
func (s *instance) sayer(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, s.name+": "+format+"\n", args...)
		}
	}
}

// errAddrInUse marks a start that failed because another process bound the port first.
var errAddrInUse = errors.New("address in use")

// listenOnFreePort calls listen with a free port until it returns nil or an error other
// than errAddrInUse, or three ports were taken: FreePort can lose a race with another
// process for the port, and then another port is worth a try.
func (s *instance) listenOnFreePort(say func(string, ...any), listen func(port int) error) error {
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		err = listen(port)
		if err == nil || attempt == 3 || !errors.Is(err, errAddrInUse) {
			return err
		}
		say("port %d was taken; retrying", port)
	}
}
