package servers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ErrExited is returned by Poll and WaitTCP when the server process exited before it
// became ready.
var ErrExited = errors.New("process exited")

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. Another process may
// take it before the server binds it, so a launcher that sees "address in use" should retry
// with a new port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	return port, nil
}

// Poll calls probe every interval until it returns nil (Poll returns nil), ctx ends, or
// exited is closed (Poll returns an error wrapping ErrExited: a dead server will not become
// ready). The errors on timeout and exit carry the last probe error. exited may be nil.
func Poll(ctx context.Context, interval time.Duration, exited <-chan struct{}, probe func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready (last: %v): %w", err, ctx.Err())
		case <-exited:
			return fmt.Errorf("%w before it was ready (last: %v)", ErrExited, err)
		case <-t.C:
		}
	}
}

// WaitTCP waits until addr accepts TCP connections, with Poll's contract.
func WaitTCP(ctx context.Context, addr string, exited <-chan struct{}) error {
	return Poll(ctx, 20*time.Millisecond, exited, func(ctx context.Context) error {
		d := net.Dialer{Timeout: time.Second}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	})
}

// Account is the operating-system user a launched server runs as. Get one from
// ServerAccount; the zero Account means "the caller itself".
type Account struct {
	Name     string
	UID, GID uint32
	// switchUser is set when the account differs from the caller's, so children need a
	// Credential and their directories a chown.
	switchUser bool
}

// ServerAccount returns the account to run servers as. When the caller is not root it is
// the caller itself. When the caller is root (PostgreSQL refuses to run as root) it is, in
// order: the user named by INDOUBT_SERVER_USER; the system user "indoubt", created with
// useradd if missing; the existing user "postgres"; the user "nobody". The result is
// cached; it is safe for concurrent use.
func ServerAccount() (Account, error) {
	if os.Geteuid() != 0 {
		return currentAccount()
	}
	accountCache.mu.Lock()
	defer accountCache.mu.Unlock()
	if accountCache.acct != nil {
		return *accountCache.acct, nil
	}
	var a Account
	var err error
	if name := os.Getenv("INDOUBT_SERVER_USER"); name != "" {
		a, err = lookupAccount(name)
		if err != nil {
			return Account{}, fmt.Errorf("server user from INDOUBT_SERVER_USER: %w", err)
		}
	} else if a, err = ensureUser("indoubt"); err != nil {
		a, err = lookupAccount("postgres")
		if err != nil {
			a, err = lookupAccount("nobody")
		}
		if err != nil {
			return Account{}, errors.New("server user: no user indoubt (useradd failed), postgres or nobody; set INDOUBT_SERVER_USER")
		}
	}
	if a.UID == 0 {
		return Account{}, fmt.Errorf("server user %s: is root; servers must run unprivileged", a.Name)
	}
	a.switchUser = true
	accountCache.acct = &a
	return a, nil
}

var accountCache struct {
	mu   sync.Mutex
	acct *Account
}

func currentAccount() (Account, error) {
	name := strconv.Itoa(os.Geteuid())
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return Account{Name: name, UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())}, nil
}

func lookupAccount(name string) (Account, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return Account{}, err
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return Account{}, fmt.Errorf("user %s: uid %q: %w", name, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return Account{}, fmt.Errorf("user %s: gid %q: %w", name, u.Gid, err)
	}
	return Account{Name: name, UID: uint32(uid), GID: uint32(gid)}, nil
}

// ensureUser finds or creates a system user without a home or login shell. Test binaries of
// several packages may race to create it; useradd then fails on its lock or on "already
// exists", so a failure is followed by another lookup before giving up.
func ensureUser(name string) (Account, error) {
	var last error
	for range 5 {
		if a, err := lookupAccount(name); err == nil {
			return a, nil
		}
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", name).CombinedOutput()
		if err == nil {
			continue
		}
		last = fmt.Errorf("useradd %s: %v: %s", name, err, out)
		time.Sleep(100 * time.Millisecond)
	}
	return Account{}, last
}

// Credential returns the credential that makes a child process run as a, or nil when a is
// the caller itself.
func (a Account) Credential() *syscall.Credential {
	if !a.switchUser {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID}
}

// Own gives each path (not recursively) to a, when a is not the caller itself.
func (a Account) Own(paths ...string) error {
	if !a.switchUser {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(a.UID), int(a.GID)); err != nil {
			return fmt.Errorf("chown %s to %s: %w", p, a.Name, err)
		}
	}
	return nil
}

// CheckReach returns an error naming the first directory on the way from / to dir that a
// cannot enter, judged by permission bits and a's primary group (children started with
// a.Credential have no supplementary groups). A root-only parent such as a 0700 test
// temp dir otherwise shows up as a puzzling "permission denied" inside the server's log.
func (a Account) CheckReach(dir string) error {
	if !a.switchUser {
		return nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("check %s: %w", dir, err)
	}
	for d := abs; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("check %s: %w", dir, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		var bit os.FileMode
		switch {
		case st.Uid == a.UID:
			bit = 0o100
		case st.Gid == a.GID:
			bit = 0o010
		default:
			bit = 0o001
		}
		if fi.Mode().Perm()&bit == 0 {
			return fmt.Errorf("directory %s is not reachable by user %s (mode %v); choose another parent directory", d, a.Name, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// Process is a server or helper process in its own process group. Its methods are safe for
// concurrent use, including from a signal handler's goroutine.
type Process struct {
	name string
	cmd  *exec.Cmd
	// exited is closed when the leader has exited. It is observed without reaping
	// (waitid WNOWAIT), so until reap the leader's pid, and with it the process group
	// id, cannot be reused: killing the group then reaches only our own processes.
	exited chan struct{}

	reapOnce sync.Once
	waitErr  error

	stopOnce sync.Once
	stopErr  error
}

// StartProcess starts cmd as account a in a new process group (so a Ctrl-C on the
// terminal reaches the harness but not the server, which the harness stops itself) with
// the parent-death signal SIGKILL (so the server dies with the harness rather than outlive
// it). name labels errors. The caller must end the process with Stop or Wait. On systems
// other than Linux it returns an error.
func StartProcess(name string, cmd *exec.Cmd, a Account) (*Process, error) {
	return StartProcessOn(nil, name, cmd, a)
}

// StartProcessOn is StartProcess for a process of a server on node: it runs in the
// node's network namespace (a nil node: the caller's, as StartProcess). The fork is
// made from the spawner thread after it entered the namespace, which it leaves again
// before it forks anything else.
func StartProcessOn(node *Node, name string, cmd *exec.Cmd, a Account) (*Process, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := setParentDeathSignal(cmd.SysProcAttr); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if c := a.Credential(); c != nil {
		cmd.SysProcAttr.Credential = c
	}
	var err error
	onSpawnerThread(func() {
		if node == nil {
			err = cmd.Start()
			return
		}
		err = inNetns(node.Netns, cmd.Start)
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, exited: make(chan struct{})}
	go p.watch()
	return p, nil
}

// The kernel sends the parent-death signal when the thread that forked the child exits,
// not the process. Go may end a thread whose goroutine locked it and returned, so children
// are forked from one thread that stays locked, and alive, for the life of the process.
var spawner struct {
	once sync.Once
	reqs chan func()
}

func onSpawnerThread(f func()) {
	spawner.once.Do(func() {
		spawner.reqs = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range spawner.reqs {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawner.reqs <- func() { defer close(done); f() }
	<-done
}

func (p *Process) watch() {
	waitExitedUnreaped(p.cmd.Process.Pid)
	close(p.exited)
}

// Pid returns the process id of the group leader, which is also the process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited, whoever caused it.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// reap kills what is left of the process group, waits for the leader and collects its
// exit status. It must be the only place that reaps.
func (p *Process) reap() error {
	p.reapOnce.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		p.waitErr = p.cmd.Wait()
	})
	return p.waitErr
}

// Wait waits for a short-lived process to exit and returns its exit error (nil for status
// 0). If ctx ends first it kills the process group and returns ctx's error.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.exited:
		if err := p.reap(); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		return nil
	case <-ctx.Done():
		_ = p.reap()
		return fmt.Errorf("%s: %w", p.name, ctx.Err())
	}
}

// Stop sends sig to the leader (its graceful shutdown signal), waits up to grace for it to
// exit, then kills the process group and every descendant of the leader with SIGKILL and
// reaps the leader. Stop may be
// called more than once and concurrently; every call returns the first call's result
// after the process is gone. It returns nil when the process ended in response to sig
// (status 0, death by sig, or status 128+sig), and an error when it had already exited
// before Stop (it crashed or was killed by someone else) or had to be killed.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	p.stopOnce.Do(func() { p.stopErr = p.stop(sig, grace) })
	return p.stopErr
}

func (p *Process) stop(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-p.exited:
		err := p.reap()
		if err == nil {
			err = errors.New("exit status 0")
		}
		return fmt.Errorf("%s had exited before stop: %w", p.name, err)
	default:
	}
	// The leader is not reaped yet, so the pid still belongs to it.
	_ = syscall.Kill(p.cmd.Process.Pid, sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	forced := false
	select {
	case <-p.exited:
	case <-t.C:
		forced = true
		// Not only the group: a PostgreSQL backend, in a session of its own, busy
		// computing, would outlive its postmaster.
		killTree(p.cmd.Process.Pid)
	}
	err := p.reap()
	if forced {
		return fmt.Errorf("%s did not stop within %v of %v; killed", p.name, grace, sig)
	}
	if err == nil || endedBy(p.cmd.ProcessState, sig) {
		return nil
	}
	return fmt.Errorf("%s stop: %w", p.name, err)
}

func endedBy(s *os.ProcessState, sig syscall.Signal) bool {
	if s == nil {
		return false
	}
	if ws, ok := s.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == sig {
		return true
	}
	return s.ExitCode() == 128+int(sig)
}

// VersionOutput returns what bin --version prints on stdout within 10 s, "" when it
// fails: a launcher reads its server's version from it, for descriptions.
func VersionOutput(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return ""
	}
	return string(out)
}
