package serve

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

var shared struct {
	mu    sync.Mutex
	stops []func() error
}

// Shared registers stop to run when Main returns: store subpackages register the server
// they launch once per test binary. Without Main the launched servers still end with the
// test binary (they are started with the parent-death signal), but leave their
// temporary directories behind.
func Shared(stop func() error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.stops = append(shared.stops, stop)
}

// StopShared stops the servers registered with Shared, last first, and forgets them.
func StopShared() error {
	shared.mu.Lock()
	stops := shared.stops
	shared.stops = nil
	shared.mu.Unlock()
	var errs []error
	for i := len(stops) - 1; i >= 0; i-- {
		errs = append(errs, stops[i]())
	}
	return errors.Join(errs...)
}

// SkipOrFail skips the test when a server cannot be had on this machine, with err's text
// (which says what to install), except under CI=true, where it fails the test: in CI a
// missing server is a broken set-up, not a reason to pass.
func SkipOrFail(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("indoubttest: %v", err)
	}
	tb.Skipf("indoubttest: %v", err)
}

// WithHost returns dsn, a URL, with its host:port replaced by addr: the DSN through the
// proxy. NewServer uses it where Target.ProxyDSN is nil.
func WithHost(dsn, addr string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Host = addr
	return u.String()
}

// DatabaseName returns a name for a test's own database, schema or keyspace, unique in
// the process: a prefix, the test's name folded to [a-z0-9_] and cut to fit PostgreSQL's
// 63 bytes, and a sequence number.
func DatabaseName(tb testing.TB) string {
	shared.mu.Lock()
	dbSeq++
	n := dbSeq
	shared.mu.Unlock()
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '_'
	}, tb.Name())
	suffix := fmt.Sprintf("_%d_%d", os.Getpid(), n)
	if max := 63 - len("t_") - len(suffix); len(name) > max {
		name = name[:max]
	}
	return "t_" + name + suffix
}

var dbSeq int

// OwnDatabase makes a test's own database (schema, keyspace) with run(create) and
// removes it with run(drop) when the test ends; a failure of either fails the test,
// with pkg ("pgtest") and the statement. Each statement gets 30 s. An empty drop keeps
// the database.
func OwnDatabase(tb testing.TB, pkg string, run func(ctx context.Context, stmt string) error, create, drop string) {
	tb.Helper()
	exec := func(stmt string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return run(ctx, stmt)
	}
	if err := exec(create); err != nil {
		tb.Fatalf("%s: %s: %v", pkg, create, err)
	}
	if drop == "" {
		return
	}
	tb.Cleanup(func() {
		if err := exec(drop); err != nil {
			tb.Errorf("%s: %s: %v", pkg, drop, err)
		}
	})
}
