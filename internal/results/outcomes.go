package results

// Outcomes counts a run's operations (final reads excluded) and their attempts by how
// the retry loop ended, so that the cost of retrying can be told apart by outcome:
// retries per success is Succeeded's attempts beyond the first over its operations.
// Failures are Exhausted and NonRetryable; Deadline counts the operations the end of the
// run (its deadline or an interruption) cut off between attempts, never among the
// failures. An operation that ended unknown is Unknown whatever stopped it.
type Outcomes struct {
	Succeeded OutcomeCount `json:"succeeded"`
	// Exhausted failed after every allowed attempt hit a retryable error.
	Exhausted OutcomeCount `json:"exhausted"`
	// NonRetryable failed on an error the policy does not retry.
	NonRetryable OutcomeCount `json:"non_retryable"`
	Unknown      OutcomeCount `json:"unknown"`
	Deadline     OutcomeCount `json:"deadline"`
}

// OutcomeCount is the operations of one outcome, their attempts (first tries and
// retries), and the reasons of their last errors (workloads.Reason values such as
// serialization-failure, conn-closed, timeout, or a server's own code such as 23505).
type OutcomeCount struct {
	Ops      int64            `json:"ops"`
	Attempts int64            `json:"attempts"`
	Errors   map[string]int64 `json:"errors,omitempty"`
}

// Retries returns the attempts beyond the first.
func (c OutcomeCount) Retries() int64 { return c.Attempts - c.Ops }

// Add adds p's counts to o's, outcome by outcome.
func (o *Outcomes) Add(p Outcomes) {
	for _, c := range [...]struct{ to, from *OutcomeCount }{
		{&o.Succeeded, &p.Succeeded}, {&o.Exhausted, &p.Exhausted}, {&o.NonRetryable, &p.NonRetryable},
		{&o.Unknown, &p.Unknown}, {&o.Deadline, &p.Deadline},
	} {
		c.to.Ops += c.from.Ops
		c.to.Attempts += c.from.Attempts
		c.to.Errors = AddCounts(c.to.Errors, c.from.Errors)
	}
}

// AddCounts adds the counts of from to to's, making to when it is nil and from is not,
// and returns it.
func AddCounts(to, from map[string]int64) map[string]int64 {
	if to == nil && len(from) > 0 {
		to = make(map[string]int64, len(from))
	}
	for k, v := range from {
		to[k] += v
	}
	return to
}

// Failed returns the operations that failed: exhausted or non-retryable.
func (o Outcomes) Failed() int64 { return o.Exhausted.Ops + o.NonRetryable.Ops }

// FailedByReason merges the last errors of the failed operations.
func (o Outcomes) FailedByReason() map[string]int64 {
	return AddCounts(AddCounts(map[string]int64{}, o.Exhausted.Errors), o.NonRetryable.Errors)
}

// RetriesPerSuccess returns the retries of the operations that succeeded per operation
// that succeeded, and false when none did.
func (o Outcomes) RetriesPerSuccess() (float64, bool) {
	if o.Succeeded.Ops == 0 {
		return 0, false
	}
	return float64(o.Succeeded.Retries()) / float64(o.Succeeded.Ops), true
}
