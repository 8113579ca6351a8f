package checker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/metrics"

	"github.com/indoubt/indoubt/histories"
)

// The transactional checkers hold every transaction of the history, and a search of
// each strongly connected component: Options.MaxMemory bounds them as it bounds the
// register search, the heap watched as searchBounds watches it, and the verdict is
// Unknown naming the bound when it runs out.

// errMemoryBound is the cause of a transactional check's context ended by
// Options.MaxMemory.
type errMemoryBound struct{ max int64 }

func (e errMemoryBound) Error() string {
	return fmt.Sprintf("the %s memory bound ran out", formatBytes(e.max))
}

// memoryContext is ctx, also ended, with errMemoryBound as its cause, once the live
// heap reaches three quarters of max (0: no bound). stop ends the watching.
func memoryContext(ctx context.Context, max int64) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if max <= 0 {
		return ctx, func() { cancel(nil) }
	}
	if heapLive() >= uint64(max)/4*3 {
		// Already over: said now, not left to the watcher's first look.
		cancel(errMemoryBound{max})
		return ctx, func() {}
	}
	b := &searchBounds{maxMemory: max}
	done := make(chan struct{})
	go func() {
		b.watchMemory(done)
		if b.reason() == boundMemory {
			cancel(errMemoryBound{max})
		}
	}()
	return ctx, func() {
		close(done)
		cancel(nil)
	}
}

// txnInterrupted is the result of a transactional check that ctx ended: Unknown,
// naming the memory bound when it is what ended it.
func txnInterrupted(model string, ctx context.Context) Result {
	var mem errMemoryBound
	if errors.As(context.Cause(ctx), &mem) {
		return Result{Verdict: Unknown, Checker: model, Anomalies: []Anomaly{}, Details: map[string]json.RawMessage{"bound": histories.Value("memory")},
			Summary: fmt.Sprintf("%s before the history could be decided: nothing was decided", mem)}
	}
	return interrupted(model, ctx.Err())
}

// heapLive is the live heap as the garbage collector last measured it.
func heapLive() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}
