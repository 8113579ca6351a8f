package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"
	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// lockedBuffer is a bytes.Buffer safe for the proxy's goroutines and the test's.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestProxyHelp(t *testing.T) {
	var out, errb bytes.Buffer
	err := proxyCommand(context.Background(), []string{"--help"}, &out, &errb)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Example", "-upstream", "-cut-after-commit", "-drop-commit", "-events", "-api", "-fault", "-match"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestProxyBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--upstream", "127.0.0.1:5432", "--cut-after-commit", "2"},
		{"--upstream", "127.0.0.1:5432", "--drop-commit", "-0.1"},
		{"--upstream", "127.0.0.1:5432", "--drop-commit", "NaN"},
		{"--upstream", "127.0.0.1:5432", "--cut-after-commit", "0.7", "--drop-commit", "0.7"},
		{"--upstream", "127.0.0.1:5432", "--protocol", "oracle"},
		{"--upstream", "127.0.0.1:5432", "--protocol", "tcp", "--cut-after-commit", "1"},
		{"--upstream", "127.0.0.1:5432", "--fault", "commit-cut:3"},
		{"--upstream", "127.0.0.1:5432", "--fault", "commit-cut:0.1", "--cut-after-commit", "0.1"},
		{"--upstream", "127.0.0.1:5432", "--match", "(unclosed"},
		{"--upstream", "127.0.0.1:5432", "--listen", "256.1.1.1:0"},
		{"--upstream", "127.0.0.1:5432", "--listen", "127.0.0.1:0", "--api", "nonsense"},
		{"--upstream", "127.0.0.1:5432", "--events", "/no/such/dir/faults.jsonl"},
		{"--upstream", "127.0.0.1:5432", "--no-such-flag"},
		{"--upstream", "127.0.0.1:5432", "extra"},
	} {
		var out, errb bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := proxyCommand(ctx, args, &out, &errb)
		cancel()
		if err == nil {
			t.Errorf("%q: no error", args)
			continue
		}
		if strings.Contains(err.Error(), "\n") || out.Len() > 0 {
			t.Errorf("%q: error %q, stdout %q: want one line and nothing on stdout", args, err, out.String())
		}
	}
}

// startPostgres returns the package's shared PostgreSQL, launching it on first use.
func startPostgres(t *testing.T) *postgres.Server {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		shared.pg, shared.err = postgres.Start(ctx, postgres.Options{})
	})
	if shared.err != nil {
		servertest.SkipOrFail(t, shared.err)
		t.Fatal(shared.err)
	}
	return shared.pg
}

// shared is the PostgreSQL of startPostgres, launched by the first test that needs it
// and stopped by TestMain: each launch is an initdb, seconds on a loaded machine. The
// tests that run a workload on it (the budget's tables) do not run in parallel; the
// proxy's tests each use a table of their own.
var shared struct {
	once sync.Once
	pg   *postgres.Server
	err  error
}

func stopShared() {
	if shared.pg != nil {
		shared.pg.Stop()
	}
}

// startPostgresWith runs setup on the shared server through a direct connection,
// which it returns for the test to look at the server's own state.
func startPostgresWith(t *testing.T, ctx context.Context, setup string) (*postgres.Server, *pgx.Conn) {
	t.Helper()
	srv := startPostgres(t)
	direct, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close(ctx) })
	if _, err := direct.Exec(ctx, setup); err != nil {
		t.Fatal(err)
	}
	return srv, direct
}

// proxiedDSN is srv's DSN with the proxy's address in place of the server's.
func proxiedDSN(srv *postgres.Server, proxyAddr string) string {
	host, port, _ := net.SplitHostPort(proxyAddr)
	return fmt.Sprintf("postgres://%s:%s@%s:%s/%s?sslmode=disable", postgres.User, srv.Password, host, port, postgres.Database)
}

// TestProxyPsql runs psql through `indoubt proxy` with each commit fault at
// probability 1: psql's COMMIT fails either way; the proxy's event says whether it
// applied, and the server agrees.
func TestProxyPsql(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, direct := startPostgresWith(t, ctx, "create table account (id int primary key, balance int not null)")
	psql := filepath.Join(srv.BinDir, "psql")
	if _, err := os.Stat(psql); err != nil {
		servertest.SkipOrFail(t, &servers.NotInstalledError{Server: "postgres", Program: "psql", Hint: "install Debian package postgresql-client"})
	}
	for i, tt := range []struct {
		flag    string
		kind    toxics.Kind
		applied bool
	}{
		{"--cut-after-commit", toxics.CommitCut, true},
		{"--drop-commit", toxics.CommitDrop, false},
	} {
		t.Run(tt.flag, func(t *testing.T) {
			if _, err := direct.Exec(ctx, "insert into account values ($1, 100)", i); err != nil {
				t.Fatal(err)
			}
			events := filepath.Join(t.TempDir(), "faults.jsonl")
			pctx, stop := context.WithCancel(ctx)
			defer stop()
			var out, errb lockedBuffer
			done := make(chan error, 1)
			go func() {
				done <- proxyCommand(pctx, []string{"--upstream", srv.Addr, "--listen", "127.0.0.1:0", tt.flag, "1", "--events", events, "--seed", "5"}, &out, &errb)
			}()
			addr := waitListening(t, &errb, done)
			host, port, _ := strings.Cut(addr, ":")
			cmd := exec.Command(psql, "-X", "-h", host, "-p", port, "-U", postgres.User, "-d", postgres.Database,
				"-v", "ON_ERROR_STOP=1",
				"-c", "begin",
				"-c", "update account set balance = balance - 1 where id = "+string(rune('0'+i)),
				"-c", "commit")
			cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=5", "PGPASSWORD="+srv.Password)
			psqlOut, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("psql succeeded through the proxy:\n%s", psqlOut)
			}
			if !strings.Contains(string(psqlOut), "server closed the connection unexpectedly") {
				t.Errorf("psql output %q, want a lost connection", psqlOut)
			}
			var bal int
			if err := direct.QueryRow(ctx, "select balance from account where id = $1", i).Scan(&bal); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 99, false: 100}[tt.applied]; bal != want {
				t.Errorf("balance %d after the %v, want %d", bal, tt.kind, want)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("proxy: %v", err)
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 1 || !regexp.MustCompile(`^\d\d:\d\d:\d\d\.\d{3} `+tt.kind.String()+` (applied|not-applied) 127\.0\.0\.1:\d+ "commit"`).MatchString(lines[0]) {
				t.Errorf("stdout %q, want one %v line", out.String(), tt.kind)
			}
			b, err := os.ReadFile(events)
			if err != nil {
				t.Fatal(err)
			}
			var e toxics.Event
			if err := json.Unmarshal(bytes.TrimSpace(b), &e); err != nil {
				t.Fatalf("events file %q: %v", b, err)
			}
			wantTruth := toxics.NotApplied
			if tt.applied {
				wantTruth = toxics.Applied
			}
			if e.Kind != tt.kind || e.Truth != wantTruth || e.Statement != "commit" || e.Protocol != "postgres" {
				t.Errorf("event %+v, want %v %v on commit", e, tt.kind, wantTruth)
			}
			// The UPDATE's tag, read before the COMMIT, proves the commit changed a row.
			wantTotals := map[bool]string{true: "1 cut (1 proven applied, 0 committed without a visible effect, 0 committed, the reply does not say what changed), 0 dropped", false: "0 cut (0 proven applied, 0 committed without a visible effect, 0 committed, the reply does not say what changed), 1 dropped"}[tt.applied]
			if !strings.Contains(errb.String(), "stopped; commit faults: "+wantTotals) {
				t.Errorf("stderr %q, want the totals %q", errb.String(), wantTotals)
			}
		})
	}
}

var listeningRE = regexp.MustCompile(`listening on (\S+),`)

// waitListening returns the proxy's address from its status line on stderr.
func waitListening(t *testing.T, errb *lockedBuffer, done chan error) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		sc := bufio.NewScanner(strings.NewReader(errb.String()))
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				return m[1]
			}
		}
		select {
		case err := <-done:
			t.Fatalf("proxy ended before listening: %v (stderr %q)", err, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("proxy did not report its address: stderr %q", errb.String())
	return ""
}

// runningProxy is `indoubt proxy` running in the test until stop, which stands for
// SIGINT: main cancels the same context on a signal.
type runningProxy struct {
	addr      string
	out, errb *lockedBuffer
	stop      func() error
}

func startProxyCommand(t *testing.T, args ...string) *runningProxy {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rp := &runningProxy{out: &lockedBuffer{}, errb: &lockedBuffer{}}
	done := make(chan error, 1)
	go func() { done <- proxyCommand(ctx, args, rp.out, rp.errb) }()
	var once sync.Once
	var err error
	rp.stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { rp.stop() })
	rp.addr = waitListening(t, rp.errb, done)
	return rp
}

// idleUpstream is a TCP listener that accepts and holds connections, an upstream for
// tests that need none of a server's replies.
func idleUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestProxyBindPolicy: the proxy and its API bind loopback unless --allow-remote, which
// warns; ":PORT" is loopback.
func TestProxyBindPolicy(t *testing.T) {
	up := idleUpstream(t)
	for _, args := range [][]string{
		{"proxy", "--upstream", up, "--listen", "0.0.0.0:0"},
		{"proxy", "--upstream", up, "--listen", "[::]:0"},
		{"proxy", "--upstream", up, "--listen", "127.0.0.1:0", "--api", "0.0.0.0:0"},
	} {
		code, out, errs := invoke(t, args...)
		if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "--allow-remote") || out != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q: want exit 3 and one line naming --allow-remote", args, code, errs, out)
		}
	}
	rp := startProxyCommand(t, "--upstream", up, "--listen", ":0", "--api", ":0")
	if host, _, _ := net.SplitHostPort(rp.addr); host != "127.0.0.1" {
		t.Errorf("--listen :0 bound %s, want loopback", rp.addr)
	}
	if !regexp.MustCompile(`toxiproxy API on 127\.0\.0\.1:\d+\)`).MatchString(rp.errb.String()) {
		t.Errorf("--api :0: status %q, want the API on loopback", rp.errb.String())
	}
	if strings.Contains(rp.errb.String(), "warning") {
		t.Errorf("loopback binds warned: %q", rp.errb.String())
	}
	rp.stop()

	rp = startProxyCommand(t, "--upstream", up, "--listen", "0.0.0.0:0", "--api", "0.0.0.0:0", "--allow-remote")
	if n := strings.Count(rp.errb.String(), "warning:"); n != 2 {
		t.Errorf("--allow-remote on 0.0.0.0: stderr %q, want two warnings (proxy and API)", rp.errb.String())
	}
}

// TestProxyUpstreamValidated: an upstream that cannot be dialled is refused at start,
// one line, exit 3, instead of dropping every client later.
func TestProxyUpstreamValidated(t *testing.T) {
	for _, up := range []string{"notanaddr", "127.0.0.1:notaport", "127.0.0.1:99999", "no-such-host.invalid:5432", ":5432"} {
		code, out, errs := invoke(t, "proxy", "--upstream", up, "--listen", "127.0.0.1:0")
		if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "upstream") || out != "" {
			t.Errorf("--upstream %q: exit %d, stderr %q: want exit 3 and one line about the upstream", up, code, errs)
		}
	}
}

// TestProxyStatusLineShowsSchedule: the startup line lists the faults the schedule and
// the flags arm, not zeros for the flags left unset.
func TestProxyStatusLineShowsSchedule(t *testing.T) {
	up := idleUpstream(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--fault", "commit-mixed:0.2"}, "(postgres, seed 1; faults: commit-mixed:0.2)"},
		{[]string{"--fault", "commit-cut:0.5@1s-", "--drop-commit", "0.1", "--fault", "latency:5ms"}, "; faults: drop-commit 0.1, commit-cut:0.5@1s-, latency:5ms)"},
		{[]string{"--seed", "9"}, "(postgres, seed 9; faults: none)"},
		{[]string{"--protocol", "tcp", "--fault", "partition@1s-2s"}, "(tcp; faults: partition@1s-2s)"},
	} {
		rp := startProxyCommand(t, append([]string{"--upstream", up, "--listen", "127.0.0.1:0"}, tt.args...)...)
		rp.stop()
		if !strings.Contains(rp.errb.String(), tt.want) {
			t.Errorf("%q: stderr %q, want %q", tt.args, rp.errb.String(), tt.want)
		}
	}
}

// TestProxyEventsFileStartsAnew: --events truncates unless --append.
func TestProxyEventsFileStartsAnew(t *testing.T) {
	up := idleUpstream(t)
	for _, tt := range []struct {
		appendTo bool
		want     string
	}{{false, ""}, {true, "old line\n"}} {
		path := filepath.Join(t.TempDir(), "faults.jsonl")
		if err := os.WriteFile(path, []byte("old line\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"--upstream", up, "--listen", "127.0.0.1:0", "--events", path}
		if tt.appendTo {
			args = append(args, "--append")
		}
		startProxyCommand(t, args...).stop()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("--append=%v: file %q after a run without faults, want %q", tt.appendTo, b, tt.want)
		}
	}
	// A refused start leaves the file alone.
	path := filepath.Join(t.TempDir(), "faults.jsonl")
	os.WriteFile(path, []byte("old line\n"), 0o644)
	if code, _, _ := invoke(t, "proxy", "--upstream", "notanaddr", "--events", path); code != 3 {
		t.Errorf("bad upstream: exit %d", code)
	}
	if b, _ := os.ReadFile(path); string(b) != "old line\n" {
		t.Errorf("a refused start left %q in the events file", b)
	}
	if code, _, errs := invoke(t, "proxy", "--upstream", up, "--append"); code != 3 || !strings.Contains(errs, "--events") {
		t.Errorf("--append without --events: exit %d %q", code, errs)
	}
}

// TestProxyTotalsOnStop: stopping prints the totals, telling a cut that changed rows
// (an autocommit UPDATE 1, or a COMMIT after one) from one that changed nothing and
// from a COMMIT whose statements' replies do not say (CREATE TABLE).
func TestProxyTotalsOnStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _ := startPostgresWith(t, ctx, "create table totals (id int primary key, n int not null); insert into totals values (1, 0)")
	events := filepath.Join(t.TempDir(), "faults.jsonl")
	os.WriteFile(events, []byte("{\"from\":\"an earlier run\"}\n"), 0o644)
	rp := startProxyCommand(t, "--upstream", srv.Addr, "--listen", "127.0.0.1:0", "--cut-after-commit", "1", "--events", events)
	dsn := proxiedDSN(srv, rp.addr)
	for _, sql := range []string{
		"update totals set n = n + 1 where id = 1", // UPDATE 1
		"update totals set n = n + 1 where id = 2", // UPDATE 0
		"begin; update totals set n = n + 1 where id = 1; commit",
		"begin; create table totals_2 (n int); commit",
	} {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol); err == nil {
			t.Errorf("%q went through a cut at probability 1", sql)
		}
		c.Close(ctx)
	}
	if err := rp.stop(); err != nil {
		t.Fatal(err)
	}
	want := "indoubt proxy: stopped; commit faults: 4 cut (2 proven applied, 1 committed without a visible effect, 1 committed, the reply does not say what changed), 0 dropped (not applied)\n"
	if !strings.HasSuffix(rp.errb.String(), want) {
		t.Errorf("stderr %q, want it to end with %q", rp.errb.String(), want)
	}
	b, _ := os.ReadFile(events)
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 4 || strings.Contains(string(b), "earlier run") {
		t.Errorf("events file %q, want the four cuts of this run alone", b)
	}
}

var apiRE = regexp.MustCompile(`toxiproxy API on (\S+)\)`)

// TestProxyAPICommitToxic steers `indoubt proxy` from toxiproxy's Go client: a
// commit_cut toxic arms the cut, a second is refused, removing it disarms.
func TestProxyAPICommitToxic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, _ := startPostgresWith(t, ctx, "create table steered (id int primary key, n int not null); insert into steered values (1, 0)")
	rp := startProxyCommand(t, "--upstream", srv.Addr, "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0")
	m := apiRE.FindStringSubmatch(rp.errb.String())
	if m == nil {
		t.Fatalf("no API address in %q", rp.errb.String())
	}
	p, err := toxiclient.NewClient(m[1]).Proxy("indoubt")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("cut", "commit_cut", "downstream", 1, toxiclient.Attributes{"probability": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.AddToxic("again", "commit_cut", "downstream", 1, nil); err == nil {
		t.Errorf("a second commit_cut was added")
	}
	dsn := proxiedDSN(srv, rp.addr)
	update := func() error {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "update steered set n = n + 1 where id = 1")
		return err
	}
	if err := update(); err == nil {
		t.Errorf("update went through a commit_cut at probability 1")
	}
	if err := p.RemoveToxic("cut"); err != nil {
		t.Fatal(err)
	}
	if err := update(); err != nil {
		t.Errorf("update after the commit_cut was removed: %v", err)
	}
	rp.stop()
	if !strings.Contains(rp.out.String(), "commit-cut applied") || strings.Count(rp.out.String(), "\n") != 1 {
		t.Errorf("stdout %q, want the one cut", rp.out.String())
	}
	if !strings.Contains(rp.errb.String(), "commit faults: 1 cut (1 proven applied") {
		t.Errorf("stderr %q, want the totals with one cut", rp.errb.String())
	}
}

// proxyBinary is `indoubt proxy` as a process of its own (the real main: signals, exit
// code), with its output kept as it comes.
type proxyBinary struct {
	cmd       *exec.Cmd
	out, errb *lockedBuffer
	done      chan struct{}
}

func startProxyBinary(t *testing.T, args ...string) *proxyBinary {
	t.Helper()
	pb := &proxyBinary{out: &lockedBuffer{}, errb: &lockedBuffer{}, done: make(chan struct{})}
	pb.cmd = exec.Command(os.Args[0], "-test.run=^TestRunAsBinary$")
	pb.cmd.Env = append(os.Environ(), "INDOUBT_TEST_ARGS="+strings.Join(append([]string{"proxy"}, args...), "\x1f"))
	pb.cmd.Stdout, pb.cmd.Stderr = pb.out, pb.errb
	if err := pb.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { pb.cmd.Wait(); close(pb.done) }()
	t.Cleanup(func() {
		pb.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-pb.done:
		case <-time.After(10 * time.Second):
			pb.cmd.Process.Kill()
			<-pb.done
		}
	})
	return pb
}

// wait returns the exit code once the process ends, failing the test after d.
func (pb *proxyBinary) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-pb.done:
		return pb.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("indoubt proxy still runs after %v; stderr %q", d, pb.errb.String())
		return 0
	}
}

// apiAddr waits for the status line and returns the API's address.
func (pb *proxyBinary) apiAddr(t *testing.T) string {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := apiRE.FindStringSubmatch(pb.errb.String()); m != nil {
			return m[1]
		}
		select {
		case <-pb.done:
			t.Fatalf("indoubt proxy ended: stderr %q", pb.errb.String())
		default:
		}
	}
	t.Fatalf("no API address in %q", pb.errb.String())
	return ""
}

// TestProxyRefusesBeforeListening: a process fault and an upstream with a password are
// refused by the binary in one line, exit 3, before it listens, and the password is
// never printed.
func TestProxyRefusesBeforeListening(t *testing.T) {
	up := idleUpstream(t)
	_, port, _ := net.SplitHostPort(up)
	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"--upstream", up, "--listen", "127.0.0.1:0", "--fault", "kill@1s"}, "process fault"},
		{[]string{"--upstream", up, "--listen", "127.0.0.1:0", "--fault", "commit-cut:0.1", "--fault", "pause@1s-2s"}, "process fault"},
		{[]string{"--upstream", "indoubt:Sw0rdf1sh@127.0.0.1:" + port, "--listen", "127.0.0.1:0"}, "user information"},
		{[]string{"--upstream", "postgres://indoubt:Sw0rdf1sh@127.0.0.1:" + port + "/db", "--listen", "127.0.0.1:0"}, "user information"},
		{[]string{"--upstream", up, "--listen", "me:Sw0rdf1sh@127.0.0.1:0"}, "user information"},
	} {
		pb := startProxyBinary(t, tt.args...)
		code := pb.wait(t, 20*time.Second)
		errs := pb.errb.String()
		if code != 3 || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tt.says) || strings.Contains(errs, "listening") || pb.out.String() != "" {
			t.Errorf("%q: exit %d, stderr %q, stdout %q: want exit 3 and one line saying %q", tt.args, code, errs, pb.out.String(), tt.says)
		}
		if strings.Contains(errs, "Sw0rdf1sh") {
			t.Errorf("%q: stderr %q prints the password", tt.args, errs)
		}
	}
}

// TestProxyAPIHardened drives the binary's toxiproxy API: no listener off loopback in
// any spelling, toxic values out of range refused with 400, answers without toxiproxy's
// Logger, and a DELETE of the proxy ends the command with one line and exit 3.
func TestProxyAPIHardened(t *testing.T) {
	up := idleUpstream(t)
	pb := startProxyBinary(t, "--upstream", up, "--listen", "127.0.0.1:0", "--api", "127.0.0.1:0")
	api := "http://" + pb.apiAddr(t)
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tt := range []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/proxies", `{"name":"b1","Listen":"0.0.0.0:0","upstream":"` + up + `"}`, 403},
		{"POST", "/proxies", `{"name":"b2","lIsTeN":"0.0.0.0:0","upstream":"` + up + `"}`, 403},
		{"POST", "/proxies", `{"name":"b3","listen":"","upstream":"` + up + `"}`, 201},
		{"POST", "/proxies", `{"name":"b4","upstream":"` + up + `"}`, 201},
		{"PATCH", "/proxies/b4", `{"LISTEN":"0.0.0.0:0"}`, 403},
		{"POST", "/proxies/indoubt/toxics", `{"type":"latency","toxicity":2,"attributes":{"latency":1}}`, 400},
		{"POST", "/proxies/indoubt/toxics", `{"type":"latency","attributes":{"latency":-100000}}`, 400},
		{"POST", "/proxies/indoubt/toxics", `{"type":"bandwidth","attributes":{"rate":0}}`, 400},
	} {
		if status, body := do(tt.method, tt.path, tt.body); status != tt.want || strings.Contains(body, "Logger") {
			t.Errorf("%s %s %s: %d %s, want %d without Logger", tt.method, tt.path, tt.body, status, body, tt.want)
		}
	}
	status, body := do("GET", "/proxies", "")
	var all map[string]struct{ Listen string }
	if err := json.Unmarshal([]byte(body), &all); status != 200 || err != nil || strings.Contains(body, "Logger") {
		t.Fatalf("GET /proxies: %d %s", status, body)
	}
	if len(all) != 3 {
		t.Errorf("proxies %s, want indoubt, b3 and b4", body)
	}
	for name, p := range all {
		if !strings.HasPrefix(p.Listen, "127.0.0.1:") {
			t.Errorf("proxy %s listens on %s, want loopback", name, p.Listen)
		}
	}
	if status, body := do("DELETE", "/proxies/indoubt", ""); status != http.StatusNoContent {
		t.Fatalf("DELETE /proxies/indoubt: %d %s", status, body)
	}
	if code := pb.wait(t, 20*time.Second); code != 3 {
		t.Errorf("exit %d after the DELETE, want 3", code)
	}
	lines := strings.Split(strings.TrimSpace(pb.errb.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "deleted through the toxiproxy API") {
		t.Errorf("stderr %q: want its last line to say the proxy was deleted", pb.errb.String())
	}
}
