package checker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/indoubt/indoubt/histories"
)

// budgetBenchHistories caches the generated histories across benchmark runs.
var budgetBenchHistories sync.Map // budgetBenchKey -> []histories.Op

type budgetBenchKey struct {
	n     int
	reads bool
}

// budgetBenchHistory simulates n operations of 16 workers with 1% unknown, 1% failed
// and (with reads) 1% reads, against a budget of half the operations so that both
// applied and rejected decrements occur.
func budgetBenchHistory(n int, reads bool) ([]histories.Op, int64) {
	budget := int64(n / 2)
	key := budgetBenchKey{n, reads}
	if ops, ok := budgetBenchHistories.Load(key); ok {
		return ops.([]histories.Op), budget
	}
	cfg := budgetSimConfig{procs: 16, ops: n, budget: budget, infoP: 0.01, failP: 0.01, final: true}
	if reads {
		cfg.readP = 0.01
	}
	ops := budgetSimulate(rand.New(rand.NewPCG(uint64(n), 1000)), cfg)
	budgetBenchHistories.Store(key, ops)
	return ops, budget
}

func budgetBenchName(n int, reads bool) string {
	if reads {
		return fmt.Sprintf("ops=%d", n)
	}
	return fmt.Sprintf("ops=%d,reads=0", n)
}

// BenchmarkBudget measures the exact checker; ops/s counts operations (an invocation
// and its completion) checked per second.
func BenchmarkBudget(b *testing.B) {
	for _, tc := range []budgetBenchKey{{10_000, true}, {100_000, true}, {1_000_000, true}, {10_000, false}} {
		b.Run(budgetBenchName(tc.n, tc.reads), func(b *testing.B) {
			ops, budget := budgetBenchHistory(tc.n, tc.reads)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				r, err := CheckBudget(context.Background(), ops, budget)
				if err != nil || r.Verdict != Valid {
					b.Fatalf("%v %s: %s", err, r.Verdict, r.Summary)
				}
			}
			b.ReportMetric(float64(tc.n)*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// budgetPorcupineTimeout bounds one porcupine run in BenchmarkBudgetPorcupine.
const budgetPorcupineTimeout = 10 * time.Second

// BenchmarkBudgetPorcupine measures porcupine with budgetModel on the 10k histories of
// BenchmarkBudget. Reads pin the balance, so unknown decrements that porcupine
// linearized early must be moved after them by backtracking: with both, it gives up
// after budgetPorcupineTimeout and reports timeouts=1 instead of a rate.
func BenchmarkBudgetPorcupine(b *testing.B) {
	for _, reads := range []bool{true, false} {
		b.Run(budgetBenchName(10_000, reads), func(b *testing.B) {
			ops, budget := budgetBenchHistory(10_000, reads)
			pops, err := budgetOperations(ops)
			if err != nil {
				b.Fatal(err)
			}
			model := budgetModel(budget)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				switch res := porcupine.CheckOperationsTimeout(model, pops, budgetPorcupineTimeout); res {
				case porcupine.Ok:
				case porcupine.Unknown:
					b.ReportMetric(1, "timeouts")
					return
				default:
					b.Fatalf("porcupine: %s", res)
				}
			}
			b.ReportMetric(10_000*float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
