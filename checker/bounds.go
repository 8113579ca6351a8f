package checker

import (
	"context"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

// A search checker (linearizability, and any other that may need time or memory
// exponential in the history's concurrency) runs within bounds: its context, a time
// limit (Options.Timeout) and a memory bound (Options.MaxMemory). Whichever runs out
// first stops it within moments, and the verdict is Unknown with a summary that says
// which did: a check that could not finish proves nothing either way.
//
// The memory bound is on the live Go heap of the whole process, as the garbage
// collector last measured it, sampled every few milliseconds while the check runs: the
// history the check holds counts against it as much as the search's own state. It
// trips at three quarters of MaxMemory, so that the search stops before the heap reaches
// the bound; a caller that wants the process's memory to follow the bound closely
// also sets runtime/debug.SetMemoryLimit to it (indoubt check does), so that garbage
// is collected before the heap grows past it.

// bound names what stopped a search.
type bound int32

const (
	boundNone    bound = iota
	boundContext       // ctx ended
	boundTime          // Options.Timeout
	boundMemory        // Options.MaxMemory
)

// searchBounds stops a search when ctx ends, its time runs out or the heap outgrows
// its memory bound. A search looks at stopped() as often as it can afford (an atomic
// load); the first bound to run out is the one reported.
type searchBounds struct {
	stop      atomic.Bool
	why       atomic.Int32
	timeout   time.Duration
	maxMemory int64
	release   func()
	once      sync.Once
}

// memorySample is how often the memory bound is looked at.
const memorySample = 5 * time.Millisecond

// newSearchBounds starts watching ctx, timeout (0: none) and maxMemory (bytes; 0:
// none). close stops the watching; a search that ends calls it.
func newSearchBounds(ctx context.Context, timeout time.Duration, maxMemory int64) *searchBounds {
	b := &searchBounds{timeout: timeout, maxMemory: maxMemory}
	stopCtx := context.AfterFunc(ctx, func() { b.trip(boundContext) })
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { b.trip(boundTime) })
	}
	done := make(chan struct{})
	if maxMemory > 0 {
		go b.watchMemory(done)
	}
	b.release = func() {
		stopCtx()
		if timer != nil {
			timer.Stop()
		}
		close(done)
	}
	if ctx.Err() != nil {
		b.trip(boundContext)
	}
	return b
}

// close stops watching; the bounds keep whatever they recorded.
func (b *searchBounds) close() { b.once.Do(b.release) }

func (b *searchBounds) trip(why bound) {
	if b.why.CompareAndSwap(int32(boundNone), int32(why)) {
		b.stop.Store(true)
	}
}

// stopped reports whether a bound has run out.
func (b *searchBounds) stopped() bool { return b.stop.Load() }

// reason is the bound that ran out, boundNone while none has.
func (b *searchBounds) reason() bound { return bound(b.why.Load()) }

// watchMemory trips the memory bound once the live heap reaches three quarters of it.
func (b *searchBounds) watchMemory(done <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	limit := uint64(b.maxMemory) / 4 * 3
	t := time.NewTicker(memorySample)
	defer t.Stop()
	for {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 && sample[0].Value.Uint64() >= limit {
			b.trip(boundMemory)
			return
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// ranOut says which bound ran out, for a summary: "the 20s timeout expired", "the
// 2.0 GiB memory bound ran out", "the check was interrupted".
func (b *searchBounds) ranOut() string {
	switch b.reason() {
	case boundTime:
		return fmt.Sprintf("the %v timeout expired", b.timeout)
	case boundMemory:
		return fmt.Sprintf("the %s memory bound ran out", formatBytes(b.maxMemory))
	case boundContext:
		return "the check was interrupted"
	}
	return "no bound ran out"
}

// boundName names the bound that ran out in a Result's details: "time", "memory",
// "interrupted", or "" while none has.
func (b *searchBounds) boundName() string {
	switch b.reason() {
	case boundTime:
		return "time"
	case boundMemory:
		return "memory"
	case boundContext:
		return "interrupted"
	}
	return ""
}

// formatBytes writes n bytes for a sentence: 512 MiB, 2.0 GiB.
func formatBytes(n int64) string {
	const k = 1024
	switch {
	case n >= k*k*k*k:
		return fmt.Sprintf("%.1f TiB", float64(n)/(k*k*k*k))
	case n >= k*k*k:
		return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
	case n >= k*k:
		return fmt.Sprintf("%d MiB", n/(k*k))
	case n >= k:
		return fmt.Sprintf("%d KiB", n/k)
	}
	return fmt.Sprintf("%d bytes", n)
}
