package pgpay_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/examples/payments"
	"github.com/indoubt/indoubt/examples/payments/pgpay"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// BenchmarkHelperOverhead measures the idempotent payments service through the helper
// (proxy with commit-cut armed at probability 0, every charge recorded) against the same
// code on a direct connection, in alternating rounds of equal length, and reports the
// ratio of their throughputs (target: at least 0.9).
//
//	go test -run - -bench HelperOverhead -benchtime 6x ./examples/payments/pgpay/
func BenchmarkHelperOverhead(b *testing.B) {
	const workers = 4
	const round = 500 * time.Millisecond
	srv := pgtest.Postgres(b)
	ctx := context.Background()
	pool := func(dsn string) *pgxpool.Pool {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	direct, proxied := pool(srv.DirectDSN), pool(srv.DSN)
	if err := pgpay.Setup(ctx, direct, 1<<40); err != nil {
		b.Fatal(err)
	}
	srv.Arm("commit-cut:0")
	rec := indoubttest.NewRecorder(b, srv)
	var keys atomic.Int64
	run := func(svc payments.Service, record bool) int64 {
		var n atomic.Int64
		deadline := time.Now().Add(round)
		var wg sync.WaitGroup
		for range workers {
			w := rec.Worker()
			wg.Go(func() {
				for time.Now().Before(deadline) {
					if !record {
						// A key of its own, as the recorded path has: a repeated key
						// would be answered from the charge table, without a write.
						if _, err := svc.Charge(ctx, fmt.Sprintf("d-%d", keys.Add(1))); err != nil {
							b.Error(err)
							return
						}
						n.Add(1)
						continue
					}
					op := w.Invoke("decrement", nil)
					r, err := svc.Charge(payments.OnRetry(ctx, op.Retried), op.ID())
					op.Done(indoubttest.Applied(r.Balance), err)
					if err != nil {
						b.Error(err)
						return
					}
					n.Add(1)
				}
			})
		}
		wg.Wait()
		return n.Load()
	}
	var viaHelper, viaDirect int64
	for b.Loop() {
		viaDirect += run(&pgpay.Idempotent{Pool: direct}, false)
		viaHelper += run(&pgpay.Idempotent{Pool: proxied}, true)
	}
	secs := float64(b.N) * round.Seconds()
	b.ReportMetric(float64(viaDirect)/secs, "direct-charges/s")
	b.ReportMetric(float64(viaHelper)/secs, "helper-charges/s")
	b.ReportMetric(float64(viaHelper)/float64(viaDirect), "helper/direct")
}

// BenchmarkStartup measures what pgtest.Postgres costs a test once the shared server
// runs: a database of its own and a proxy (the database is dropped at the end).
//
//	go test -run - -bench Startup -benchtime 20x ./examples/payments/pgpay/
func BenchmarkStartup(b *testing.B) {
	pgtest.Postgres(b) // launches the shared server outside the measurement
	b.ResetTimer()
	for b.Loop() {
		pgtest.Postgres(b)
	}
}
