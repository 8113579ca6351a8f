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
// itself, not to its connections. Every method acts on every process of the server (a
// PostgreSQL's backends die or stop with its postmaster, though each is in a session of
// its own), keeps the data directory, the port and the password, and is safe to call
// concurrently with Stop.

// ErrDown is returned by a process fault that needs a running server when the server
// was killed and not started again.
var ErrDown = errors.New("the server is down (killed and not started again)")

// Kill sends SIGKILL to every process of the server at once and reaps it: no
// shutdown, no flush, what was not on disk is gone. It returns once each of those
// processes is gone (or after 5 s), so that a start again does not meet what the old
// server held.
func (s *Instance) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return fmt.Errorf("%s: kill: %w", s.Name, ErrDown)
	}
	leader := s.proc.Pid()
	procs := killTree(leader)
	_ = s.proc.reap()
	s.down = true
	// The leader is reaped; the others (PostgreSQL's backends) are reaped by whoever
	// inherits them, and until they are gone they hold the shared memory a new
	// postmaster refuses to share.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !anyRunning(procs) && !groupRunning(leader) {
			break
		}
	}
	return nil
}

// Signal sends sig to the server. SIGSTOP (pause) and SIGCONT (resume) go to every
// process of it: its leader, the leader's process group and all the leader's
// descendants, whatever their group; the leader is stopped first, so that it forks
// nothing the stop would miss. Any other signal goes to the leader's process group,
// and the leader passes it on as it does for its own (SIGHUP makes PostgreSQL and
// Redis reread their configuration).
//
// A stop sent to the process group alone is not a pause: PostgreSQL's postmaster puts
// each backend and auxiliary process in a session of its own (setsid), so the group
// holds the postmaster alone, and its backends went on answering on the connections
// already open.
func (s *Instance) Signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return fmt.Errorf("%s: %v: %w", s.Name, sig, ErrDown)
	}
	if err := signalTree(s.proc.Pid(), sig); err != nil {
		return fmt.Errorf("%s: %v: %w", s.Name, sig, err)
	}
	return nil
}

// signalTree sends sig as Signal says: SIGSTOP by stopTree, SIGCONT to the leader, its
// process group and every descendant, anything else to the process group.
func signalTree(leader int, sig syscall.Signal) error {
	switch sig {
	case syscall.SIGSTOP:
		if len(stopTree(leader)) == 0 {
			return syscall.ESRCH
		}
		return nil
	case syscall.SIGCONT:
		if err := syscall.Kill(-leader, sig); err != nil {
			return err
		}
		for _, p := range descendants(leader) {
			_ = syscall.Kill(p.pid, sig)
		}
		return nil
	}
	return syscall.Kill(-leader, sig)
}

// killTree sends SIGKILL to every process of the server led by leader at once: the
// leader is stopped first (stopTree), so that it forks nothing more, then the whole
// tree and the process group die together. It returns the processes it killed.
func killTree(leader int) []procRef {
	procs := stopTree(leader)
	for _, p := range procs {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(-leader, syscall.SIGKILL)
	return procs
}

// stopTree stops the leader (SIGSTOP), its process group and each descendant at once,
// then, once the leader is seen stopped, scans again until a scan finds none it has not
// stopped (a child forked meanwhile, or by a child). A stop is pending from the moment
// it is sent: the process runs no more of its own code, though on a busy machine one
// waiting for a core shows as stopped only when it gets one, which is why the
// descendants are not made to wait for the leader. It returns every process it
// stopped, the leader first; none when the leader is gone.
func stopTree(leader int) []procRef {
	if syscall.Kill(leader, syscall.SIGSTOP) != nil {
		return nil
	}
	_ = syscall.Kill(-leader, syscall.SIGSTOP)
	first, _ := readStat(leader) // zero start if it is gone already: nothing to match
	stopped := []procRef{{pid: leader, start: first.start}}
	seen := map[procRef]bool{stopped[0]: true}
	stopNew := func() bool {
		added := false
		for _, p := range descendants(leader) {
			if !seen[p] {
				seen[p] = true
				added = true
				stopped = append(stopped, p)
				_ = syscall.Kill(p.pid, syscall.SIGSTOP)
			}
		}
		return added
	}
	stopNew()
	// A fork in progress ends before the leader's stop takes effect: once the leader
	// is seen stopped, every child it made is in /proc.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		st, err := readStat(leader)
		if err != nil || st.state == 'T' || st.state == 't' || st.exited() {
			break
		}
	}
	for range 10 {
		if !stopNew() {
			break
		}
	}
	return stopped
}

// procRef names one process for good: its pid and its start time (a pid can be reused).
type procRef struct {
	pid   int
	start uint64
}

// procStat is what the process faults read of /proc/PID/stat.
type procStat struct {
	pid, ppid, pgrp int
	state           byte
	start           uint64
}

// readStat reads /proc/PID/stat: the one parser of it in this package. It fails when
// there is no such process (or no /proc: elsewhere than Linux).
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// f[0] is field 3 (the state), f[1] the parent, f[2] the process group, f[19]
	// field 22 (the start time).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	start, err3 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0], start: start}, nil
}

// exited reports whether a process in state st has exited (a zombie waiting to be
// reaped, or dead).
func (st procStat) exited() bool { return st.state == 'Z' || st.state == 'X' }

// processStart returns the start time of process pid (clock ticks after boot, field 22
// of /proc/PID/stat), which with the pid names one process for good, and whether the
// process is a zombie (it exited and waits for its parent to reap it).
func processStart(pid int) (start uint64, zombie bool, err error) {
	st, err := readStat(pid)
	return st.start, err == nil && st.exited(), err
}

// allStats reads /proc/PID/stat of every process; none where /proc cannot be read.
func allStats() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// descendants returns every descendant of the leader (its children, their children,
// ...) and every other member of its process group, from /proc's parent links; none
// where /proc cannot be read.
func descendants(leader int) []procRef {
	stats := allStats()
	children := map[int][]procStat{}
	for _, st := range stats {
		children[st.ppid] = append(children[st.ppid], st)
	}
	var out []procRef
	seen := map[int]bool{leader: true, os.Getpid(): true}
	queue := []int{leader}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if !seen[c.pid] {
				seen[c.pid] = true
				out = append(out, procRef{pid: c.pid, start: c.start})
				queue = append(queue, c.pid)
			}
		}
	}
	for _, st := range stats {
		if st.pgrp == leader && !seen[st.pid] {
			seen[st.pid] = true
			out = append(out, procRef{pid: st.pid, start: st.start})
		}
	}
	return out
}

// anyRunning reports whether one of procs still runs: present, the same process (its
// start time) and not a zombie, which holds no memory (and which no one may reap soon
// when the reaper is a container's init).
func anyRunning(procs []procRef) bool {
	for _, p := range procs {
		st, err := readStat(p.pid)
		if err == nil && st.start == p.start && !st.exited() {
			return true
		}
	}
	return false
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
	_ = signalTree(s.proc.Pid(), syscall.SIGCONT)
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
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return syscall.Kill(-pgid, 0) != syscall.ESRCH
	}
	for _, st := range allStats() {
		if st.pgrp == pgid && st.pid != os.Getpid() && !st.exited() {
			return true
		}
	}
	return false
}
