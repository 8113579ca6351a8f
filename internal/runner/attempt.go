package runner

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/workloads"
)

// ending is how the retry policy ended a logical operation that did not succeed.
type ending uint8

const (
	exhausted    ending = 1 + iota // every allowed attempt hit a retryable error
	nonRetryable                   // the policy does not retry the last error
	cutByEnd                       // the run's deadline or its interruption stopped the retries
)

// recorded is how the completion records an ending the retry policy decided
// (histories.Op.Ended): deadline says whether the run's deadline, rather than its
// interruption, stopped the retries.
func (e ending) recorded(deadline bool) string {
	switch {
	case e == exhausted:
		return histories.EndedExhausted
	case e == nonRetryable:
		return histories.EndedNotRetryable
	case e == cutByEnd && deadline:
		return histories.EndedDeadline
	case e == cutByEnd:
		return histories.EndedInterrupted
	}
	return ""
}

// retried is what the retry loop saw of one operation beyond its attempts: the
// completion records it (histories.Op.Ended, Conflicts).
type retried struct {
	// deadline is set when the run's deadline stopped the retries.
	deadline  bool
	conflicts int
}

// operation is one logical operation the retry loop runs: its call, its op id, the
// process that invoked it and the history index of the invocation.
type operation struct {
	call    workloads.Call
	id      string
	process int
	invoke  int64 // the invocation's index in the history
	at      int64 // the invocation's time in the history
}

// retrier runs one worker's operations under the run's retry policy. It keeps the
// worker's random source (backoff) and the run's deadline.
type retrier struct {
	r   *run
	w   workloads.Worker
	rng *rand.Rand
	end *runEnd
	// refused counts the attempts in a row that could not open a connection: the
	// server is down. It paces the worker (pace) and resets on any other outcome.
	refused int
}

// do runs op's attempts until one succeeds or the policy, the deadline or ctx stops it,
// and returns the completion: its attempts, how it ended and the conflicts its store
// resolved, from which the run's figures are counted (judge.Figures).
func (t *retrier) do(ctx context.Context, op operation) histories.Op {
	pol := t.r.cfg.Retry
	req := workloads.Request{OpID: op.id, Idempotent: pol.Idempotent()}
	var rt retried
	var failed []histories.FailedAttempt
	maybeApplied := false
	for n := 1; ; n++ {
		// The first attempt starts at the invocation: its time saves a clock read.
		from := op.at
		if n > 1 {
			from = t.r.now()
		}
		reply, err := t.w.Do(ctx, op.call, req)
		t.noteDial(err)
		conn := t.w.Conn()
		rt.conflicts += reply.Conflicts
		if err == nil {
			typ, ended := histories.OK, ""
			if reply.Failed {
				typ, ended = histories.Fail, histories.EndedNoEffect
			}
			return histories.Op{Type: typ, Value: histories.Value(reply.Value), Conn: conn, Attempt: n, Failed: failed, Ended: ended, Conflicts: rt.conflicts}
		}
		class := workloads.Classify(err)
		if class == workloads.ClassUnknown {
			maybeApplied = true
		}
		errText := t.r.scrub.text(err.Error())
		failed = append(failed, histories.FailedAttempt{Conn: conn, Start: from, End: t.r.now(), Error: errText, Class: class.String(), Reason: string(workloads.ReasonOf(err))})
		if end, stop := t.stop(ctx, class, n, &rt); stop {
			typ := histories.Fail
			if maybeApplied {
				// An earlier attempt may have applied: the truth is unknown, whatever
				// the last attempt said.
				typ = histories.Info
			}
			return histories.Op{Type: typ, Error: errText, Conn: conn, Attempt: n, Failed: failed, Ended: end.recorded(rt.deadline), Conflicts: rt.conflicts}
		}
	}
}

// stop decides, after attempt n failed with class, whether the loop ends, and how; when
// it does not, it has waited out the backoff before the next attempt.
func (t *retrier) stop(ctx context.Context, class workloads.Class, n int, rt *retried) (ending, bool) {
	pol := t.r.cfg.Retry
	switch {
	case !pol.retries(class):
		return nonRetryable, true
	case n >= pol.MaxAttempts:
		return exhausted, true
	case ctx.Err() != nil:
		return cutByEnd, true
	}
	if t.end.past(time.Now()) {
		rt.deadline = true
		return cutByEnd, true
	}
	pause := max(pol.backoff(n, t.rng), t.dialBackoff())
	if t.end.past(time.Now().Add(pause)) {
		rt.deadline = true
		return cutByEnd, true
	}
	if !sleep(ctx, pause) {
		return cutByEnd, true
	}
	return 0, false
}

// sleep waits d, or less when ctx ends first; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// Dial backoff: while the server is down (killed, or not started again yet) a dial is
// refused at once, so a worker would spin through failed operations, or a pool through
// refused connects, as fast as the CPU allows. After a refused dial the worker waits
// before its next attempt or operation, full jitter over a window that doubles from
// dialBackoffBase to dialBackoffMax with each refusal in a row. Only refused dials start
// it, so nothing changes while the server accepts connections; the cap bounds how long
// after the server is back a worker can still be waiting (with full jitter the first of
// several workers is back much sooner).
const (
	dialBackoffBase = 2 * time.Millisecond
	dialBackoffMax  = 200 * time.Millisecond
)

// noteDial counts err toward the refused dials in a row, or resets them.
func (t *retrier) noteDial(err error) {
	if err != nil && workloads.ReasonOf(err) == workloads.ReasonDial {
		t.refused++
		return
	}
	t.refused = 0
}

// dialBackoff is the pause after t.refused refused dials in a row; 0 after none.
func (t *retrier) dialBackoff() time.Duration {
	if t.refused == 0 {
		return 0
	}
	w := dialBackoffBase
	for i := 1; i < t.refused && w < dialBackoffMax; i++ {
		w *= 2
	}
	w = min(w, dialBackoffMax)
	return time.Duration(t.rng.Int64N(int64(w) + 1))
}

// pace waits out the dial backoff before the worker's next operation. It reports false
// when ctx ended or the run's deadline passed first: the worker stops.
func (t *retrier) pace(ctx context.Context) bool {
	pause := t.dialBackoff()
	if pause == 0 {
		return true
	}
	return sleep(ctx, pause) && !t.end.past(time.Now())
}
