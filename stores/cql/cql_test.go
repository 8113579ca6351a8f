package cql_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/internal/servers/cassandra"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/stores/cql"
	"github.com/indoubt/indoubt/stores/storetest"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
)

// tombstoneLimit is the node's tombstone_failure_threshold, kept low so that a read
// failure can be provoked with a few deletes.
const tombstoneLimit = 50

var node = servertest.New("cassandra", func(ctx context.Context) (*cassandra.Server, error) {
	return cassandra.Start(ctx, cassandra.Options{
		Settings: map[string]string{
			"tombstone_failure_threshold": strconv.Itoa(tombstoneLimit),
			// The suite races 16 sessions on one partition on a shared 2-core machine:
			// Paxos contention past the default 1.8 s would fail it with CAS write
			// timeouts, which are correct answers but not what the suite checks.
			"cas_contention_timeout": "20000ms",
			"write_request_timeout":  "20000ms",
			"read_request_timeout":   "20000ms",
		},
	})
})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, node)) }

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// concurrently opens one session per worker and runs work on all of them at once,
// returning when every worker is done; the sessions close when the test ends.
func concurrently(t *testing.T, ctx context.Context, c *cql.Client, workers int, work func(w int, s budget.Session)) {
	t.Helper()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		s, err := c.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			work(w, s)
		}()
	}
	wg.Wait()
}

// open connects a client to hosts (the test node when none), in keyspace ks.
func open(t *testing.T, ks string, hosts ...string) *cql.Client {
	t.Helper()
	srv := node.Get(t)
	if len(hosts) == 0 {
		hosts = []string{srv.Addr}
	}
	c, err := cql.Open(testContext(t), cql.Config{Hosts: hosts, Keyspace: ks, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestConformance(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		storetest.Budget(t, func(t *testing.T) budget.Store { return open(t, "conformance") })
	})
	t.Run("register", func(t *testing.T) {
		storetest.Register(t, func(t *testing.T) register.Store { return open(t, "conformance").Register() })
	})
}

func TestParseDSN(t *testing.T) {
	got, err := cql.ParseDSN("cql://127.0.0.1:9042,127.0.0.2/ks?consistency=one&serial=local_serial&timeout=3s&driver_retry=true&replication={'class':%20'NetworkTopologyStrategy',%20'dc1':%203}")
	if err != nil {
		t.Fatal(err)
	}
	want := cql.Config{Replication: "{'class': 'NetworkTopologyStrategy', 'dc1': 3}", Hosts: []string{"127.0.0.1:9042", "127.0.0.2"}, Keyspace: "ks", Consistency: gocql.One,
		SerialConsistency: gocql.LocalSerial, Timeout: 3 * time.Second, DriverRetry: true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseDSN = %+v, want %+v", got, want)
	}
	// User info is the credentials, not part of a host: to its last '@', as net/url.
	for dsn, want := range map[string][3]string{
		"cql://u:a:b@c@127.0.0.1:1/ks":                 {"u", "a:b@c", "127.0.0.1:1"},
		"cql://cassandra:p%40ss@h1:9042,h2:9042/ks":    {"cassandra", "p@ss", "h1:9042"},
		"cassandra://h:9042/ks?username=c&password=pw": {"c", "pw", "h:9042"},
	} {
		got, err := cql.ParseDSN(dsn)
		if err != nil || got.Username != want[0] || got.Password != want[1] || got.Hosts[0] != want[2] {
			t.Errorf("ParseDSN(%q) = user %q password %q hosts %q (%v), want %q", dsn, got.Username, got.Password, got.Hosts, err, want)
		}
	}
	for _, bad := range []string{"postgres://x/y", "cql:///ks", "cql://h/ks?consistency=most", "cql://h/ks?timeout=soon", "cql://u:%zz@h/ks", "cql://u:pw@/ks"} {
		if _, err := cql.ParseDSN(bad); err == nil {
			t.Errorf("ParseDSN(%q) accepted", bad)
		}
	}
	// net/url's error quotes the text it refused, password and all.
	if _, err := cql.ParseDSN("cql://h:9042/ks\x7f?password=S3CRET"); err == nil || strings.Contains(err.Error(), "S3CRET") {
		t.Errorf("ParseDSN of a DSN with a control character: %v; want an error without the password", err)
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	if _, err := cql.Open(ctx, cql.Config{}); err == nil {
		t.Error("Open without hosts succeeded")
	}
	if _, err := cql.Open(ctx, cql.Config{Hosts: []string{"127.0.0.1:1"}, Keyspace: "a; DROP"}); err == nil {
		t.Error("Open with a keyspace that is not a CQL name succeeded")
	}
	if _, err := cql.Open(ctx, cql.Config{Hosts: []string{"127.0.0.1:1"}, ConnectTimeout: time.Second}); err == nil {
		t.Error("Open of a closed port succeeded")
	}
}

// TestDecrementReportsConflicts races two sessions whose reads saw the same balance: the
// loser's first UPDATE ... IF loses, which Outcome.Conflicts must count.
func TestDecrementReportsConflicts(t *testing.T) {
	ctx := testContext(t)
	c := open(t, "conflicts")
	for _, idempotent := range []bool{false, true} {
		if err := c.Reset(ctx, 400); err != nil {
			t.Fatal(err)
		}
		const workers, each = 8, 25
		var mu sync.Mutex
		conflicts, applied := 0, 0
		errs := make(chan error, workers)
		concurrently(t, ctx, c, workers, func(w int, s budget.Session) {
			for i := 0; i < each; i++ {
				o, err := s.Decrement(ctx, workloads.Request{OpID: fmt.Sprintf("%d-%d", w, i), Idempotent: idempotent})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				conflicts += o.Conflicts
				if o.Applied {
					applied++
				}
				mu.Unlock()
			}
		})
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		bal, err := c.Balance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if applied != workers*each || bal != 400-int64(applied) {
			t.Errorf("idempotent %v: applied %d, balance %d; want %d and %d", idempotent, applied, bal, workers*each, 400-workers*each)
		}
		if conflicts == 0 {
			t.Errorf("idempotent %v: %d workers on one account and no conflict counted", idempotent, workers)
		}
		t.Logf("idempotent %v: %d applied, %d conflicts", idempotent, applied, conflicts)
	}
}

// TestConnNamesTheDataConnection checks Conn against what a relay in front of the node
// saw: the connection that carried the operation, not gocql's control connection.
func TestConnNamesTheDataConnection(t *testing.T) {
	srv := node.Get(t)
	r := newRelay(t, srv.Addr)
	ctx := testContext(t)
	c := open(t, "conn", r.addr())
	if err := c.Reset(ctx, 10); err != nil {
		t.Fatal(err)
	}
	s, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r.watch()
	if _, err := s.Decrement(ctx, workloads.Request{OpID: "x"}); err != nil {
		t.Fatal(err)
	}
	if got, want := s.Conn(), r.carrier(); got != want || got == "" {
		t.Errorf("Conn() = %q; the relay saw the operation on the connection from %q", got, want)
	}
}

// TestClassifyRealErrors provokes errors on the real node and checks their class.
func TestClassifyRealErrors(t *testing.T) {
	srv := node.Get(t)
	ctx := testContext(t)
	c := open(t, "classify")
	if err := c.Reset(ctx, 5); err != nil {
		t.Fatal(err)
	}
	admin := gocqlSession(t, srv.Addr)
	mustExec(t, admin, "CREATE KEYSPACE IF NOT EXISTS classify_rf3 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}")
	mustExec(t, admin, "CREATE TABLE IF NOT EXISTS classify_rf3.t (k text PRIMARY KEY, v bigint)")
	mustExec(t, admin, "CREATE TABLE IF NOT EXISTS classify.tomb (k text, c int, s int static, v int, PRIMARY KEY (k, c))")
	for i := 0; i <= tombstoneLimit; i++ {
		mustExec(t, admin, "INSERT INTO classify.tomb (k, c, v) VALUES ('dead', ?, 1)", i)
		mustExec(t, admin, "DELETE FROM classify.tomb WHERE k = 'dead' AND c = ?", i)
	}
	closed := gocqlSession(t, srv.Addr)
	closed.Close()

	serial := gocql.Consistency(gocql.Serial)
	cases := []struct {
		name   string
		write  bool
		run    func() error
		class  workloads.Class
		reason workloads.Reason
	}{
		{"syntax error of a write", true, func() error {
			return admin.Query("UPDAT classify.budget SET balance = 1").Exec()
		}, workloads.ClassDefinite, "syntax"},
		{"unknown table in a read", false, func() error {
			var v int64
			return admin.Query("SELECT v FROM classify.nosuch WHERE k = 'a'").Scan(&v)
		}, workloads.ClassDefinite, "invalid"},
		{"LWT on a keyspace with more replicas than nodes", true, func() error {
			_, err := admin.Query("UPDATE classify_rf3.t SET v = 1 WHERE k = 'a' IF v = 0").MapScanCAS(map[string]any{})
			return err
		}, workloads.ClassDefinite, "unavailable"},
		{"SERIAL read on a keyspace with more replicas than nodes", false, func() error {
			var v int64
			return admin.Query("SELECT v FROM classify_rf3.t WHERE k = 'a'").Consistency(serial).Scan(&v)
		}, workloads.ClassDefinite, "unavailable"},
		{"read over too many tombstones", false, func() error {
			return admin.Query("SELECT v FROM classify.tomb WHERE k = 'dead'").Iter().Close()
		}, workloads.ClassDefinite, "read-failure"},
		{"LWT whose Paxos read fails over tombstones", true, func() error {
			// IF EXISTS on the partition makes the Paxos read look for any live row.
			_, err := admin.Query("UPDATE classify.tomb SET s = 1 WHERE k = 'dead' IF EXISTS").MapScanCAS(map[string]any{})
			return err
		}, workloads.ClassUnknown, "read-failure"},
		{"write on a closed session", true, func() error {
			return closed.Query("UPDATE classify.tomb SET v = 2 WHERE k = 'x' AND c = 0").Exec()
		}, workloads.ClassDefinite, workloads.ReasonClientClosed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.run()
			if raw == nil {
				t.Fatal("no error")
			}
			err := classify(raw, tc.write)
			if got := workloads.Classify(err); got != tc.class {
				t.Errorf("class of %v (%T) = %v, want %v", raw, raw, got, tc.class)
			}
			if got := workloads.ReasonOf(err); got != tc.reason {
				t.Errorf("reason of %v (%T) = %q, want %q", raw, raw, got, tc.reason)
			}
		})
	}

	t.Run("decrement with its context already ended", func(t *testing.T) {
		s, err := c.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		done, cancel := context.WithCancel(ctx)
		cancel()
		_, err = s.Decrement(done, workloads.Request{OpID: "late"})
		if got := workloads.Classify(err); got != workloads.ClassDefinite || !errors.Is(err, context.Canceled) {
			t.Errorf("got %v (class %v), want a definite context error", err, got)
		}
	})
}

// TestCutConnection cuts the connection under an LWT with a relay in front of the node,
// once after the node answered (the write applied) and once before the request reached
// it (it did not). The client cannot tell the two apart, so both must be unknown; the
// balance shows the difference was real.
func TestCutConnection(t *testing.T) {
	srv := node.Get(t)
	for _, tc := range []struct {
		name        string
		forward     bool
		wantBalance int64
	}{
		{"after the node applied it", true, 4},
		{"before the node saw it", false, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testContext(t)
			r := newRelay(t, srv.Addr)
			c := open(t, "cut", r.addr())
			if err := c.Reset(ctx, 5); err != nil {
				t.Fatal(err)
			}
			s, err := c.Session(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// Warm up: the first decrement prepares the statements.
			if _, err := s.Decrement(ctx, workloads.Request{OpID: "warm"}); err != nil {
				t.Fatal(err)
			}
			if err := c.Reset(ctx, 5); err != nil {
				t.Fatal(err)
			}
			// Let the SERIAL read through; cut at the UPDATE ... IF.
			r.cutAt(2, tc.forward)
			_, err = s.Decrement(ctx, workloads.Request{OpID: "cut"})
			if got := workloads.Classify(err); got != workloads.ClassUnknown {
				t.Errorf("error %v: class %v, want unknown", err, got)
			}
			t.Logf("cut %s: %v (reason %s)", tc.name, err, workloads.ReasonOf(err))
			bal, err := c.Balance(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if bal != tc.wantBalance {
				t.Errorf("balance after the cut = %d, want %d", bal, tc.wantBalance)
			}
			// The session dials a new connection and goes on.
			if _, err := s.Decrement(ctx, workloads.Request{OpID: "after"}); err != nil {
				t.Errorf("decrement after the cut: %v", err)
			}
		})
	}
}

func TestClassifyConstructed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		write  bool
		class  workloads.Class
		reason workloads.Reason
	}{
		{"CAS write timeout", &gocql.RequestErrWriteTimeout{WriteType: "CAS"}, true, workloads.ClassUnknown, "write-timeout-cas"},
		{"simple write timeout", &gocql.RequestErrWriteTimeout{WriteType: "SIMPLE"}, true, workloads.ClassUnknown, "write-timeout-simple"},
		{"batch log write timeout", &gocql.RequestErrWriteTimeout{WriteType: "BATCH_LOG"}, true, workloads.ClassUnknown, "write-timeout-batch_log"},
		{"write failure", &gocql.RequestErrWriteFailure{WriteType: "CAS"}, true, workloads.ClassUnknown, "write-failure"},
		{"CAS write unknown", &gocql.RequestErrCASWriteUnknown{}, true, workloads.ClassUnknown, workloads.ReasonServerUnknown},
		{"read timeout of a read", &gocql.RequestErrReadTimeout{}, false, workloads.ClassDefinite, "read-timeout"},
		{"read timeout inside an LWT", &gocql.RequestErrReadTimeout{}, true, workloads.ClassUnknown, "read-timeout"},
		{"unavailable", &gocql.RequestErrUnavailable{}, true, workloads.ClassDefinite, "unavailable"},
		{"function failure", &gocql.RequestErrFunctionFailure{}, true, workloads.ClassDefinite, "function-failure"},
		{"no connections", gocql.ErrNoConnections, true, workloads.ClassDefinite, "no-connections"},
		{"no streams", gocql.ErrNoStreams, true, workloads.ClassDefinite, "no-streams"},
		{"connection closed", gocql.ErrConnectionClosed, true, workloads.ClassUnknown, "conn-closed"},
		{"client timeout", gocql.ErrTimeoutNoResponse, true, workloads.ClassUnknown, "timeout"},
		{"client timeout of a read", gocql.ErrTimeoutNoResponse, false, workloads.ClassDefinite, "timeout"},
		{"deadline while waiting", context.DeadlineExceeded, true, workloads.ClassUnknown, workloads.ReasonTimeout},
		{"eof", io.ErrUnexpectedEOF, true, workloads.ClassUnknown, workloads.ReasonConnClosed},
		{"reset", syscall.ECONNRESET, true, workloads.ClassUnknown, workloads.ReasonConnReset},
		{"unrecognised", errors.New("something else"), true, workloads.ClassUnknown, workloads.ReasonConnLost},
		{"bad answer", gocql.NewErrProtocol("unexpected protocol version"), true, workloads.ClassUnknown, workloads.ReasonBadReply},
		{"wrapped", fmt.Errorf("ctx: %w", &gocql.RequestErrWriteTimeout{WriteType: "CAS"}), true, workloads.ClassUnknown, "write-timeout-cas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classify(tc.err, tc.write)
			if got := workloads.Classify(err); got != tc.class {
				t.Errorf("class = %v, want %v", got, tc.class)
			}
			if got := workloads.ReasonOf(err); got != tc.reason {
				t.Errorf("reason = %q, want %q", got, tc.reason)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("classified error lost its cause %v", tc.err)
			}
		})
	}
	if cql.Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}

// TestBudgetThroughput is the stand's measurement: 16 workers x 100 attempts on a
// budget of 1000. It takes minutes, so it runs only with INDOUBT_CQL_MEASURE=1.
func TestBudgetThroughput(t *testing.T) {
	if os.Getenv("INDOUBT_CQL_MEASURE") == "" {
		t.Skip("set INDOUBT_CQL_MEASURE=1 to measure 16 workers x 100 attempts on a budget of 1000")
	}
	const workers, each, total = 16, 100, 1000
	for _, idempotent := range []bool{false, true} {
		ctx := testContext(t)
		c := open(t, "measure")
		if err := c.Reset(ctx, total); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var applied, rejected, conflicts, ops int
		var firstErr error
		began := time.Now()
		var lastApplied time.Duration
		concurrently(t, ctx, c, workers, func(w int, s budget.Session) {
			for i := 0; i < each; i++ {
				o, err := s.Decrement(ctx, workloads.Request{OpID: fmt.Sprintf("%d-%d", w, i), Idempotent: idempotent})
				mu.Lock()
				ops++
				if err != nil && firstErr == nil {
					firstErr = err
				}
				conflicts += o.Conflicts
				if o.Applied {
					applied++
					lastApplied = time.Since(began)
				} else if err == nil {
					rejected++
				}
				mu.Unlock()
			}
		})
		elapsed := time.Since(began)
		if firstErr != nil {
			t.Errorf("idempotent %v: %v", idempotent, firstErr)
		}
		bal, err := c.Balance(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if applied != total || rejected != workers*each-total || bal != 0 {
			t.Errorf("idempotent %v: applied %d, rejected %d, balance %d", idempotent, applied, rejected, bal)
		}
		t.Logf("idempotent %v: %d applied in %v (%.1f applied/s until the budget ran out), %d ops in %v (%.1f ops/s), %d failed CAS (%.1f per applied)",
			idempotent, applied, lastApplied.Round(time.Millisecond), float64(applied)/lastApplied.Seconds(),
			ops, elapsed.Round(time.Millisecond), float64(ops)/elapsed.Seconds(), conflicts, float64(conflicts)/float64(applied))
	}
}

func gocqlSession(t *testing.T, addr string) *gocql.Session {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	cl := gocql.NewCluster(host)
	cl.Port, _ = strconv.Atoi(port)
	cl.ProtoVersion = 4
	cl.Timeout = 30 * time.Second
	s, err := cl.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func mustExec(t *testing.T, s *gocql.Session, stmt string, args ...any) {
	t.Helper()
	if err := s.Query(stmt, args...).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

// relay is a TCP relay in front of the real node that can cut a connection at a chosen
// request. It reads CQL v4 frame headers only to count requests: gocql writes each frame
// whole, and a relay read starts at a frame boundary unless the client pipelines, which
// one worker's session does not.
type relay struct {
	t        *testing.T
	ln       net.Listener
	upstream string

	mu       sync.Mutex
	watching bool
	carried  string // the client address of the last request seen while watching
	cutN     int    // cut at the cutN-th query-like request after cutAt; 0 = off
	forward  bool   // forward the request and swallow the answer before cutting
}

func newRelay(t *testing.T, upstream string) *relay {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{t: t, ln: ln, upstream: upstream}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); r.serve(c) }()
		}
	}()
	return r
}

func (r *relay) addr() string { return r.ln.Addr().String() }

func (r *relay) watch() {
	r.mu.Lock()
	r.watching, r.carried = true, ""
	r.mu.Unlock()
}

func (r *relay) carrier() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.carried
}

func (r *relay) cutAt(n int, forward bool) {
	r.mu.Lock()
	r.cutN, r.forward = n, forward
	r.mu.Unlock()
}

// isQuery reports whether a chunk starts with a v4 request frame that runs a statement:
// QUERY (0x07), EXECUTE (0x0A) or BATCH (0x0D).
func isQuery(b []byte) bool {
	return len(b) >= 9 && b[0] == 0x04 && (b[4] == 0x07 || b[4] == 0x0A || b[4] == 0x0D)
}

func (r *relay) serve(client net.Conn) {
	defer client.Close()
	up, err := net.Dial("tcp", r.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	var swallow atomic.Bool
	answered := make(chan struct{})
	go func() {
		defer client.Close()
		buf := make([]byte, 64<<10)
		once := sync.Once{}
		for {
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			if swallow.Load() {
				once.Do(func() { close(answered) })
				continue
			}
			if _, err := client.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if err != nil {
			return
		}
		chunk := buf[:n]
		cut, forward := false, false
		if isQuery(chunk) {
			r.mu.Lock()
			if r.watching {
				r.carried = client.RemoteAddr().String()
			}
			if r.cutN > 0 {
				r.cutN--
				if r.cutN == 0 {
					cut, forward = true, r.forward
				}
			}
			r.mu.Unlock()
		}
		if !cut {
			if _, err := up.Write(chunk); err != nil {
				return
			}
			continue
		}
		if forward {
			// Send the request but keep its answer from the client; once the node has
			// answered, it has certainly executed the request.
			swallow.Store(true)
			if _, err := up.Write(chunk); err != nil {
				return
			}
			select {
			case <-answered:
			case <-time.After(20 * time.Second):
				r.t.Errorf("relay: no answer from the node within 20s")
			}
		}
		return
	}
}

// classify classifies err as the adapter does for a write or for a read.
func classify(err error, write bool) error {
	if write {
		return cql.Classify(err)
	}
	return cql.ClassifyRead(err)
}
