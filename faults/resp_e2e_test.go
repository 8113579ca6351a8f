package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/indoubt/indoubt/faults/internal/faultstest"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// startProtoProxy starts a proxy with commit faults for proto in front of upstream.
func startProtoProxy(t *testing.T, upstream string, proto toxics.Protocol, seed int64) (*Proxy, *faultstest.Log) {
	t.Helper()
	log := &faultstest.Log{}
	px, err := Start(Options{Upstream: upstream, Protocol: proto, Seed: seed, Events: log.Add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px, log
}

// startRedis launches a Redis of the test's own, stopped (by pid) when the test ends.
func startRedis(t *testing.T) *redis.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := redis.Start(ctx, redis.Options{})
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop redis: %v", err)
		}
	})
	return r
}

// redisVia returns a go-redis client through addr, authenticating with password (the
// launched server's), with one connection and no retries
// of its own, and a function that returns the local address of its last dial. The
// handshake is left at go-redis's defaults (HELLO 3, CLIENT SETINFO ...), which must
// never count as a commit.
func redisVia(t *testing.T, addr, password string) (*goredis.Client, func() string) {
	t.Helper()
	var mu sync.Mutex
	var local string
	var d net.Dialer
	c := goredis.NewClient(&goredis.Options{
		Addr:     addr,
		Password: password,
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := d.DialContext(ctx, network, addr)
			if err == nil {
				mu.Lock()
				local = conn.LocalAddr().String()
				mu.Unlock()
			}
			return conn, err
		},
		MaxRetries:    -1,
		DialerRetries: 1,
		PoolSize:      1,
	})
	t.Cleanup(func() { c.Close() })
	return c, func() string {
		mu.Lock()
		defer mu.Unlock()
		return local
	}
}

// decrementScript decrements a positive balance, as the Redis adapter's budget does.
var decrementScript = goredis.NewScript(`
local b = tonumber(redis.call('GET', KEYS[1]))
if b > 0 then
  return redis.call('DECR', KEYS[1])
end
return b
`)

// cutError is the error class a client sees after a cut or a drop: the connection ended
// without a reply.
func cutError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func TestRespCommitFaultsWithGoRedis(t *testing.T) {
	r := startRedis(t)
	direct := goredis.NewClient(&goredis.Options{Addr: r.Addr, Password: r.Password})
	defer direct.Close()
	ctx := context.Background()
	get := func(key string) int {
		v, err := direct.Get(ctx, key).Int()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ops := []struct {
		name string
		do   func(c *goredis.Client, key string) error
		stmt func(key string) string
	}{
		{"Lua decrement (EVALSHA)", func(c *goredis.Client, key string) error {
			return decrementScript.Run(ctx, c, []string{key}).Err()
		}, func(key string) string { return "EVALSHA " + decrementScript.Hash() + " 1 " + key }},
		{"SET", func(c *goredis.Client, key string) error {
			v, err := c.Get(ctx, key).Int()
			if err != nil {
				return err
			}
			return c.Set(ctx, key, v-1, 0).Err()
		}, func(key string) string { return "SET " + key + " 8" }},
		{"MULTI/EXEC", func(c *goredis.Client, key string) error {
			_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
				p.Decr(ctx, key)
				return nil
			})
			return err
		}, func(string) string { return "EXEC" }},
	}
	for _, op := range ops {
		for _, fl := range commitFaults {
			t.Run(fl.kind.String()+" "+op.name, func(t *testing.T) {
				key := fmt.Sprintf("balance:%d", rand.Uint32())
				if err := direct.Set(ctx, key, 10, 0).Err(); err != nil {
					t.Fatal(err)
				}
				px, log := startProtoProxy(t, r.Addr, toxics.Resp{}, 1)
				c, local := redisVia(t, px.Addr(), r.Password)
				// Unfaulted first: the script's NOSCRIPT and EVAL happen here, so the
				// faulted call is the EVALSHA alone.
				if err := op.do(c, key); err != nil {
					t.Fatalf("unfaulted: %v", err)
				}
				fl.arm(px.Faults())
				err := op.do(c, key)
				if !cutError(err) {
					t.Fatalf("faulted: error %v (%T), want the connection's end", err, err)
				}
				e, truth := fl.aftermath(t, int64(get(key)), log.All())
				if e.Kind != fl.kind || e.Truth != truth || e.Conn != local() || e.Statement != op.stmt(key) || e.Protocol != "resp" {
					t.Errorf("event %+v, want kind %v truth %v conn %s statement %q", e, fl.kind, truth, local(), op.stmt(key))
				}
				if e.Txn == nil || !e.Txn.Wrote || e.Txn.Seq == 0 || !strings.HasSuffix(e.Txn.Text, op.stmt(key)) {
					t.Errorf("event's transaction %+v, want a numbered write ending in %q", e.Txn, op.stmt(key))
				}
			})
		}
	}
}

// A script that writes and then fails has applied its write: the error reply goes to
// the client unfaulted (neither truth could be claimed), and the cut waits for the
// next commit on the same connection.
func TestRespScriptErrorIsReleased(t *testing.T) {
	r := startRedis(t)
	direct := goredis.NewClient(&goredis.Options{Addr: r.Addr, Password: r.Password})
	defer direct.Close()
	ctx := context.Background()
	px, log := startProtoProxy(t, r.Addr, toxics.Resp{}, 1)
	c, _ := redisVia(t, px.Addr(), r.Password)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	px.Faults().Cut.Set(1, 1)
	err := c.Eval(ctx, `redis.call('SET', KEYS[1], 'written'); return redis.error_reply('INDOUBT failed after writing')`, []string{"half"}).Err()
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("script error: %v (%T), want the server's error reply", err, err)
	}
	if v, _ := direct.Get(ctx, "half").Result(); v != "written" || len(log.All()) != 0 {
		t.Fatalf("after the script error: value %q events %v; want the write applied and no fault", v, log.All())
	}
	if err := c.Incr(ctx, "after").Err(); !cutError(err) {
		t.Fatalf("next write: %v, want it cut", err)
	}
	if n, _ := direct.Get(ctx, "after").Int(); n != 1 || len(log.All()) != 1 {
		t.Fatalf("after the cut: value %d events %v", n, log.All())
	}
}

// TestRespManyCutConnections faults thousands of connections from concurrent raw RESP
// clients, checks that Redis applied exactly the cuts, that every event names a client
// that lost its connection, and that no goroutine outlives the proxy.
func TestRespManyCutConnections(t *testing.T) {
	r := startRedis(t)
	direct := goredis.NewClient(&goredis.Options{Addr: r.Addr, Password: r.Password})
	defer direct.Close()
	ctx := context.Background()
	key := fmt.Sprintf("counter:%d", rand.Uint32())
	ignore := goleak.IgnoreCurrent()
	px, log := startProtoProxy(t, r.Addr, toxics.Resp{}, 5)
	px.Faults().Mixed.Set(1, 0)
	const conns = 2000
	req := fmt.Sprintf("*2\r\n$4\r\nINCR\r\n$%d\r\n%s\r\n", len(key), key)
	lost := faultstest.CutConnections(t, conns, func(i int) (string, error) {
		// Half inline, half arrays: both frame the same.
		msg := req
		if i%2 == 1 {
			msg = "INCR " + key + "\r\n"
		}
		return rawExpectCut(px.Addr(), r.Password, msg)
	})
	applied := faultstest.CountCuts(t, log.All(), lost, conns)
	n, err := direct.Get(ctx, key).Int()
	if err != nil {
		t.Fatal(err)
	}
	if n != applied {
		t.Errorf("counter %d, the proxy says %d cuts applied", n, applied)
	}
	if err := px.Close(); err != nil {
		t.Fatal(err)
	}
	// The direct client's pool is not part of what is checked.
	goleak.VerifyNone(t, ignore, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper"))
}

// rawExpectCut authenticates with password on a new connection, sends msg and expects
// the connection to end without a reply. It returns the connection's local address.
func rawExpectCut(addr, password, msg string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "AUTH "+password+"\r\n"); err != nil {
		return "", err
	}
	if line, err := br.ReadString('\n'); err != nil || line != "+OK\r\n" {
		return "", fmt.Errorf("AUTH: %q, %v", line, err)
	}
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	line, err := br.ReadString('\n')
	if err == nil {
		return "", fmt.Errorf("got reply %q: no fault", line)
	}
	if !errors.Is(err, io.EOF) {
		return "", err
	}
	return c.LocalAddr().String(), nil
}

// TestRespGarbageNeverPanics sends random bytes through the proxy from either side: the
// client's to a real Redis, and a listener's that answers anything with random bytes.
func TestRespGarbageNeverPanics(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	checkProxyGarbage(t, proxyGarbage{
		upstream: r.Addr, proto: toxics.Resp{}, seed: 5,
		plausible: func(b []byte) {
			// A plausible start, to get past the first check.
			copy(b, "*3\r\n$3\r\n")
		},
		write: func(addr string) error {
			c, _ := redisVia(t, addr, r.Password)
			return c.Set(ctx, "after-garbage", 1, 0).Err()
		},
		stmt: "SET after-garbage 1",
	})
}

// proxyGarbage is how checkProxyGarbage drives one protocol.
type proxyGarbage struct {
	upstream string // the real server
	proto    toxics.Protocol
	seed     uint64
	// plausible makes a piece of garbage start like a message of the protocol, to get
	// past the framer's first check.
	plausible func(b []byte)
	// write runs one write through the proxy at addr, on a new connection.
	write func(addr string) error
	// stmt is a part of the write's statement in its event.
	stmt string
}

// checkProxyGarbage sends 100 connections of random bytes through a proxy with every
// commit fault armed, once to the real server and once to a listener that answers
// with random bytes. Nothing may panic and garbage makes no event: it is never a commit
// point. Then, in front of the real server, the proxy still finds a good client's write,
// drops it once as armed, with its event, and then serves it.
func checkProxyGarbage(t *testing.T, g proxyGarbage) {
	t.Helper()
	for _, upstream := range []string{g.upstream, randomServer(t)} {
		log := &faultstest.Log{}
		px, err := Start(Options{Upstream: upstream, Protocol: g.proto, Seed: 1, Events: log.Add})
		if err != nil {
			t.Fatal(err)
		}
		px.Faults().Mixed.Set(1, 0)
		rng := rand.New(rand.NewPCG(g.seed, g.seed))
		for i := 0; i < 100; i++ {
			b := randomBytes(rng, 2048)
			if i%3 == 0 && len(b) > 16 {
				g.plausible(b)
			}
			sendGarbage(t, px.Addr(), b)
		}
		if evs := log.All(); len(evs) != 0 {
			t.Fatalf("garbage made events: %+v", evs)
		}
		if upstream == g.upstream {
			px.Faults().Mixed.Disarm()
			px.Faults().Drop.Set(1, 1)
			if err := g.write(px.Addr()); err == nil {
				t.Fatalf("after garbage: a write armed to drop succeeded")
			}
			if evs := log.All(); len(evs) != 1 || evs[0].Kind != toxics.CommitDrop || !strings.Contains(evs[0].Statement, g.stmt) {
				t.Fatalf("after garbage: events %+v, want the write %q dropped", evs, g.stmt)
			}
			if err := g.write(px.Addr()); err != nil {
				t.Fatalf("after garbage: %v", err)
			}
		}
		px.Close()
	}
}

// randomServer listens on loopback and answers every connection with random bytes,
// until the test ends.
func randomServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for i := uint64(0); ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn, rng *rand.Rand) {
				defer c.Close()
				c.SetDeadline(time.Now().Add(2 * time.Second))
				c.Write(randomBytes(rng, 4096))
				io.Copy(io.Discard, c)
			}(c, rand.New(rand.NewPCG(i, 1)))
		}
	}()
	return ln.Addr().String()
}

func randomBytes(rng *rand.Rand, max int) []byte {
	b := make([]byte, 1+rng.IntN(max))
	for i := range b {
		b[i] = byte(rng.IntN(256))
	}
	return b
}

// sendGarbage writes b through the proxy, half-closes, and reads until the end.
func sendGarbage(t *testing.T, addr string, b []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write(b)
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c)
}

// TestRespSameSeedSameDecisions runs the same connections twice per seed against fresh
// proxies and compares which faults fired.
func TestRespSameSeedSameDecisions(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	run := func(seed int64) string {
		px, log := startProtoProxy(t, r.Addr, toxics.Resp{}, seed)
		px.Faults().Mixed.Set(0.3, 0)
		client := map[string]int{}
		var out []string
		for conn := 0; conn < 6; conn++ {
			c, local := redisVia(t, px.Addr(), r.Password)
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			client[local()] = conn
			for i := 0; i < 8; i++ {
				if err := c.Incr(ctx, "seeded:"+strconv.FormatInt(seed, 10)).Err(); err != nil {
					out = append(out, fmt.Sprintf("conn %d op %d: error", conn, i))
					break
				}
			}
			c.Close()
		}
		for _, e := range log.All() {
			out = append(out, fmt.Sprintf("conn %d: %v", client[e.Conn], e.Kind))
		}
		return fmt.Sprint(out)
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Fatalf("seed 7 twice:\n%s\n%s", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same run: %s", a)
	}
}

// With every commit point dropped from the first byte on, go-redis's handshake (HELLO 3,
// CLIENT SETINFO ...), PING and reads go through; the first write, the adapter's
// EVALSHA, is the one dropped.
func TestRespDefaultPointsSkipHandshakeAndReads(t *testing.T) {
	r := startRedis(t)
	ctx := context.Background()
	px, log := startProtoProxy(t, r.Addr, toxics.Resp{}, 1)
	px.Faults().Drop.Set(1, 0)
	c, _ := redisVia(t, px.Addr(), r.Password)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if err := c.Get(ctx, "absent").Err(); !errors.Is(err, goredis.Nil) {
		t.Fatalf("get: %v", err)
	}
	if err := c.MGet(ctx, "a", "b").Err(); err != nil {
		t.Fatalf("mget: %v", err)
	}
	if n := len(log.All()); n != 0 {
		t.Fatalf("%d faults before the first write: %+v", n, log.All())
	}
	if err := decrementScript.Run(ctx, c, []string{"absent"}).Err(); !cutError(err) {
		t.Fatalf("script: %v, want it dropped", err)
	}
	if evs := log.All(); len(evs) != 1 || !strings.HasPrefix(evs[0].Statement, "EVALSHA ") {
		t.Fatalf("events %+v, want the EVALSHA dropped", evs)
	}
}
