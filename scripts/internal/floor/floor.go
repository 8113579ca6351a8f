// Package floor is the measuring loop of the floor commands (scripts/pgfloor,
// scripts/respfloor, scripts/mysqlfloor): the bare client calls a benchmark of indoubt
// reads its own figure against.
package floor

import (
	"sync"
	"sync/atomic"
	"time"
)

// Run has every call of calls run in a goroutine of its own, over and over, until d
// has passed, and returns the calls completed and the time from the start to the last
// one's end. The first error stops its goroutine; Run returns it once all have ended.
func Run(calls []func() error, d time.Duration) (int64, time.Duration, error) {
	var n atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for _, call := range calls {
		wg.Go(func() {
			k := int64(0)
			for time.Now().Before(deadline) {
				if err := call(); err != nil {
					first.CompareAndSwap(nil, err)
					break
				}
				k++
			}
			n.Add(k)
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, ok := first.Load().(error); ok {
		return 0, 0, err
	}
	return n.Load(), took, nil
}
