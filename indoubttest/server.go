package indoubttest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/workloads"
)

// Server is one test's view of a database: the commit-aware proxy in front of a shared
// server, with the DSNs through it and around it, the fault controls and the ground
// truth of every fault the proxy fired. The store packages make it (pgtest.Postgres,
// redistest.Redis, mongotest.Mongo, cqltest.Cassandra). Its methods are safe for
// concurrent use. It stops with the test (t.Cleanup).
type Server struct {
	// Store names the store: postgres, redis, mongo, cql; http or grpc for a service
	// behind apitest's proxy.
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
	// Database names the test's own database (PostgreSQL, MongoDB), database number
	// (Redis) or keyspace (Cassandra); the DSNs already select it.
	Database string

	tb       testing.TB
	target   serve.Target
	proxy    *faults.Proxy
	start    time.Time
	seed     seed
	match    atomic.Pointer[regexp.Regexp]
	mu       sync.Mutex
	events   []toxics.Event
	windows  []schedule.Window
	specs    []string
	cancel   []context.CancelFunc
	running  sync.WaitGroup
	schedErr error
}

// Option configures the Server a store package makes: pgtest.Postgres(t,
// indoubttest.Seed(7)).
type Option struct {
	seed *int64
}

// Seed fixes the seed of the proxy's fault decisions, which otherwise comes from
// INDOUBT_SEED, from Seeds, or from the test's name (see Seeds).
func Seed(n int64) Option { return Option{seed: &n} }

// The store packages make their Servers through serve.NewServer, which is newServer:
// nothing a test writes.
func init() {
	serve.NewServer = func(tb testing.TB, target serve.Target) any {
		opts, _ := target.Options.([]Option)
		return newServer(tb, target, opts)
	}
}

// newServer starts the commit-aware proxy in front of target for the test tb and stops
// it when the test ends. It fails the test if the proxy cannot start.
func newServer(tb testing.TB, target serve.Target, opts []Option) *Server {
	tb.Helper()
	s := &Server{Store: target.Store, DirectDSN: target.DirectDSN, DirectAddr: target.DirectAddr, Database: target.Database, tb: tb, target: target, start: time.Now()}
	s.seed = seedFor(tb, opts)
	proto := target.Protocol
	if proto != nil && proto.Name() != (toxics.CQL{}).Name() {
		// CQL keeps prepared statements per proxy, which a wrapper would lose.
		proto = matching{proto, &s.match}
	}
	px, err := faults.Start(faults.Options{
		Upstream: target.DirectAddr,
		Protocol: proto,
		Seed:     s.seed.n,
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

func (s *Server) record(e toxics.Event) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// Arm arms faults from now on, each in the syntax of `indoubt run --fault`
// (docs/faults.md): "commit-cut:0.2", "commit-drop:1,max=3", "commit-mixed:0.1@2s-5s" (a window measured
// from this call: from 2 s after Arm to 5 s after it), "latency:5ms",
// "partition@1s-2s". A commit fault takes the option match=REGEXP, the statement match
// of `indoubt proxy --match`: only commit points whose text the regular expression
// matches count (for a COMMIT of PostgreSQL, the statements of its transaction block
// and the COMMIT), in place of the default choice of writes and commits:
// "commit-cut:1,max=1,match=INSERT INTO orders". match= comes last among the options
// and takes the rest of the entry, commas included, up to a window "@START-END". A
// match stays in force for every commit fault until Disarm; one match at a time.
// Cassandra's proxy has no match.
//
// Arm returns at once: faults without a window are armed before it returns, and the
// windows open and close in the background until they end, Disarm is called or the
// test ends. A spec that does not parse fails the test.
func (s *Server) Arm(specs ...string) {
	s.tb.Helper()
	plain, re, err := s.parseMatch(specs)
	if err != nil {
		s.tb.Fatalf("indoubttest: arm: %v", err)
		return
	}
	sched, err := schedule.Parse(plain)
	if err != nil {
		s.tb.Fatalf("indoubttest: arm: %v", err)
		return
	}
	if re != nil {
		if old := s.match.Load(); old != nil && old.String() != re.String() {
			s.tb.Fatalf("indoubttest: arm: match=%s while match=%s is armed: one match at a time (Disarm first)", re, old)
			return
		}
		s.match.Store(re)
	}
	ctx, cancel := context.WithCancel(context.Background())
	opened := make(chan struct{})
	var once sync.Once
	s.mu.Lock()
	s.cancel = append(s.cancel, cancel)
	s.specs = append(s.specs, specs...)
	s.mu.Unlock()
	s.running.Add(1)
	go func() {
		defer s.running.Done()
		err := sched.Run(ctx, s.proxy, time.Now(), func(w schedule.Window) {
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

// parseMatch takes the match= option out of the specs: the specs faults parses, and
// the one regular expression they name (nil for none).
func (s *Server) parseMatch(specs []string) ([]string, *regexp.Regexp, error) {
	var out []string
	var re *regexp.Regexp
	for _, spec := range specs {
		rest, expr, ok := cutMatch(spec)
		if !ok {
			out = append(out, spec)
			continue
		}
		if !strings.HasPrefix(rest, "commit-") && !strings.HasPrefix(rest, "commit_") && !apiFault(rest) {
			return nil, nil, fmt.Errorf("%q: match= applies to the commit faults (commit-cut, commit-drop, commit-mixed; response-cut and request-drop at an API)", spec)
		}
		if s.target.Protocol == nil || s.target.Protocol.Name() == (toxics.CQL{}).Name() {
			return nil, nil, fmt.Errorf("%q: the %s proxy has no statement match", spec, s.Store)
		}
		r, err := regexp.Compile(expr)
		if err != nil {
			return nil, nil, fmt.Errorf("%q: match=: %v", spec, err)
		}
		if re != nil && re.String() != r.String() {
			return nil, nil, fmt.Errorf("%q: a second match (%s) in one Arm: one match at a time", spec, re)
		}
		re = r
		out = append(out, rest)
	}
	return out, re, nil
}

// apiFault reports whether spec is one of the commit faults under its API name.
func apiFault(spec string) bool {
	spec = strings.ReplaceAll(strings.ToLower(spec), "_", "-")
	return strings.HasPrefix(spec, "response-cut") || strings.HasPrefix(spec, "request-drop")
}

// window is the "@START-END" that may end a schedule entry.
var window = regexp.MustCompile(`@[0-9][0-9.a-zµ]*-([0-9][0-9.a-zµ]*)?$`)

// cutMatch splits "commit-cut:0.2,match=INSERT@1s-2s" into "commit-cut:0.2@1s-2s" and
// "INSERT".
func cutMatch(spec string) (rest, expr string, ok bool) {
	i := strings.Index(spec, ",match=")
	if j := strings.Index(spec, ":match="); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	if i < 0 {
		return spec, "", false
	}
	expr = spec[i+len(",match="):]
	at := ""
	if w := window.FindString(expr); w != "" {
		at, expr = w, strings.TrimSuffix(expr, w)
	}
	return spec[:i] + at, expr, true
}

func windowed(sched schedule.Schedule) bool {
	for _, f := range sched {
		if f.Start > 0 {
			return true
		}
	}
	return false
}

// Disarm ends every fault Arm armed, and its match, at once. Faults already decided
// for commits in flight still happen.
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
	s.match.Store(nil)
}

// Events returns the commit faults the proxy fired so far, with their ground truth
// (applied or not), in the order they fired.
func (s *Server) Events() []toxics.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toxics.Event(nil), s.events...)
}

// armed returns what the faults did so far: the events, the windows opened and
// closed, the specs armed, and an error of a schedule that could not run.
func (s *Server) armed() ([]toxics.Event, []schedule.Window, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]toxics.Event(nil), s.events...), append([]schedule.Window(nil), s.windows...), append([]string(nil), s.specs...), s.schedErr
}

// Proxy returns the proxy, for what Arm does not cover (a toxic of toxiproxy's added by
// hand, a partition started and ended by the test).
func (s *Server) Proxy() *faults.Proxy { return s.proxy }

// Classify maps err to the error contract of package workloads by the store's rules
// (those of indoubt's adapter for the store): the result wraps workloads.ErrUnknown
// when the operation may have applied, workloads.ErrConflict when it certainly did not
// and a retry is reasonable; any other non-nil error is a definite failure. Op.Done
// applies it; call it from a classifier of your own (Recorder.SetClassifier) for the
// errors your code does not know better.
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

// matching is a protocol whose commit points count by the armed match, when there is
// one, instead of by their default: what toxics.Config.Match does for a whole proxy,
// changed while the proxy runs.
type matching struct {
	toxics.Protocol
	re *atomic.Pointer[regexp.Regexp]
}

func (m matching) NewConn() toxics.Conn { return matchingConn{m.Protocol.NewConn(), m.re} }

type matchingConn struct {
	toxics.Conn
	re *atomic.Pointer[regexp.Regexp]
}

// Upstream passes on the wrapped protocol's bytes for the server (HTTP/2's resets and
// flow-control credit after a stream cut), when it has any.
func (c matchingConn) Upstream() []byte {
	if u, ok := c.Conn.(toxics.Upstreamer); ok {
		return u.Upstream()
	}
	return nil
}

func (c matchingConn) Request(b []byte) (int, *toxics.Point) {
	n, p := c.Conn.Request(b)
	if p != nil {
		if re := c.re.Load(); re != nil {
			p.Default = re.MatchString(p.Text)
		}
	}
	return n, p
}
