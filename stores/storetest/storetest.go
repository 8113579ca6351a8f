// Package storetest is the conformance suite every store adapter runs against its real
// server: one suite, every backend.
//
// An adapter's test calls Budget and Register with a function that opens the adapter
// against the server the test launched (in TestMain). The suite runs without faults, so
// any error from the store fails it: it checks the behaviour the workloads and checkers
// take for granted (exact budget accounting under concurrency, idempotent replay, CAS
// semantics, one connection per session on a loopback address), not fault handling.
//
// Subtests run one after another and share the server; each resets what it uses.
package storetest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/workloads"
)

// subtestTimeout bounds one subtest, so a store that hangs fails instead of stalling the
// package until go test's own timeout.
const subtestTimeout = 60 * time.Second

// Option changes what the suite expects of a store.
type Option func(*options)

type options struct {
	noIdempotentRegister string
	known                map[string]string
}

// Names of the subtests that check atomicity under concurrency, for KnownViolation.
const (
	ConcurrentDecrements           = "concurrent decrements stop at zero"
	ConcurrentIdempotentDecrements = "concurrent decrements stop at zero (idempotent)"
	ConcurrentCASIncrements        = "concurrent cas increments are not lost"
)

// KnownViolation marks the subtest name (one of the constants above) as one the server
// is known to fail, with finding: what is wrong and where the evidence is. The subtest
// then still runs and checks everything; it passes, logging what it saw, when it sees
// the violation, and fails when it does not, so that a server that was fixed drops the
// mark instead of hiding behind it.
func KnownViolation(name, finding string) Option {
	return func(o *options) {
		if o.known == nil {
			o.known = map[string]string{}
		}
		o.known[name] = finding
	}
}

// WithoutIdempotentRegister skips the register subtests of idempotent replay, for a
// store that does not support Request.Idempotent on writes and CAS; reason is logged.
func WithoutIdempotentRegister(reason string) Option {
	return func(o *options) { o.noIdempotentRegister = reason }
}

func buildOptions(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), subtestTimeout)
	t.Cleanup(cancel)
	return ctx
}

// closeOnCleanup closes s when the test ends and fails the test if Close errs.
func closeOnCleanup(t *testing.T, s workloads.Session) {
	t.Helper()
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close session: %v", err)
		}
	})
}

// Open opens a store's client with open, given ten seconds to connect, and closes it
// when the test ends; an error fails the test.
func Open[C interface{ Close() error }](t testing.TB, open func(context.Context) (C, error)) C {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// CheckClass fails t unless err is of class want in the contract of package workloads
// and, if reason is not empty, names that reason.
func CheckClass(t testing.TB, err error, want workloads.Class, reason workloads.Reason) {
	t.Helper()
	if got := workloads.Classify(err); got != want {
		t.Errorf("class of %v = %v, want %v", err, got, want)
	}
	if reason != "" && workloads.ReasonOf(err) != reason {
		t.Errorf("reason of %v = %q, want %q", err, workloads.ReasonOf(err), reason)
	}
}

// openSession opens one session with dial (a store's Session method) and closes it when
// the test ends.
func openSession[S workloads.Session](t *testing.T, dial func(context.Context) (S, error)) S {
	t.Helper()
	sess, err := dial(testContext(t))
	if err != nil {
		t.Fatalf("Session: %v", err)
	}
	closeOnCleanup(t, sess)
	return sess
}

// race runs work for each of n workers at once and returns, by worker, the error each
// stopped on (nil where it finished).
func race(n int, work func(w int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = work(w)
		}()
	}
	wg.Wait()
	return errs
}

// checkLoopbackConn fails t unless addr is a loopback host:port with a nonzero port: the
// proxy joins its fault events to operations by exactly this address.
func checkLoopbackConn(t *testing.T, addr string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Errorf("Conn() = %q: not host:port: %v", addr, err)
		return
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		t.Errorf("Conn() = %q: host is not a loopback IP", addr)
	}
	if port == "" || port == "0" {
		t.Errorf("Conn() = %q: no port", addr)
	}
}

// violations collects what an atomicity check saw wrong, so that a known violation can
// be reported as reproduced instead of failing the test.
type violations []string

func (v *violations) add(format string, args ...any) {
	*v = append(*v, fmt.Sprintf(format, args...))
}

// report fails t with each violation, or, when the subtest is a known violation, passes
// with them logged and fails if there was none.
func (v violations) report(t *testing.T, o options, name string) {
	t.Helper()
	finding, known := o.known[name]
	switch {
	case !known:
		for _, s := range v {
			t.Error(s)
		}
	case len(v) == 0:
		t.Errorf("known violation did not reproduce: %s; if the server was fixed, drop the KnownViolation mark", finding)
	default:
		t.Logf("known violation reproduced: %s", finding)
		for _, s := range v {
			t.Log(s)
		}
	}
}
