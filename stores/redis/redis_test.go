package redis

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/internal/servers"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/stores/storetest"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
)

// The DEBUG command (refused by default since Redis 7) lets the classification test
// hold the server busy while a request is in flight.
var srv = servertest.New("redis", func(ctx context.Context) (*redisserver.Server, error) {
	return redisserver.Start(ctx, redisserver.Options{
		Settings: map[string]string{"enable-debug-command": "local"},
	})
})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, srv)) }

func open(t testing.TB, cfg Config) *Client {
	t.Helper()
	cfg.Addr, cfg.Password = srv.Get(t).Addr, srv.Get(t).Password
	return storetest.Open(t, func(ctx context.Context) (*Client, error) { return Open(ctx, cfg) })
}

func TestBudget(t *testing.T) {
	storetest.Budget(t, func(t *testing.T) budget.Store { return open(t, Config{}) })
}

func TestRegister(t *testing.T) {
	storetest.Register(t, func(t *testing.T) register.Store { return open(t, Config{}).Register() })
}

func TestOpenRefusesBadConfig(t *testing.T) {
	ctx := context.Background()
	for _, cfg := range []Config{{}, {Addr: "127.0.0.1:1", KeyPrefix: "a*"}} {
		if c, err := Open(ctx, cfg); err == nil {
			c.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		}
	}
}

// TestClassify drives real failures through the adapter, or through a session's own
// go-redis client where the adapter has no way to provoke them, and checks the class each
// gets, and, where the server's state can tell, that the class was right.
func TestClassify(t *testing.T) {
	ctx := context.Background()
	c := open(t, Config{})
	newSession := func(t *testing.T, c *Client) *budgetSession {
		t.Helper()
		s, err := c.Session(ctx)
		if err != nil {
			t.Fatalf("Session: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		return s.(*budgetSession)
	}
	check := storetest.CheckClass

	t.Run("script error reply is definite", func(t *testing.T) {
		if err := c.admin.Del(ctx, c.budgetKeys()...).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := newSession(t, c).Decrement(ctx, workloads.Request{OpID: "x"})
		check(t, err, workloads.ClassDefinite, "INDOUBT")
	})
	t.Run("NOSCRIPT is definite", func(t *testing.T) {
		err := newSession(t, c).client.EvalSha(ctx, "0000000000000000000000000000000000000000", nil).Err()
		check(t, Classify(err), workloads.ClassDefinite, "NOSCRIPT")
	})
	t.Run("EVALSHA falls back to EVAL after SCRIPT FLUSH", func(t *testing.T) {
		if err := c.Reset(ctx, 2); err != nil {
			t.Fatal(err)
		}
		if err := c.admin.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := newSession(t, c).Decrement(ctx, workloads.Request{OpID: "x"})
		if err != nil || !got.Applied || got.Balance != 1 {
			t.Errorf("Decrement after SCRIPT FLUSH = %+v, %v; want applied, balance 1", got, err)
		}
	})
	t.Run("WRONGTYPE is definite", func(t *testing.T) {
		r := c.Register()
		if err := r.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.admin.HSet(ctx, r.keys("h")[0], "f", "v").Err(); err != nil {
			t.Fatal(err)
		}
		s, err := r.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, _, err = s.Read(ctx, "h")
		check(t, err, workloads.ClassDefinite, "WRONGTYPE")
		_, err = s.CAS(ctx, workloads.Request{OpID: "c"}, "h", 1, 2)
		check(t, err, workloads.ClassDefinite, "WRONGTYPE")
	})
	t.Run("connection refused is definite", func(t *testing.T) {
		port, err := servers.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		dead := &Client{cfg: Config{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, prefix: "indoubt"}
		_, err = dead.Session(ctx)
		check(t, err, workloads.ClassDefinite, workloads.ReasonDial)
	})
	t.Run("context ended before the call is definite", func(t *testing.T) {
		s := newSession(t, c)
		done, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Decrement(done, workloads.Request{OpID: "x"})
		check(t, err, workloads.ClassDefinite, workloads.ReasonNotSent)
	})
	t.Run("timeout while the server is busy is unknown, and the decrement applies", func(t *testing.T) {
		if err := c.Reset(ctx, 5); err != nil {
			t.Fatal(err)
		}
		s := newSession(t, c)
		// A first decrement puts the script in the server's cache: a timed-out EVALSHA
		// of an uncached script is a NOSCRIPT no-op, and the EVAL fallback is never sent.
		if _, err := s.Decrement(ctx, workloads.Request{OpID: "warm"}); err != nil {
			t.Fatal(err)
		}
		busy := make(chan error, 1)
		go func() { busy <- c.admin.Do(ctx, "DEBUG", "SLEEP", "1").Err() }()
		waitBusy(t, c.cfg.Addr, c.cfg.Password)
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		_, err := s.Decrement(short, workloads.Request{OpID: "slow"})
		check(t, err, workloads.ClassUnknown, workloads.ReasonTimeout)
		if err := <-busy; err != nil {
			t.Fatalf("DEBUG SLEEP: %v", err)
		}
		// The request was on the wire: the server runs it after its sleep, though maybe
		// after our next read, so poll. "Unknown" was the truth; "definite" would have
		// been a lie.
		var b int64
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, err = c.Balance(ctx); err != nil || b == 3 {
				break
			}
		}
		if err != nil || b != 3 {
			t.Errorf("Balance = %d, %v; want 3: the timed-out decrement applied", b, err)
		}
	})
	t.Run("connection killed with the request in flight is unknown; the session redials", func(t *testing.T) {
		if err := c.Reset(ctx, 5); err != nil {
			t.Fatal(err)
		}
		s := newSession(t, c)
		before := s.Conn()
		// Writes are held back while paused; CLIENT KILL is not a write and runs.
		if err := c.admin.Do(ctx, "CLIENT", "PAUSE", "2000", "WRITE").Err(); err != nil {
			t.Fatal(err)
		}
		defer c.admin.ClientUnpause(ctx)
		res := make(chan error, 1)
		go func() {
			_, err := s.Decrement(ctx, workloads.Request{OpID: "cut"})
			res <- err
		}()
		waitBlocked(t, c, before, "evalsha")
		if err := c.admin.ClientKillByFilter(ctx, "ADDR", before).Err(); err != nil {
			t.Fatalf("CLIENT KILL ADDR %s: %v", before, err)
		}
		err := <-res
		check(t, err, workloads.ClassUnknown, workloads.ReasonConnClosed)
		if !errors.Is(err, io.EOF) {
			t.Errorf("err %v: want a bare io.EOF underneath, as FIELD-NOTES say a cut reply looks", err)
		}
		if err := c.admin.ClientUnpause(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := s.Decrement(ctx, workloads.Request{OpID: "after"})
		if err != nil || !got.Applied {
			t.Fatalf("Decrement after the kill = %+v, %v; want applied on a new connection", got, err)
		}
		if after := s.Conn(); after == before || after == "" {
			t.Errorf("Conn() after the kill = %q, before %q: want a new connection", after, before)
		}
		// The killed request was dropped unexecuted this time: here the truth was "not
		// applied", and the client could not tell it from the timeout case above.
		if b, err := c.Balance(ctx); err != nil || b != 4 {
			t.Errorf("Balance = %d, %v; want 4", b, err)
		}
	})
	t.Run("driver retry resends after a killed connection", func(t *testing.T) {
		// With DriverRetry go-redis resends the command on a new connection: the caller
		// sees success, and a non-idempotent command could apply twice. Shown with a
		// blocking read so the kill lands while the request is in flight.
		rc := open(t, Config{DriverRetry: true})
		s := newSession(t, rc)
		if err := rc.admin.Del(ctx, "indoubt:test:list").Err(); err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		go func() { res <- s.client.BLPop(ctx, 5*time.Second, "indoubt:test:list").Err() }()
		first := s.Conn()
		waitBlocked(t, rc, first, "blpop")
		if err := rc.admin.ClientKillByFilter(ctx, "ADDR", first).Err(); err != nil {
			t.Fatalf("CLIENT KILL: %v", err)
		}
		// go-redis resends on a new connection after its retry backoff.
		deadline := time.Now().Add(5 * time.Second)
		for s.Conn() == first && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if s.Conn() == first {
			t.Fatalf("Conn() still %s: no retry dialed a new connection", first)
		}
		waitBlocked(t, rc, s.Conn(), "blpop")
		if err := rc.admin.RPush(ctx, "indoubt:test:list", "v").Err(); err != nil {
			t.Fatal(err)
		}
		if err := <-res; err != nil {
			t.Errorf("BLPOP under DriverRetry = %v; want the retry to succeed", err)
		}
	})
}

// BenchmarkBudget is the budget workload without faults: 16 sessions, 100 attempts each,
// a budget of 1000 (so 1000 apply and 600 are rejected).
func BenchmarkBudget(b *testing.B) {
	for _, idempotent := range []bool{false, true} {
		b.Run(fmt.Sprintf("16x100 budget 1000 idempotent=%v", idempotent), func(b *testing.B) {
			storetest.BenchmarkBudget(b, open(b, Config{}), 16, 100, 1000, idempotent)
		})
	}
}

// waitBusy returns once the server at addr stops answering PING within 50 ms: it is
// running the DEBUG SLEEP the caller sent.
func waitBusy(t *testing.T, addr, password string) {
	t.Helper()
	probe := goredis.NewClient(&goredis.Options{Addr: addr, Password: password, MaxRetries: -1, ReadTimeout: 50 * time.Millisecond, DisableIdentity: true})
	defer probe.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		err := probe.Ping(context.Background()).Err()
		if workloads.NetReason(err) == workloads.ReasonTimeout {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the server never got busy")
}

// waitBlocked returns once the server lists the client at addr as blocked (flags=b) in
// cmd: its request has arrived and waits, so a kill now cuts it in flight.
func waitBlocked(t *testing.T, c *Client, addr, cmd string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		list, err := c.admin.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatalf("CLIENT LIST: %v", err)
		}
		for _, line := range strings.Split(list, "\n") {
			f := strings.Fields(line)
			if slices.Contains(f, "addr="+addr) && slices.Contains(f, "cmd="+cmd) && slices.ContainsFunc(f, func(s string) bool {
				return strings.HasPrefix(s, "flags=") && strings.Contains(s, "b")
			}) {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	list, _ := c.admin.ClientList(context.Background()).Result()
	t.Fatalf("client %s never blocked in %s: %s", addr, cmd, list)
}
