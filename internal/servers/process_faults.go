package servers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The process faults of a launched server: what indoubt's nemesis does to the server
// itself, not to its connections. Every method acts on the whole process group (a
// PostgreSQL's backends die or stop with its postmaster), keeps the data directory, the
// port and the password, and is safe to call concurrently with Stop.

// ErrDown is returned by a process fault that needs a running server when the server
// was killed and not started again.
var ErrDown = errors.New("the server is down (killed and not started again)")

// Kill sends SIGKILL to the server's process group and reaps it: no shutdown, no flush,
// what was not on disk is gone. It returns once the group's last process is gone (or
// after 5 s), so that a start again does not meet what the old server held.
func (s *Instance) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return fmt.Errorf("%s: kill: %w", s.Name, ErrDown)
	}
	pgid := s.proc.Pid()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	_ = s.proc.reap()
	s.down = true
	// The leader is reaped; its children (PostgreSQL's backends) die a moment later,
	// and until they do they hold the shared memory a new postmaster refuses to share.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !groupRunning(pgid) {
			break
		}
	}
	return nil
}

// Signal sends sig to the server's process group: SIGSTOP pauses the server, SIGCONT
// resumes it, SIGHUP makes PostgreSQL and Redis reread their configuration.
func (s *Instance) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return fmt.Errorf("%s: %v: %w", s.Name, sig, ErrDown)
	}
	if err := syscall.Kill(-s.proc.Pid(), sig); err != nil {
		return fmt.Errorf("%s: %v: %w", s.Name, sig, err)
	}
	return nil
}

// SetRelaunch sets how StartAgain starts the server again on its data and its port: a
// launcher's start without the making of its files, which calls SetProcess once the
// server is ready. A server without one cannot be started again.
func (s *Instance) SetRelaunch(relaunch func(ctx context.Context) error) { s.relaunch = relaunch }

// StartAgain starts a killed or stopped server again, on its data and its port.
func (s *Instance) StartAgain(ctx context.Context) error { return s.StartAgainAfter(ctx, nil) }

// StartAgainAfter runs prepare, when not nil, on the data of the killed or stopped
// server and then starts it again. prepare runs under the lock that Stop takes too: a
// Stop meanwhile waits instead of removing the directory prepare works in.
func (s *Instance) StartAgainAfter(ctx context.Context, prepare func(context.Context) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down {
		return fmt.Errorf("%s: start: the server is running", s.Name)
	}
	if s.relaunch == nil {
		return fmt.Errorf("%s: start: this server cannot be started again", s.Name)
	}
	if prepare != nil {
		if err := prepare(ctx); err != nil {
			return err
		}
	}
	// A start can still meet what the killed server left for a moment (a backend that
	// holds the shared memory block): retry for a few seconds before giving up.
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := s.relaunch(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}

		time.Sleep(200 * time.Millisecond)
	}
	s.down = false
	return nil
}

// Restart shuts the server down cleanly (StopSignal, within StopGrace) and starts it
// again on its data and its port.
func (s *Instance) Restart(ctx context.Context) error { return s.RestartAfter(ctx, nil) }

// RestartAfter is Restart that runs prepare, when not nil, between the clean shutdown
// and the start, on the data of the stopped server (see StartAgainAfter).
func (s *Instance) RestartAfter(ctx context.Context, prepare func(context.Context) error) error {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return fmt.Errorf("%s: restart: %w", s.Name, ErrDown)
	}
	_ = syscall.Kill(-s.proc.Pid(), syscall.SIGCONT)
	err := s.proc.Stop(s.StopSignal, s.StopGrace)
	s.down = true
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: restart: %w", s.Name, err)
	}
	return s.StartAgainAfter(ctx, prepare)
}

// groupRunning reports whether a process of group pgid is still running: not a zombie,
// which holds no memory (and which no one may reap soon when the reaper is a container's
// init). Where /proc cannot say, it asks the kernel whether the group has any member.
func groupRunning(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) != syscall.ESRCH
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		// Fields after the command name: state, ppid, pgrp.
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || pid == os.Getpid() {
			continue
		}
		if f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
