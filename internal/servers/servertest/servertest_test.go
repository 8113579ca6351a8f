package servertest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
)

// runner stands in for *testing.M: run calls Run where m.Run would run the tests.
type runner func() int

func (r runner) Run() int { return r() }

// recordTB notes what a helper did to its test instead of ending the real one.
type recordTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordTB) Helper() {}
func (r *recordTB) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordTB) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// call runs f on its own goroutine, as Fatalf and Skipf end it.
func call(f func(tb testing.TB)) *recordTB {
	tb := &recordTB{}
	done := make(chan struct{})
	go func() { defer close(done); f(tb) }()
	<-done
	return tb
}

// needPostgres skips or fails (CI) the test when PostgreSQL is not installed.
func needPostgres(t *testing.T) {
	t.Helper()
	if _, err := postgres.Find(); err != nil {
		SkipOrFail(t, err)
		t.Fatal(err)
	}
}

func gone(pid int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil || strings.Contains(string(b), ") Z ") {
			return true
		}
	}
	return false
}

func TestMainRunsTestsAgainstTheServer(t *testing.T) {
	needPostgres(t)
	pg := Postgres(postgres.Options{})
	var srv *postgres.Server
	var stderr bytes.Buffer
	code := run(runner(func() int {
		tb := call(func(tb testing.TB) { srv = pg.Get(tb) })
		if tb.fatal != "" || tb.skip != "" || srv == nil {
			t.Errorf("Get: fatal %q, skip %q, server %v", tb.fatal, tb.skip, srv)
			return 1
		}
		c, err := pgx.Connect(context.Background(), srv.DSN)
		if err != nil {
			t.Error(err)
			return 1
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "create table t (x int)"); err != nil {
			t.Error(err)
			return 1
		}
		return 0
	}), &stderr, []Launcher{pg})
	if code != 0 {
		t.Errorf("exit code %d, stderr %s", code, &stderr)
	}
	if srv == nil {
		t.FailNow()
	}
	if !gone(srv.Pid()) {
		t.Errorf("postgres %d still running after Main", srv.Pid())
	}
	if _, err := os.Stat(srv.Dir); !os.IsNotExist(err) {
		t.Errorf("dir %s: %v, want it removed", srv.Dir, err)
	}
}

func TestMainNotInstalled(t *testing.T) {
	t.Setenv("INDOUBT_PG_BIN", "/nonexistent")

	t.Run("tests skip with the install hint", func(t *testing.T) {
		t.Setenv("CI", "false")
		pg := Postgres(postgres.Options{})
		ran := false
		var stderr bytes.Buffer
		code := run(runner(func() int {
			ran = true
			tb := call(func(tb testing.TB) { pg.Get(tb) })
			if !strings.Contains(tb.skip, "Debian package postgresql") || tb.fatal != "" {
				t.Errorf("Get: skip %q, fatal %q; want a skip naming the package", tb.skip, tb.fatal)
			}
			return 0
		}), &stderr, []Launcher{pg})
		if !ran || code != 0 {
			t.Errorf("tests ran: %v, code %d, stderr %s", ran, code, &stderr)
		}
	})

	t.Run("under CI the run fails before any test", func(t *testing.T) {
		t.Setenv("CI", "true")
		ran := false
		var stderr bytes.Buffer
		code := run(runner(func() int { ran = true; return 0 }), &stderr,
			[]Launcher{Postgres(postgres.Options{})})
		if ran || code != 1 {
			t.Errorf("tests ran: %v, code %d; want no tests and code 1", ran, code)
		}
		if msg := stderr.String(); !strings.Contains(msg, "Debian package postgresql") || !strings.Contains(msg, "CI=true") {
			t.Errorf("stderr %q: want the install hint and the CI rule", msg)
		}
	})
}

func TestMainFailures(t *testing.T) {
	t.Run("a server that cannot start fails the run", func(t *testing.T) {
		t.Setenv("CI", "false")
		ran := false
		var stderr bytes.Buffer
		bad := Postgres(postgres.Options{Settings: map[string]string{"port": "5432"}})
		code := run(runner(func() int { ran = true; return 0 }), &stderr, []Launcher{bad})
		if ran || code != 1 || !strings.Contains(stderr.String(), "launch postgres") {
			t.Errorf("tests ran: %v, code %d, stderr %q", ran, code, &stderr)
		}
	})

	t.Run("a server that dies during the tests fails the run", func(t *testing.T) {
		needPostgres(t)
		pg := Postgres(postgres.Options{})
		var stderr bytes.Buffer
		code := run(runner(func() int {
			srv := pg.Get(t)
			_ = syscall.Kill(srv.Pid(), syscall.SIGKILL)
			<-srv.Exited()
			return 0
		}), &stderr, []Launcher{pg})
		if code != 1 || !strings.Contains(stderr.String(), "had exited before stop") {
			t.Errorf("code %d, stderr %q; want 1 and the early exit", code, &stderr)
		}
	})

	t.Run("Get without Main", func(t *testing.T) {
		pg := Postgres(postgres.Options{})
		tb := call(func(tb testing.TB) { pg.Get(tb) })
		if !strings.Contains(tb.fatal, "servertest.Main") {
			t.Errorf("fatal %q, want a pointer to servertest.Main", tb.fatal)
		}
	})
}

func TestSkipOrFail(t *testing.T) {
	missing := &servers.NotInstalledError{Server: "x", Program: "xd", Hint: "install Debian package x"}
	tests := []struct {
		name, ci string
		err      error
		wantSkip bool
		wantFail bool
	}{
		{"missing elsewhere skips", "false", missing, true, false},
		{"missing under CI fails", "true", fmt.Errorf("start: %w", missing), false, true},
		{"other errors are the caller's", "true", errors.New("boom"), false, false},
		{"nil is the caller's", "false", nil, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			tb := call(func(tb testing.TB) { SkipOrFail(tb, tc.err) })
			if got := tb.skip != ""; got != tc.wantSkip {
				t.Errorf("skipped: %v, want %v (%q)", got, tc.wantSkip, tb.skip)
			}
			if got := tb.fatal != ""; got != tc.wantFail {
				t.Errorf("failed: %v, want %v (%q)", got, tc.wantFail, tb.fatal)
			}
			if tb.skip+tb.fatal != "" && !strings.Contains(tb.skip+tb.fatal, "install Debian package x") {
				t.Errorf("message %q lacks the hint", tb.skip+tb.fatal)
			}
		})
	}
}

// TestInterruptStopsServers sends SIGINT to a test binary inside Main and expects its
// server stopped cleanly (directory removed, which the parent-death kill would not do)
// and the binary ended by the signal.
func TestInterruptStopsServers(t *testing.T) {
	if os.Getenv("INDOUBT_TEST_INTERRUPT") != "" {
		pg := Postgres(postgres.Options{})
		os.Exit(run(runner(func() int {
			srv := pg.Get(t)
			fmt.Println(srv.Pid(), srv.Addr, srv.Dir)
			time.Sleep(time.Minute)
			return 0
		}), os.Stderr, []Launcher{pg}))
	}
	needPostgres(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptStopsServers$")
	cmd.Env = append(os.Environ(), "INDOUBT_TEST_INTERRUPT=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	var pid int
	var addr, dir string
	if _, err := fmt.Sscan(line, &pid, &addr, &dir); err != nil {
		t.Fatalf("child said %q", line)
	}
	defer func() { _ = syscall.Kill(-pid, syscall.SIGKILL); _ = os.RemoveAll(dir) }()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Errorf("child ended with %v, want death by SIGINT", err)
	}
	if !gone(pid) {
		t.Errorf("postgres %d still running", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s: %v, want it removed by Stop", dir, err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections", addr)
	}
}

// Listeners finds the process that listens on a port, and nobody on a port closed.
func TestListeners(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ls := Listeners(port)
	if len(ls) != 1 || ls[0].Pid != os.Getpid() || ls[0].Pgid == 0 || !strings.Contains(ls[0].Cmdline, filepath.Base(os.Args[0])) {
		t.Errorf("Listeners(%d) = %+v, want this process (pid %d)", port, ls, os.Getpid())
	}
	ln.Close()
	if ls := Listeners(port); len(ls) != 0 {
		t.Errorf("Listeners(%d) after Close = %+v", port, ls)
	}
}
