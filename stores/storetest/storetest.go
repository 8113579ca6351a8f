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
	"net"
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
