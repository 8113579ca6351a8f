package servers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Instance is the lifecycle that every launcher shares: a temporary directory (and more
// if need be) with the owner marker that a later launch and `indoubt clean` read, a log
// file the launcher opens and hands to the server, the server process once it is
// ready, a Stop that runs once, and the process faults (process_faults.go) that keep
// the data, the port and the password.
//
// A launcher keeps one in its server type, not embedded, sets the exported fields
// before the first call, embeds its Handle (Pid, Exited and the process faults) and
// gives its server its own exported Stop, whose doc comment states that server's
// shutdown. Once the server is started, the methods are safe for concurrent use.
type Instance struct {
	// Name is the server, "postgres": it prefixes errors and names the temporary
	// directory (indoubt-NAME-PID-...).
	Name string
	// Keep leaves the directories in place after Stop, or after a failed start.
	Keep bool
	// StopSignal is the server's graceful shutdown signal; StopGrace is how long Stop
	// waits after it before it kills the process group.
	StopSignal syscall.Signal
	StopGrace  time.Duration
	// DiscardSignal, when set, is the signal Stop sends instead of StopSignal when the
	// directories are removed afterwards (no Keep): what a clean shutdown would save is
	// thrown away.
	DiscardSignal syscall.Signal

	dirs []string // removed by cleanup unless Keep; dirs[0] is the server's temporary directory
	log  *os.File // the server log, closed by cleanup
	proc *Process // the server process once it is ready

	stopOnce sync.Once
	stopErr  error

	// For the process faults: relaunch starts the server again on its data and port;
	// mu guards proc and down against a concurrent Stop.
	relaunch func(ctx context.Context) error
	mu       sync.Mutex
	down     bool

	// mount is the filesystem the data directory sits on (mount.go); nil without one.
	// cleanup unmounts it before removing dirs.
	mount Mount
}

// MakeTempDir makes the server's temporary directory under parent ("" means
// os.TempDir()) after checking that acct can reach parent, with the owner marker (see
// MakeOwnedDir), and returns its absolute path: the server runs with its own working
// directory, and os.MkdirTemp may return a relative one. It first removes the
// leftovers of killed harnesses in parent and in os.TempDir(), as every launch does.
func (s *Instance) MakeTempDir(parent string, acct Account) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	if err := acct.CheckReach(parent); err != nil {
		return "", fmt.Errorf("%s: %w", s.Name, err)
	}
	reapLeftovers(parent, os.TempDir())
	dir, err := s.MakeOwnedDir(parent, s.Name)
	if err != nil {
		return "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %w", s.Name, err)
	}
	s.dirs[len(s.dirs)-1] = dir
	return dir, nil
}

// MakeOwnedDir makes another temporary directory of the server under parent, named
// for kind and this process (TempDirPattern), with the owner marker that lets a later
// launch or `indoubt clean` remove it should this process die without cleaning up.
// Stop removes it with the others unless Keep.
func (s *Instance) MakeOwnedDir(parent, kind string) (string, error) {
	dir, err := os.MkdirTemp(parent, TempDirPattern(kind))
	if err != nil {
		return "", fmt.Errorf("%s: %w", s.Name, err)
	}
	if err := writeOwner(dir, s.Keep, nil); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("%s: %w", s.Name, err)
	}
	s.dirs = append(s.dirs, dir)
	return dir, nil
}

// OpenLog opens the server log at path for appending; Stop closes it. The launcher
// opens it and hands it to the server as stdout and stderr (Log), so the server's user
// needs no permission for it and it can live anywhere the caller can write.
func (s *Instance) OpenLog(path string) error {
	log, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("%s: log: %w", s.Name, err)
	}
	s.log = log
	return nil
}

// Log returns the log OpenLog opened, nil before.
func (s *Instance) Log() *os.File { return s.log }

// Abandon cleans up after a failed start (closes the log, unmounts the DataFS, removes
// the directories unless Keep) and returns err, naming the kept directory when Keep is
// set. The start's error is the one worth reporting, so cleanup's is dropped.
func (s *Instance) Abandon(err error) error {
	_ = s.cleanup()
	if s.Keep && len(s.dirs) > 0 {
		err = fmt.Errorf("%w (kept %s)", err, s.dirs[0])
	}
	return err
}

// SetProcess records p as the server process, once it is ready: the one Stop and the
// process faults act on. A launcher calls it at the first start and at every start
// again (SetRelaunch).
func (s *Instance) SetProcess(p *Process) { s.proc = p }

// Process returns the server process SetProcess recorded.
func (s *Instance) Process() *Process { return s.proc }

// Stop sends StopSignal (or DiscardSignal) to the server process, waits up to
// StopGrace, kills its process group if need be, then closes the log, unmounts the
// DataFS and removes the directories unless Keep. Every call returns the first call's
// result, after the server is gone. A server never started (no SetProcess: a cluster's
// start failed before it) has only its directories and log to remove.
func (s *Instance) Stop() error {
	return s.stopWith(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.proc == nil {
			return nil
		}
		if s.down {
			// Killed by a process fault and not started again: nothing runs.
			return nil
		}
		// A paused server must run to hear the signal.
		_ = signalTree(s.proc.Pid(), syscall.SIGCONT)
		sig := s.StopSignal
		if s.DiscardSignal != 0 && !s.Keep {
			sig = s.DiscardSignal
		}
		return s.proc.Stop(sig, s.StopGrace)
	})
}

// stopWith runs halt and then cleanup, once; every call returns the first call's result.
func (s *Instance) stopWith(halt func() error) error {
	s.stopOnce.Do(func() {
		s.stopErr = errors.Join(halt(), s.cleanup())
	})
	return s.stopErr
}

// cleanup closes the log and, unless Keep, removes dirs.
func (s *Instance) cleanup() error {
	var errs []error
	if s.log != nil {
		errs = append(errs, s.log.Close())
		s.log = nil
	}
	if s.mount != nil {
		// Unmount is a clean shutdown: what the server wrote stays, for Keep.
		if err := s.mount.Unmount(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
		}
		s.mount = nil
	}
	if !s.Keep {
		for _, dir := range s.dirs {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", s.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Progress returns the progress printer of a start: one line to w, prefixed with the
// server's name, or nothing when w is nil.
func (s *Instance) Progress(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) {
		if w != nil {
			fmt.Fprintf(w, s.Name+": "+format+"\n", args...)
		}
	}
}

// ErrAddrInUse marks a start that failed because another process bound the port
// first: ListenOnFreePort tries another port then.
var ErrAddrInUse = errors.New("address in use")

// ListenOnFreePort calls listen with a free port until it returns nil or an error that
// does not match ErrAddrInUse, or three ports were taken: FreePort can lose a race with
// another process for the port, and then another port is worth a try. say reports each
// retry.
func (s *Instance) ListenOnFreePort(say func(string, ...any), listen func(port int) error) error {
	for attempt := 1; ; attempt++ {
		port, err := FreePort()
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		err = listen(port)
		if err == nil || attempt == 3 || !errors.Is(err, ErrAddrInUse) {
			return err
		}
		say("port %d was taken; retrying", port)
	}
}

// LogTail returns the server log at path from offset on (at most its last 64 KiB), ""
// when it cannot be read: what a failed start says, for its error.
func LogTail(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > 64<<10 {
		offset = fi.Size() - 64<<10
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// Launch starts cmd as the server process, on node (nil: this machine's network) as
// acct, with the server log (OpenLog) as its stdout and stderr, and records it in the
// owner markers (Track) before it returns: a harness killed while the launcher waits
// for the server to be ready leaves a server that the next launch or `indoubt clean`
// finds. It returns the process, which is not the Instance's until SetProcess (once it
// is ready), and where the log ended before it, from which LogTail reads what a failed
// start said. name names the process in errors.
func (s *Instance) Launch(node *Node, name string, cmd *exec.Cmd, acct Account) (proc *Process, logStart int64, err error) {
	cmd.Stdout, cmd.Stderr = s.log, s.log
	logStart, _ = s.log.Seek(0, io.SeekEnd)
	if proc, err = StartProcessOn(node, name, cmd, acct); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", s.Name, err)
	}
	if err := s.Track(proc); err != nil {
		// Every process of it: a server may have forked already.
		killTree(proc.Pid())
		_ = proc.reap()
		return nil, 0, err
	}
	return proc, logStart, nil
}

// NotReady kills proc, a server Launch started that did not get ready (err, from Poll),
// and returns the start's error with what the server log said since logStart. When the
// log holds one of inUse, the server's words for a port another process took, the error
// matches ErrAddrInUse, and ListenOnFreePort tries another port.
func (s *Instance) NotReady(proc *Process, logStart int64, port int, err error, inUse ...string) error {
	_ = proc.Stop(syscall.SIGKILL, time.Second)
	tail := LogTail(s.log.Name(), logStart)
	for _, words := range inUse {
		if strings.Contains(tail, words) {
			return fmt.Errorf("%s: port %d: %w: %s", s.Name, port, ErrAddrInUse, tail)
		}
	}
	return fmt.Errorf("%s: start: %w: %s", s.Name, err, tail)
}
