// Package servertest launches the throwaway servers of internal/servers' launchers
// (postgres, redis, cassandra, ferret) for the tests of other packages: once per test
// package, from TestMain, and stops them by pid afterwards.
//
// A server whose binaries are missing makes its tests skip with the install hint, except
// under CI=true, where it fails the run before any test starts:
//
//	var pg = servertest.Postgres(postgres.Options{})
//
//	func TestMain(m *testing.M) { os.Exit(servertest.Main(m, pg)) }
//
//	func TestTransfer(t *testing.T) {
//		srv := pg.Get(t) // skips here if PostgreSQL is not installed
//		conn, err := pgx.Connect(ctx, srv.DSN)
//		...
//	}
//
// A test that needs a server of its own starts it directly and hands the error to
// SkipOrFail, which applies the same rule. The tests of the launchers themselves share
// the helpers of harness.go (ReachableDir, Rerun, GroupAlive ...): a server that must
// die with a harness killed by SIGKILL, a failed start that must leave nothing behind.
package servertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
)

// Server is what servertest needs of a launched server.
type Server interface {
	Stop() error
}

// Launcher is a server for Main to start before the tests and stop after them. Handle is
// the implementation.
type Launcher interface {
	label() string
	launch(ctx context.Context) error
	notInstalled() error // the ErrNotInstalled error launch recorded, or nil
	stop() error
}

// Handle is one server of a test package: Main launches it, tests Get it.
type Handle[S Server] struct {
	name  string
	start func(context.Context) (S, error)

	mu       sync.Mutex
	launched bool
	srv      S
	missing  error // the ErrNotInstalled error, when the binaries are missing
	stopOnce sync.Once
	stopErr  error
}

// New returns a handle for a server that start launches; name labels messages.
func New[S Server](name string, start func(context.Context) (S, error)) *Handle[S] {
	return &Handle[S]{name: name, start: start}
}

// Postgres returns a handle for a PostgreSQL started with opt.
func Postgres(opt postgres.Options) *Handle[*postgres.Server] {
	return New("postgres", func(ctx context.Context) (*postgres.Server, error) {
		return postgres.Start(ctx, opt)
	})
}

// Get returns the running server. It skips the test if the server's binaries are missing,
// and fails it if Main did not launch the handle.
func (h *Handle[S]) Get(tb testing.TB) S {
	tb.Helper()
	h.mu.Lock()
	launched, srv, missing := h.launched, h.srv, h.missing
	h.mu.Unlock()
	switch {
	case !launched:
		tb.Fatalf("servertest: %s was not launched: pass its handle to servertest.Main in TestMain", h.name)
	case missing != nil:
		tb.Skipf("%v", missing)
	}
	return srv
}

func (h *Handle[S]) label() string { return h.name }

func (h *Handle[S]) launch(ctx context.Context) error {
	srv, err := h.start(ctx)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.srv = srv
	case errors.Is(err, servers.ErrNotInstalled):
		h.missing = err
	default:
		return err
	}
	h.launched = true
	return nil
}

func (h *Handle[S]) stop() error {
	h.mu.Lock()
	up := h.launched && h.missing == nil
	srv := h.srv
	h.mu.Unlock()
	if !up {
		return nil
	}
	h.stopOnce.Do(func() { h.stopErr = srv.Stop() })
	return h.stopErr
}

// Main launches the servers, runs the tests, stops the servers and returns the exit code
// for os.Exit. A server that is not installed fails the run (code 1, before any test)
// when CI is true, and otherwise makes its tests skip. A server that is installed but
// does not start, or stops with an error (it died during the tests), fails the run.
// On SIGINT or SIGTERM the servers are stopped and the signal is raised again, so the
// test binary ends as it would have without Main. Messages go to stderr. Until the
// servers stop, every PostgreSQL server the package starts is a copy of one initdb'd
// cluster (postgres.ShareInitdb).
func Main(m *testing.M, launchers ...Launcher) int {
	return run(m, os.Stderr, launchers)
}

// run is Main with the test runner and the message stream as parameters, for tests.
func run(m interface{ Run() int }, stderr io.Writer, launchers []Launcher) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The package's PostgreSQL servers, its own and those its tests start, are copies
	// of one initdb'd cluster (postgres.ShareInitdb), removed with the servers.
	release := postgres.ShareInitdb()
	stopAll := func() int {
		code := 0
		for i := len(launchers) - 1; i >= 0; i-- {
			if err := launchers[i].stop(); err != nil {
				fmt.Fprintf(stderr, "servertest: stop %s: %v\n", launchers[i].label(), err)
				code = 1
			}
		}
		if err := release(); err != nil {
			fmt.Fprintf(stderr, "servertest: %v\n", err)
			code = 1
		}
		return code
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	defer close(done)
	defer signal.Stop(sigs)
	go func() {
		select {
		case sig := <-sigs:
			cancel()
			stopAll()
			signal.Reset(sig)
			_ = syscall.Kill(os.Getpid(), sig.(syscall.Signal))
		case <-done:
		}
	}()

	for _, l := range launchers {
		err := l.launch(ctx)
		if err == nil {
			continue
		}
		fmt.Fprintf(stderr, "servertest: launch %s: %v\n", l.label(), err)
		stopAll()
		return 1
	}
	if onCI() {
		for _, l := range launchers {
			if err := l.notInstalled(); err != nil {
				fmt.Fprintf(stderr, "servertest: %v; CI=true, so a missing server fails the run\n", err)
				stopAll()
				return 1
			}
		}
	}
	code := m.Run()
	if stopAll() != 0 && code == 0 {
		code = 1
	}
	return code
}

func (h *Handle[S]) notInstalled() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.missing
}

// SkipOrFail ends the test when err says a server's binaries are missing: it skips with
// the install hint, or under CI=true fails. Any other error, and nil, is left to the
// caller.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if !errors.Is(err, servers.ErrNotInstalled) {
		return
	}
	if onCI() {
		tb.Fatalf("%v (CI=true: a missing server fails the run)", err)
	}
	tb.Skipf("%v", err)
}

// onCI reports whether the CI environment variable is true, as CI services set it.
func onCI() bool {
	ci, _ := strconv.ParseBool(os.Getenv("CI"))
	return ci
}

// StopCleanly stops a server of a test's own and checks that its temporary directory dir
// is gone and that a second stop is a harmless no-op.
func StopCleanly(tb testing.TB, stop func() error, dir string) {
	tb.Helper()
	if err := stop(); err != nil {
		tb.Errorf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		tb.Errorf("temp dir %s left behind: %v", dir, err)
	}
	if err := stop(); err != nil {
		tb.Errorf("second Stop: %v", err)
	}
}
