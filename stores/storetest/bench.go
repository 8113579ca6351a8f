package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

// BenchmarkBudget measures a store's decrement throughput without faults: workers
// sessions (opened once, outside the timing) each make attempts decrements against a
// budget of amount, b.N times, with a Reset before each round (not timed). It reports
// attempts/s (applied and rejected alike) and applied/s. Any error fails the benchmark.
func BenchmarkBudget(b *testing.B, s budget.Store, workers, attempts int, amount int64, idempotent bool) {
	ctx := context.Background()
	sessions := make([]budget.Session, workers)
	for i := range sessions {
		sess, err := s.Session(ctx)
		if err != nil {
			b.Fatalf("Session: %v", err)
		}
		defer sess.Close()
		sessions[i] = sess
	}
	var elapsed time.Duration
	var applied int64
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		b.StopTimer()
		if err := s.Reset(ctx, amount); err != nil {
			b.Fatalf("Reset: %v", err)
		}
		b.StartTimer()
		t0 := time.Now()
		counts := make([]int64, workers)
		errs := race(workers, func(w int) error {
			for i := 0; i < attempts; i++ {
				req := workloads.Request{OpID: fmt.Sprintf("%d-%d-%d", n, w, i), Idempotent: idempotent}
				o, err := sessions[w].Decrement(ctx, req)
				if err != nil {
					return err
				}
				if o.Applied {
					counts[w]++
				}
			}
			return nil
		})
		elapsed += time.Since(t0)
		for w := range sessions {
			if errs[w] != nil {
				b.Fatalf("worker %d: %v", w, errs[w])
			}
			applied += counts[w]
		}
	}
	b.StopTimer()
	total := float64(b.N * workers * attempts)
	b.ReportMetric(total/elapsed.Seconds(), "attempts/s")
	b.ReportMetric(float64(applied)/elapsed.Seconds(), "applied/s")
}
