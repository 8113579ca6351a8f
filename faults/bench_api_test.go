package faults

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/indoubt/indoubt/faults/toxics"
)

// BenchmarkProxyAPI measures the proxy per request at the API layer: an HTTP/1.1 POST
// answered 201 by a net/http handler (16 workers, keep-alive connections) and a unary
// gRPC call (grpc-go's health Check, 16 workers multiplexed on one HTTP/2 connection),
// directly, through a bare relay (two io.Copy loops), through the proxy without a
// protocol (unarmed: spliced), and through the proxy with the API protocol's commit
// toxics armed at probability 0 (every request framed, its headers decoded and
// decided; none fired), in alternating rounds. The service runs in this process, so
// the CPU per call (user+sys of the process) is client, proxy and service together;
// each proxy's line gives its CPU per call against the bare relay's. Run it as (or
// scripts/bench-proxy-api)
//
//	go test -run XXX -bench ProxyAPI -benchtime 1x -v ./faults/
//
// INDOUBT_BENCH_ROUND (default 2s) and INDOUBT_BENCH_ROUNDS (default 3) set the plan.
func BenchmarkProxyAPI(b *testing.B) {
	round, rounds := benchPlan(b)
	const workers = 16

	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":1}`)
	})}
	go hs.Serve(hln)
	defer hs.Close()
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(gln)
	defer gs.Stop()

	type target struct {
		name  string
		addr  string
		proto toxics.Protocol
		round func(addr string) (int64, error)
	}
	targets := []target{
		{"HTTP/1.1", hln.Addr().String(), toxics.HTTP{}, func(addr string) (int64, error) { return httpRound(addr, workers, round) }},
		{"gRPC", gln.Addr().String(), toxics.HTTP2{}, func(addr string) (int64, error) { return grpcRound(addr, workers, round) }},
	}
	type mode struct{ name, addr string }
	modes := make([][]mode, len(targets))
	for i, tg := range targets {
		relay, err := startRelay(tg.addr)
		if err != nil {
			b.Fatal(err)
		}
		defer relay.Close()
		plain, err := Start(Options{Upstream: tg.addr})
		if err != nil {
			b.Fatal(err)
		}
		defer plain.Close()
		armed, err := Start(Options{Upstream: tg.addr, Protocol: tg.proto})
		if err != nil {
			b.Fatal(err)
		}
		defer armed.Close()
		armed.Faults().Mixed.Set(0, 0)
		modes[i] = []mode{{"direct", tg.addr}, {"bare relay", relay.Addr().String()}, {"proxy (unarmed)", plain.Addr()}, {"proxy+API toxics P=0", armed.Addr()}}
	}
	total := make([][]int64, len(targets))
	cpu := make([][]time.Duration, len(targets))
	for i := range targets {
		total[i], cpu[i] = make([]int64, 4), make([]time.Duration, 4)
	}
	var elapsed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for rd := 0; rd < rounds; rd++ {
			for t, tg := range targets {
				for m, md := range modes[t] {
					c0 := cpuTime(b, "self")
					n, err := tg.round(md.addr)
					if err != nil {
						b.Fatalf("%s %s: %v", tg.name, md.name, err)
					}
					d := cpuTime(b, "self") - c0
					total[t][m] += n
					cpu[t][m] += d
					b.Logf("round %d %-8s %-22s %8.0f calls/s  cpu/call %5.1f µs", rd+1, tg.name, md.name, float64(n)/round.Seconds(), perOp(d, n))
				}
			}
			elapsed += round
		}
	}
	b.StopTimer()
	for t, tg := range targets {
		per := func(m int) float64 { return perOp(cpu[t][m], total[t][m]) }
		for m, md := range modes[t] {
			line := fmt.Sprintf("%-8s %-22s %8.0f calls/s  ratio to direct %.3f  ratio to bare relay %.3f  cpu/call %5.1f µs",
				tg.name, md.name, float64(total[t][m])/elapsed.Seconds(), float64(total[t][m])/float64(total[t][0]),
				float64(total[t][m])/float64(total[t][1]), per(m))
			if m >= 2 {
				line += fmt.Sprintf("  cpu/call vs bare relay: %.2f", per(m)/per(1))
			}
			b.Log(line)
		}
		b.ReportMetric(float64(total[t][3])/float64(total[t][1]), strings.ReplaceAll(tg.name, "/", "")+"-armed/relay")
		b.ReportMetric(float64(total[t][2])/float64(total[t][1]), strings.ReplaceAll(tg.name, "/", "")+"-unarmed/relay")
	}
}

// httpRound runs workers goroutines POSTing for d on keep-alive connections to addr
// and returns how many calls completed.
func httpRound(addr string, workers int, d time.Duration) (int64, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: workers, DisableCompression: true}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	url := "http://" + addr + "/payments"
	call := func() error {
		resp, err := c.Post(url, "application/json", strings.NewReader(`{"amount":5}`))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	return runWorkers(workers, d, call)
}

// grpcRound runs workers goroutines calling Check for d on one client connection.
func grpcRound(addr string, workers int, d time.Duration) (int64, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	cl := healthpb.NewHealthClient(conn)
	call := func() error {
		_, err := cl.Check(context.Background(), &healthpb.HealthCheckRequest{})
		return err
	}
	return runWorkers(workers, d, call)
}

// runWorkers warms each worker with one call outside the measured time, then runs
// call from workers goroutines for d and returns how many completed.
func runWorkers(workers int, d time.Duration, call func() error) (int64, error) {
	var warm sync.WaitGroup
	for range workers {
		warm.Add(1)
		go func() { defer warm.Done(); call() }()
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
				if err := call(); err != nil {
					errs <- err
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
