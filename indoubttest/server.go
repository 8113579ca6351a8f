package indoubttest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
	"github.com/indoubt/indoubt/workloads"
)

// Server is one test's view of a database: the commit-aware proxy in front of a shared
// server, with the DSNs through it and around it, the fault controls and the ground
// truth of every fault the proxy fired. Its methods are safe for concurrent use. It
// stops with the test (t.Cleanup).
type Server struct {
	// Store names the store: postgres, redis, mongo.
	Store string
	// DSN reaches the test's database through the proxy: give it to the code under test.
	DSN string
	// Addr is the proxy's host:port.
	Addr string
	// DirectDSN reaches the same database without the proxy: for setup and final reads
	// that must not be faulted.
	DirectDSN string
	// DirectAddr is the server's host:port.
	DirectAddr string
	// Database names the test's own database (PostgreSQL, MongoDB) or, for Redis, its
	// database number; the DSNs already select it.
	Database string

	tb       testing.TB
	target   serve.Target
	proxy    *faults.Proxy
	start    time.Time
	mu       sync.Mutex
	events   []toxics.Event
	windows  []faults.Window
	cancel   []context.CancelFunc
	running  sync.WaitGroup
	schedErr error
}

// The store subpackages (pgtest and its siblings) make their Servers through
// serve.NewServer, which is newServer: nothing a test writes.
func init() {
	serve.NewServer = func(tb testing.TB, target serve.Target) any { return newServer(tb, target) }
}

// newServer starts the commit-aware proxy in front of target for the test tb and stops
// it when the test ends. It fails the test if the proxy cannot start.
func newServer(tb testing.TB, target serve.Target) *Server {
	tb.Helper()
	s := &Server{Store: target.Store, DirectDSN: target.DirectDSN, DirectAddr: target.DirectAddr, Database: target.Database, tb: tb, target: target, start: time.Now()}
	px, err := faults.Start(faults.Options{
		Upstream: target.DirectAddr,
		Protocol: target.Protocol,
		Seed:     seedOf(tb.Name()),
		Events:   s.record,
	})
	if err != nil {
		tb.Fatalf("indoubttest: %s: %v", target.Store, err)
	}
	s.proxy = px
	s.Addr = px.Addr()
	if target.ProxyDSN != nil {
		s.DSN = target.ProxyDSN(s.Addr)
	} else {
		s.DSN = serve.WithHost(target.DirectDSN, s.Addr)
	}
	tb.Cleanup(func() {
		s.Disarm()
		if err := px.Close(); err != nil {
			tb.Errorf("indoubttest: close proxy: %v", err)
		}
	})
	return s
}

// seedOf derives the fault seed from the test's name, so that a test makes the same
// decisions for the same messages every run (FNV-1a).
func seedOf(name string) int64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(name); i++ {
		h ^= uint64(name[i])
		h *= 1099511628211
	}
	return int64(h >> 1)
}

func (s *Server) record(e toxics.Event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// Arm arms faults from now on, each given in the schedule syntax of package faults:
// "commit-cut:0.2", "commit-drop:1,max=3", "commit-mixed:0.1@2s-5s" (a window measured
// from this call), "latency:5ms". It returns at once; the windows open and close in
// the background until they end, Disarm is called or the test ends. A spec that does
// not parse fails the test.
func (s *Server) Arm(specs ...string) {
	s.tb.Helper()
	sched, err := faults.ParseSchedule(specs)
	if err != nil {
		s.tb.Fatalf("indoubttest: arm: %v", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	opened := make(chan struct{})
	var once sync.Once
	s.mu.Lock()
	s.cancel = append(s.cancel, cancel)
	s.mu.Unlock()
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		err := sched.Run(ctx, s.proxy, time.Now(), func(w faults.Window) {
			s.mu.Lock()
			s.windows = append(s.windows, w)
			s.mu.Unlock()
			once.Do(func() { close(opened) })
		})
		if err != nil {
			s.mu.Lock()
			s.schedErr = errors.Join(s.schedErr, err)
			s.mu.Unlock()
		}
		once.Do(func() { close(opened) })
	}()
	// Faults without a window are armed before Arm returns, so that the next statement
	// of the test already runs under them.
	if !windowed(sched) {
		<-opened
	}
}

func windowed(sched faults.Schedule) bool {
	for _, f := range sched {
		if f.Start > 0 {
			return true
		}
	}
	return false
}

// Disarm ends every fault Arm armed, at once. Faults already decided for commits in
// flight still happen.
func (s *Server) Disarm() {
	s.mu.Lock()
	cancels := s.cancel
	s.cancel = nil
	s.mu.Unlock()
	for _, c := range cancels {
		c()
	}
	s.running.Wait()
	if f := s.proxy.Faults(); f != nil {
		f.Cut.Disarm()
		f.Drop.Disarm()
		f.Mixed.Disarm()
	}
}

// Events returns the commit faults the proxy fired so far, with their ground truth
// (applied or not), in the order they fired.
func (s *Server) Events() []toxics.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toxics.Event(nil), s.events...)
}

// Windows returns the fault windows opened and closed so far.
func (s *Server) Windows() []faults.Window {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]faults.Window(nil), s.windows...)
}

// Proxy returns the proxy, for what Arm does not cover (partitions by hand, toxics).
func (s *Server) Proxy() *faults.Proxy { return s.proxy }

// Classify maps err to the error contract of package workloads by the store's rules:
// the result wraps workloads.ErrUnknown when the operation may have applied,
// workloads.ErrConflict when it certainly did not and a retry is reasonable; any other
// non-nil error is a definite failure.
func (s *Server) Classify(err error) error {
	if err == nil {
		return nil
	}
	if s.target.Classify == nil {
		// When in doubt, unknown.
		return workloads.Unknown(err, "")
	}
	return s.target.Classify(err)
}
