package servers_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

func startShell(t *testing.T, script string) *servers.Process {
	t.Helper()
	acct, err := servers.ServerAccount()
	if err != nil {
		t.Fatal(err)
	}
	p, err := servers.StartProcess("sh", exec.Command("sh", "-c", script), acct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(syscall.SIGKILL, 0) })
	return p
}

func TestProcessStopGraceful(t *testing.T) {
	p := startShell(t, "sleep 60 & wait")
	if pg, err := syscall.Getpgid(p.Pid()); err != nil || pg != p.Pid() {
		t.Errorf("process group %d (%v), want its own, %d", pg, err, p.Pid())
	}
	if pg, _ := syscall.Getpgid(0); pg == p.Pid() {
		t.Errorf("process shares the test's group")
	}
	if err := p.Stop(syscall.SIGTERM, 5*time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	// The shell died of SIGTERM; its background sleep must not survive it.
	if !servertest.Eventually(func() bool { return len(servertest.GroupAlive(p.Pid())) == 0 }) {
		t.Errorf("group members left: %v", servertest.GroupAlive(p.Pid()))
	}
	select {
	case <-p.Exited():
	default:
		t.Errorf("Exited not closed after Stop")
	}
}

func TestProcessStopForced(t *testing.T) {
	p := startShell(t, `trap "" TERM; sleep 60 & wait`)
	// Once the sleep runs, the shell has set its trap.
	if !servertest.Eventually(func() bool { return len(servertest.GroupAlive(p.Pid())) == 2 }) {
		t.Fatalf("group %d: %v, want the shell and its sleep", p.Pid(), servertest.GroupAlive(p.Pid()))
	}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = p.Stop(syscall.SIGTERM, 300*time.Millisecond) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("stop %d: got %v, want a killed error", i, err)
		}
		if err != errs[0] {
			t.Errorf("stop %d returned %v, first returned %v", i, err, errs[0])
		}
	}
	if !servertest.Eventually(func() bool { return !servertest.Alive(p.Pid()) && len(servertest.GroupAlive(p.Pid())) == 0 }) {
		t.Errorf("processes left in group %d: %v", p.Pid(), servertest.GroupAlive(p.Pid()))
	}
}

func TestProcessStopAfterCrash(t *testing.T) {
	p := startShell(t, "exit 3")
	<-p.Exited()
	err := p.Stop(syscall.SIGTERM, time.Second)
	if err == nil || !strings.Contains(err.Error(), "had exited before stop") || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("got %v, want an early-exit error with its status", err)
	}
}

func TestProcessWait(t *testing.T) {
	if err := startShell(t, "exit 0").Wait(context.Background()); err != nil {
		t.Errorf("exit 0: %v", err)
	}
	if err := startShell(t, "exit 2").Wait(context.Background()); err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("exit 2: got %v", err)
	}
	p := startShell(t, "sleep 60")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := p.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("cancelled: got %v", err)
	}
	if servertest.Alive(p.Pid()) {
		t.Errorf("pid %d alive after cancelled Wait", p.Pid())
	}
}

func TestProcessRunsAsServerAccount(t *testing.T) {
	acct, err := servers.ServerAccount()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && acct.UID == 0 {
		t.Fatalf("server account %+v is root", acct)
	}
	p := startShell(t, "sleep 60")
	fi, err := os.Stat(filepath.Join("/proc", strconv.Itoa(p.Pid())))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != acct.UID {
		t.Errorf("process runs as uid %d, want %d (%s)", uid, acct.UID, acct.Name)
	}
}

func TestCheckReach(t *testing.T) {
	acct, err := servers.ServerAccount()
	if err != nil {
		t.Fatal(err)
	}
	if err := acct.CheckReach(os.TempDir()); err != nil {
		t.Errorf("temp dir: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("only root switches users; the rest needs root")
	}
	closed := t.TempDir()
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(closed, "inner")
	if err := os.Mkdir(inner, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := acct.CheckReach(inner); err == nil || !strings.Contains(err.Error(), closed) {
		t.Errorf("got %v, want an error naming %s", err, closed)
	}
}

func TestFreePortAndWaitTCP(t *testing.T) {
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("free port %d cannot be bound: %v", port, err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := servers.WaitTCP(ctx, addr, nil); err != nil {
		t.Errorf("listening port: %v", err)
	}

	// A dead server is not waited for until the deadline.
	p := startShell(t, "exit 1")
	other, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	// ErrExited, not the context's deadline, is what shows it was not waited for.
	err = servers.WaitTCP(ctx, net.JoinHostPort("127.0.0.1", strconv.Itoa(other)), p.Exited())
	if !errors.Is(err, servers.ErrExited) {
		t.Errorf("exited process: got %v, want ErrExited", err)
	}
}
