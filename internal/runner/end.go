package runner

import (
	"sync"
	"sync/atomic"
	"time"
)

// RecoveryWait is how long past --time a timed run goes on, at most, waiting to see
// the server it faulted answer again (see runEnd), unless Config.RecoveryWait says.
const RecoveryWait = time.Minute

// runEnd decides when a timed run's workers stop. At the deadline, unless a process
// fault has not been seen to end: one still being applied (a restart that takes its
// time), or one that ended with no operation acknowledged since. Then the workers go
// on until an operation is acknowledged after the last fault ended, or until wait past
// the deadline. A run that measures a fault should see the server come back: on a
// loaded machine a JVM's start alone can take longer than the run was given, and a
// run cut off before the first acknowledgement after the fault says nothing of the
// recovery it set out to measure. The history shows when the workers really stopped.
type runEnd struct {
	deadline time.Time // zero: the run ends by its operation counts
	wait     time.Duration

	// pending is set while a process fault has not been seen to end; the workers
	// read it on every operation, without the lock.
	pending atomic.Bool
	mu      sync.Mutex
	running int       // process faults being applied
	ended   time.Time // when the last one ended: the server answered again
}

func newRunEnd(start time.Time, d, wait time.Duration) *runEnd {
	e := &runEnd{wait: wait}
	if d > 0 {
		e.deadline = start.Add(d)
	}
	return e
}

// past reports whether a worker that is about to start something at now must stop.
func (e *runEnd) past(now time.Time) bool {
	if e.deadline.IsZero() || !now.After(e.deadline) {
		return false
	}
	return !e.pending.Load() || now.After(e.deadline.Add(e.wait))
}

// timed reports whether the run has a deadline.
func (e *runEnd) timed() bool { return !e.deadline.IsZero() }

// faultBegins records that a process fault is being applied.
func (e *runEnd) faultBegins() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running++
	e.pending.Store(true)
}

// faultEnds records that a process fault ended at: the server answered again.
func (e *runEnd) faultEnds(at time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running--
	e.ended = at
}

// acked records an operation acknowledged at at: the end of a fault before it has
// been seen.
func (e *runEnd) acked(at time.Time) {
	if !e.pending.Load() {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running == 0 && at.After(e.ended) {
		e.pending.Store(false)
	}
}
