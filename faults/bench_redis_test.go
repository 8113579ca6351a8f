package faults

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// BenchmarkProxyRedis measures the proxy where it costs most: Redis GET and the budget's
// EVALSHA, answered from memory with no fsync, so that the client, the proxy and the
// server are all bound by CPU. 16 workers run each command directly, through a bare
// relay (two io.Copy loops: the floor for any proxy in user space), through the proxy
// without a protocol and no toxic (unarmed: the direct path, spliced), through the
// proxy with the RESP commit toxics armed at probability 0 (armed: every request framed
// and decided, none fired, on the direct path), and through that proxy with a latency
// toxic of 0 ms (toxiproxy's links, which any standard toxic puts connections on), in
// alternating rounds. Since the client, the proxy and the server share the machine's
// cores, it reports the CPU time (user+sys) per call of this process (the client, plus
// the proxy when there is one) and of the Redis server, steadier than throughput on a
// busy machine, and for each proxy the ratios of its CPU per call to the bare relay's:
// whole (client+proxy) and its cost alone (over direct). One iteration does all rounds;
// run it as (or scripts/bench-proxy)
//
//	go test -run XXX -bench ProxyRedis -benchtime 1x -v -cpuprofile cpu.out ./faults/
//
// INDOUBT_BENCH_ROUND (default 2s) and INDOUBT_BENCH_ROUNDS (default 3) set the plan.
func BenchmarkProxyRedis(b *testing.B) {
	round, rounds := benchPlan(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	r, err := redis.Start(ctx, redis.Options{})
	cancel()
	servertest.SkipOrFail(b, err)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Stop()
	plain, err := Start(Options{Upstream: r.Addr})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	armed, err := Start(Options{Upstream: r.Addr, Protocol: toxics.Resp{}})
	if err != nil {
		b.Fatal(err)
	}
	defer armed.Close()
	armed.Faults().Mixed.Set(0, 0)
	linked, err := Start(Options{Upstream: r.Addr, Protocol: toxics.Resp{}})
	if err != nil {
		b.Fatal(err)
	}
	defer linked.Close()
	linked.Faults().Mixed.Set(0, 0)
	if err := linked.AddToxic(Toxic{Name: "links", Type: "latency", Attributes: map[string]int64{"latency": 0}}); err != nil {
		b.Fatal(err)
	}
	relay, err := startRelay(r.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer relay.Close()

	const workers = 16
	bg := context.Background()
	setup := goredis.NewClient(&goredis.Options{Addr: r.Addr, Password: r.Password})
	defer setup.Close()
	if err := setup.Set(bg, "bench-balance", int64(1)<<60, 0).Err(); err != nil {
		b.Fatal(err)
	}
	if err := decrementScript.Load(bg, setup).Err(); err != nil {
		b.Fatal(err)
	}
	commands := []struct {
		name string
		do   func(c *goredis.Client) error
	}{
		{"GET", func(c *goredis.Client) error { return c.Get(bg, "bench-balance").Err() }},
		{"EVALSHA", func(c *goredis.Client) error {
			return c.EvalSha(bg, decrementScript.Hash(), []string{"bench-balance"}).Err()
		}},
	}
	modes := []struct{ name, addr string }{
		{"direct", r.Addr},
		{"bare relay", relay.Addr().String()},
		{"proxy (unarmed)", plain.Addr()},
		{"proxy+commit toxics P=0", armed.Addr()},
		{"the same on toxiproxy links", linked.Addr()},
	}
	total := make([][]int64, len(commands))
	self, server := make([][]time.Duration, len(commands)), make([][]time.Duration, len(commands))
	for c := range total {
		total[c] = make([]int64, len(modes))
		self[c], server[c] = make([]time.Duration, len(modes)), make([]time.Duration, len(modes))
	}
	var elapsed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for rd := 0; rd < rounds; rd++ {
			for c, cmd := range commands {
				for m, mode := range modes {
					self0, srv0 := cpuTime(b, "self"), cpuTime(b, strconv.Itoa(r.Pid()))
					n, err := redisRound(mode.addr, r.Password, workers, round, cmd.do)
					if err != nil {
						b.Fatalf("%s %s: %v", cmd.name, mode.name, err)
					}
					dSelf, dSrv := cpuTime(b, "self")-self0, cpuTime(b, strconv.Itoa(r.Pid()))-srv0
					total[c][m] += n
					self[c][m] += dSelf
					server[c][m] += dSrv
					b.Logf("round %d %-8s %-24s %8.0f ops/s  cpu/op: client+proxy %5.1f µs, server %5.1f µs",
						rd+1, cmd.name, mode.name, float64(n)/round.Seconds(), perOp(dSelf, n), perOp(dSrv, n))
				}
			}
			elapsed += round
		}
	}
	b.StopTimer()
	for c, cmd := range commands {
		cpu := func(m int) float64 { return perOp(self[c][m], total[c][m]) }
		for m, mode := range modes {
			line := fmt.Sprintf("%-8s %-28s %8.0f ops/s  ratio to direct %.3f  cpu/op: client+proxy %5.1f µs, server %5.1f µs", cmd.name, mode.name,
				float64(total[c][m])/elapsed.Seconds(), float64(total[c][m])/float64(total[c][0]),
				cpu(m), perOp(server[c][m], total[c][m]))
			if m >= 2 {
				line += fmt.Sprintf("  cpu/op vs bare relay: %.2f (its cost alone: %.2f)", cpu(m)/cpu(1), (cpu(m)-cpu(0))/(cpu(1)-cpu(0)))
			}
			b.Log(line)
		}
		b.ReportMetric(float64(total[c][1])/float64(total[c][0]), cmd.name+"-relay/direct")
		b.ReportMetric(float64(total[c][2])/float64(total[c][0]), cmd.name+"-unarmed/direct")
		b.ReportMetric(float64(total[c][3])/float64(total[c][0]), cmd.name+"-armed/direct")
		b.ReportMetric(cpu(2)/cpu(1), cmd.name+"-unarmed-cpu/relay-cpu")
		b.ReportMetric(cpu(3)/cpu(1), cmd.name+"-armed-cpu/relay-cpu")
		b.ReportMetric(cpu(4)/cpu(1), cmd.name+"-links-cpu/relay-cpu")
	}
}

// startRelay listens on a loopback port and relays every connection to upstream with
// two io.Copy loops and nothing else (on Linux, io.Copy between TCP connections
// splices): the least any proxy in user space can cost, the floor the proxy's ratios
// are read against.
func startRelay(upstream string) (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				down.Close()
				continue
			}
			go func() { io.Copy(up, down); up.Close() }()
			go func() { io.Copy(down, up); down.Close() }()
		}
	}()
	return ln, nil
}

// redisRound runs workers goroutines on a client with as many connections, each
// repeating do for d, and returns how many calls completed.
func redisRound(addr, password string, workers int, d time.Duration, do func(*goredis.Client) error) (int64, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: password, PoolSize: workers, MinIdleConns: workers, MaxRetries: -1})
	defer c.Close()
	// Connect every worker's connection outside the measured time.
	var warm sync.WaitGroup
	for range workers {
		warm.Add(1)
		go func() { defer warm.Done(); do(c) }()
	}
	warm.Wait()
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	deadline := time.Now().Add(d)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := int64(0)
			for time.Now().Before(deadline) {
				if err := do(c); err != nil {
					errs <- fmt.Errorf("call: %w", err)
					return
				}
				k++
			}
			n.Add(k)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return n.Load(), nil
}

// cpuTime returns the user+sys CPU time a process has used so far, from
// /proc/PID/stat (pid "self" for this one), in clock ticks of 10 ms (USER_HZ is 100 on
// Linux): rounds of seconds make that fine enough.
func cpuTime(b *testing.B, pid string) time.Duration {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		b.Fatalf("cpu time: %v", err)
	}
	// The fields after the command name, which is in parentheses and may hold spaces:
	// state is the first, utime and stime the 12th and 13th.
	i := bytes.LastIndexByte(raw, ')')
	f := strings.Fields(string(raw[i+1:]))
	if i < 0 || len(f) < 13 {
		b.Fatalf("cpu time: cannot read /proc/%s/stat", pid)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatalf("cpu time: /proc/%s/stat: %v", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// perOp is d per call in microseconds.
func perOp(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}
