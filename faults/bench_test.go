package faults

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/faults/toxics"
)

// BenchmarkProxyOverhead measures the throughput of 16 workers running the budget
// workload's autocommit conditional UPDATE on one hot row, directly, through the proxy
// without commit toxics, and through the proxy with them installed at probability 0,
// in alternating rounds so that drift of the machine hits all three alike. It reports
// the ratios to direct. One iteration does all rounds; run it as
//
//	go test -run XXX -bench ProxyOverhead -benchtime 1x -v ./faults/
//
// INDOUBT_BENCH_ROUND (default 2s) and INDOUBT_BENCH_ROUNDS (default 3) set the plan.
func BenchmarkProxyOverhead(b *testing.B) {
	srv := pg.Get(b)
	round, rounds := benchPlan(b)
	ctx := context.Background()
	direct, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, "drop table if exists bench_account; create table bench_account (id int primary key, balance bigint not null); insert into bench_account values (1, 1000000000000)"); err != nil {
		b.Fatal(err)
	}

	plain, err := Start(Options{Upstream: srv.Addr})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	armed, err := Start(Options{Upstream: srv.Addr, Protocol: toxics.Postgres{}})
	if err != nil {
		b.Fatal(err)
	}
	defer armed.Close()
	armed.Faults().Mixed.Set(0, 0)

	modes := []struct {
		name string
		addr string
	}{
		{"direct", srv.Addr},
		{"proxy", plain.Addr()},
		{"proxy+commit toxics P=0", armed.Addr()},
	}
	const workers = 16
	total := make([]int64, len(modes))
	var elapsed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for m, mode := range modes {
				n, err := hotRowRound(ctx, dsnVia(b, srv, mode.addr), workers, round)
				if err != nil {
					b.Fatalf("%s: %v", mode.name, err)
				}
				total[m] += n
				b.Logf("round %d %-24s %8.0f updates/s", r+1, mode.name, float64(n)/round.Seconds())
			}
			elapsed += round
		}
	}
	b.StopTimer()
	for m, mode := range modes {
		tps := float64(total[m]) / elapsed.Seconds()
		b.Logf("%-24s %8.0f updates/s  ratio to direct %.3f", mode.name, tps, float64(total[m])/float64(total[0]))
	}
	b.ReportMetric(float64(total[0])/elapsed.Seconds(), "direct-updates/s")
	b.ReportMetric(float64(total[1])/float64(total[0]), "proxy/direct")
	b.ReportMetric(float64(total[2])/float64(total[0]), "armed/direct")
}

// benchPlan reads INDOUBT_BENCH_ROUND (default 2s) and INDOUBT_BENCH_ROUNDS (default 3).
func benchPlan(b *testing.B) (time.Duration, int) {
	round := 2 * time.Second
	if v := os.Getenv("INDOUBT_BENCH_ROUND"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("INDOUBT_BENCH_ROUND: %v", err)
		}
		round = d
	}
	rounds := 3
	if v := os.Getenv("INDOUBT_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("INDOUBT_BENCH_ROUNDS %q: want a positive number", v)
		}
		rounds = n
	}
	return round, rounds
}

// hotRowRound runs workers connections, each repeating the conditional decrement for d,
// and returns the number of updates that completed.
func hotRowRound(ctx context.Context, dsn string, workers int, d time.Duration) (int64, error) {
	conns := make([]*pgx.Conn, workers)
	for i := range conns {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return 0, err
		}
		defer c.Close(ctx)
		// Prepare outside the measured time.
		if _, err := c.Exec(ctx, "UPDATE bench_account SET balance = balance - 1 WHERE id = 1 AND balance > 0"); err != nil {
			return 0, err
		}
		conns[i] = c
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	deadline := time.Now().Add(d)
	for _, c := range conns {
		wg.Add(1)
		go func(c *pgx.Conn) {
			defer wg.Done()
			for time.Now().Before(deadline) {
				if _, err := c.Exec(ctx, "UPDATE bench_account SET balance = balance - 1 WHERE id = 1 AND balance > 0"); err != nil {
					errs <- fmt.Errorf("update: %w", err)
					return
				}
				n.Add(1)
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return n.Load(), nil
}
