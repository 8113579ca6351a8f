package serve

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
)

// SharedServer is a test binary's one server of a kind, for store subpackages: the
// one the environment variable Env names, or else one Launch starts on first use,
// registered with Shared so that Main stops it.
type SharedServer struct {
	// Env names the variable that points the tests at an existing server.
	Env string
	// Timeout bounds Launch.
	Timeout time.Duration
	// Launch starts a server and returns its address (a DSN) and how to stop it.
	Launch func(ctx context.Context) (addr string, stop func() error, err error)

	once sync.Once
	addr string
	err  error
}

// Need returns the server's address for tb. Where the server is not installed it skips
// tb (fails it under CI=true: see SkipOrFail); any other launch error fails tb, after
// what (say "pgtest: launch PostgreSQL").
func (s *SharedServer) Need(tb testing.TB, what string) string {
	tb.Helper()
	addr, err := s.Addr()
	if errors.Is(err, servers.ErrNotInstalled) {
		SkipOrFail(tb, err)
	}
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	return addr
}

// Addr returns the server's address, launching it on the first call; a launch that
// failed fails every call the same way.
func (s *SharedServer) Addr() (string, error) {
	s.once.Do(func() {
		if addr := os.Getenv(s.Env); addr != "" {
			s.addr = addr
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.Timeout)
		defer cancel()
		addr, stop, err := s.Launch(ctx)
		if err != nil {
			s.err = err
			return
		}
		Shared(stop)
		s.addr = addr
	})
	return s.addr, s.err
}
