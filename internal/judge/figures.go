package judge

import (
	"math"
	"slices"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// The reason words of the figures of a recorded history, for an attempt that ended in
// an error: its reason as the recorder wrote it (indoubt run's: dial, timeout,
// conflict, ...), else its class (definite, conflict, unknown), else these.
const (
	// ReasonUnclassified: the failed attempt is listed without a class.
	ReasonUnclassified = "unclassified"
	// ReasonUnrecorded: the completion counts more attempts than it lists, or none
	// failed that it names.
	ReasonUnrecorded = "unrecorded"
)

// Figures fills res's figures from a history as it was recorded, by indoubt run or by
// a program (indoubt exec, the test helper): the outcomes and attempts, the retries by
// reason and outcome, the errors by reason, the conflicts, the latency, the
// completions per second and throughput, and workers, the most operations in flight
// at once. elapsed is the run's length; 0 takes the last completion's time. Final
// reads are counted in ops (the judge's) only.
//
// An operation never completed is of unknown outcome (outcomes.unknown), as a
// completion of type info is. A failed operation ended as its completion says
// (histories.Op.Ended: exhausted; not retryable or of no effect; stopped by the
// run's deadline or its interruption); when it does not say, after more than one
// attempt it exhausted its retries, after one it was not retryable. Retries of an
// operation the deadline stopped count under retries.by_outcome.deadline. A retry's
// reason, and an error's, is the reason of the failed attempt the completion lists for
// it (failed_attempts), else its class, ReasonUnclassified when it has neither,
// ReasonUnrecorded when the completion does not list it (histories.EndedNoEffect when
// the attempt was answered that the operation did nothing). Conflicts are the
// completions' conflicts summed.
func Figures(res *results.Results, ops []histories.Op, elapsed time.Duration) {
	res.Errors, res.Retries = map[string]int64{}, results.RetryCounts{ByReason: map[string]int64{}}
	res.Outcomes, res.PerSecond, res.Conflicts = results.Outcomes{}, []int64{}, 0
	all, _ := histories.Pair(ops) // the checker paired them already
	var lat []time.Duration
	type edge struct {
		t     int64
		delta int
	}
	var edges []edge
	var end, completed int64
	for _, o := range all {
		inv, c := o.Invoke, o.Complete
		if histories.IsFinalReadID(inv.OpID) {
			continue
		}
		if c == nil {
			res.Outcomes.Unknown.Ops++
			res.Outcomes.Unknown.Attempts++
			edges = append(edges, edge{inv.Time, 1})
			continue
		}
		completed++
		end = max(end, c.Time)
		attempts := int64(c.Attempt)
		if attempts <= 0 {
			attempts = int64(len(c.Failed))
			if c.Type == histories.OK || attempts == 0 {
				attempts++
			}
		}
		retries := attempts - 1
		res.Conflicts += int64(c.Conflicts)
		var oc *results.OutcomeCount
		by := &res.Retries.ByOutcome.Info
		switch c.Type {
		case histories.OK:
			oc, by = &res.Outcomes.Succeeded, &res.Retries.ByOutcome.OK
		case histories.Fail:
			oc, by = failedOutcome(&res.Outcomes, c.Ended, attempts), &res.Retries.ByOutcome.Fail
		default:
			oc = &res.Outcomes.Unknown
		}
		if c.Ended == histories.EndedDeadline {
			// The deadline, not the outcome, is what stopped the retries.
			by = &res.Retries.ByOutcome.Deadline
		}
		*by += retries
		oc.Ops++
		oc.Attempts += attempts
		res.Retries.Total += retries
		for i := range retries {
			res.Retries.ByReason[attemptReason(c, int(i))]++
		}
		if c.Type != histories.OK {
			// The error the operation ended with: its last attempt's.
			reason := attemptReason(c, int(attempts-1))
			res.Errors[reason]++
			if oc.Errors == nil {
				oc.Errors = map[string]int64{}
			}
			oc.Errors[reason]++
		}
		lat = append(lat, time.Duration(c.Time-inv.Time))
		edges = append(edges, edge{inv.Time, 1}, edge{c.Time, -1})
		if sec := c.Time / int64(time.Second); sec >= 0 && sec < 1<<20 {
			for int64(len(res.PerSecond)) <= sec {
				res.PerSecond = append(res.PerSecond, 0)
			}
			res.PerSecond[sec]++
		}
	}
	if elapsed <= 0 {
		elapsed = time.Duration(end)
	}
	res.DurationS = elapsed.Seconds()
	if elapsed > 0 {
		res.Throughput = float64(completed) / elapsed.Seconds()
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		q := func(p float64) float64 { return msOf(lat[min(n-1, int(p*float64(n)))]) }
		res.LatencyMs = results.Latency{P50: q(0.50), P95: q(0.95), P99: q(0.99), Max: msOf(lat[n-1])}
	}
	// Workers: the most operations in flight at once.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.t != b.t {
			return int(min(max(a.t-b.t, -1), 1))
		}
		return a.delta - b.delta
	})
	in := 0
	res.Workers = 1
	for _, e := range edges {
		in += e.delta
		res.Workers = max(res.Workers, in)
	}
}

// failedOutcome is the outcome count of a failed operation that took attempts and
// ended as ended says (histories.Op.Ended).
func failedOutcome(o *results.Outcomes, ended string, attempts int64) *results.OutcomeCount {
	switch ended {
	case histories.EndedExhausted:
		return &o.Exhausted
	case histories.EndedNoEffect, histories.EndedNotRetryable:
		return &o.NonRetryable
	case histories.EndedDeadline, histories.EndedInterrupted:
		return &o.Deadline
	}
	if attempts > 1 {
		return &o.Exhausted
	}
	return &o.NonRetryable
}

// attemptReason is the reason of attempt i (from 0) of the completion c: the reason,
// else the class, of the failed attempt it lists at i.
func attemptReason(c *histories.Op, i int) string {
	if i == len(c.Failed) && c.Ended == histories.EndedNoEffect {
		return histories.EndedNoEffect
	}
	if i < 0 || i >= len(c.Failed) {
		return ReasonUnrecorded
	}
	switch a := c.Failed[i]; {
	case a.Reason != "":
		return a.Reason
	case a.Class != "":
		return a.Class
	}
	return ReasonUnclassified
}

func msOf(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// TwoPhaseTransactions counts a two-phase commit run's transactions by what the
// client was told: the completions of a transfer (workload transfer) or of a read of
// two rows (workload two-rows), the reads of the total left out; ok committed, fail
// aborted, info abandoned. An operation never completed is not counted. ok is false
// for the other workloads, which have no such section.
func TwoPhaseTransactions(workload string, ops []histories.Op) (c results.TxCounts, ok bool) {
	var f string
	switch workloads.Name(workload) {
	case workloads.Transfer:
		f = transfer.FTransfer
	case workloads.TwoRows:
		f = transfer.FRows
	default:
		return c, false
	}
	for _, op := range ops {
		if op.F != f || op.Process < 0 || histories.IsFinalReadID(op.OpID) {
			continue
		}
		switch op.Type {
		case histories.OK:
			c.Committed++
		case histories.Fail:
			c.Aborted++
		case histories.Info:
			c.Abandoned++
		}
	}
	return c, true
}
