package checker

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// Verdict is the outcome of a check. The zero value is invalid.
type Verdict uint8

const (
	Valid   Verdict = 1 + iota // valid
	Invalid                    // invalid
	Unknown                    // unknown: the checker ran out of time or could not decide
)

// String returns valid, invalid or unknown.
func (v Verdict) String() string {
	switch v {
	case Valid:
		return "valid"
	case Invalid:
		return "invalid"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("verdict(%d)", uint8(v))
}

// MarshalText implements encoding.TextMarshaler.
func (v Verdict) MarshalText() ([]byte, error) {
	if v < Valid || v > Unknown {
		return nil, fmt.Errorf("invalid verdict %d", uint8(v))
	}
	return []byte(v.String()), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Verdict) UnmarshalText(b []byte) error {
	for _, c := range []Verdict{Valid, Invalid, Unknown} {
		if c.String() == string(b) {
			*v = c
			return nil
		}
	}
	return fmt.Errorf("unknown verdict %q", b)
}

// ExitCode maps a verdict to indoubt's exit codes: 0 valid, 1 invalid, 2 unknown.
func (v Verdict) ExitCode() int {
	switch v {
	case Valid:
		return 0
	case Invalid:
		return 1
	}
	return 2
}

// interrupted is the Result of a check stopped by its context: Unknown, because what was
// not searched was not decided either way.
func interrupted(checker string, err error) Result {
	return Result{Verdict: Unknown, Checker: checker, Anomalies: []Anomaly{},
		Summary: fmt.Sprintf("interrupted before the history could be decided (%v)", err)}
}

// Anomaly is one thing found wrong, with the history indices of the events involved and
// a sentence a person understands.
type Anomaly struct {
	// Kind is the class of the anomaly, named in each checker's documentation
	// (overdraft, lost-update, not-linearizable, ...).
	Kind string `json:"kind"`
	// Ops are the Index values of the events involved.
	Ops []int64 `json:"ops"`
	// Explanation says what happened, naming the operations.
	Explanation string `json:"explanation"`
}

// Result is a checker's finding. It marshals to the JSON that results.json and
// `indoubt check --json` print.
type Result struct {
	// Verdict is valid, invalid or unknown.
	Verdict Verdict `json:"verdict"`
	// Checker names the checker that decided: budget, counter, register, cas-register.
	Checker string `json:"checker"`
	// Anomalies lists what was found wrong; a checker that bounds the list says in
	// Details how many it found.
	Anomalies []Anomaly `json:"anomalies"`
	// Summary is one sentence: why valid, why invalid, or why undecided.
	Summary string `json:"summary"`
	// Details holds checker-specific figures (budget: acknowledged, possible range).
	Details map[string]json.RawMessage `json:"details,omitempty"`
	// LostWrites lists the acknowledged writes found missing after the process faults
	// the history records, each also an anomaly of kind LostWriteKind: the
	// nemesis events a run records for the faults it applied (kill, restart, failover,
	// power loss, a partition between nodes) name the fault each followed.
	LostWrites []LostWrite `json:"lost_writes,omitempty"`
}

// completions counts what a history checked: the client operations that completed
// (ok, fail or info), apart from the final reads indoubt records after the workers
// stop, and the span of time they cover.
type completions struct {
	n           int64
	first, last int64
	seen        bool
}

func (c *completions) add(op histories.Op) { c.see(&op) }

// see is add for an event in place.
func (c *completions) see(op *histories.Op) {
	if !op.IsClient() {
		return
	}
	if !c.seen {
		c.first, c.seen = op.Time, true
	}
	if histories.IsFinalReadID(op.OpID) {
		// The final reads begin when the workers have stopped: the end of the span.
		if op.Type == histories.Invoke {
			c.last = max(c.last, op.Time)
		}
		return
	}
	c.last = max(c.last, op.Time)
	if op.Type != histories.Invoke {
		c.n++
	}
}

// isFinalRead reports whether an event belongs to the final reads recorded after the
// workers stopped (histories.IsFinalReadID).
func isFinalRead(op histories.Op) bool { return histories.IsFinalReadID(op.OpID) }

// unlessNothing makes a valid result Unknown when nothing was checked: no client
// operation completed, so no order of operations was held to the model (a run that
// spent its time connecting, a history of nemesis events alone). An invalid result
// stands: what the final state proves wrong (a phantom effect) needs no operation.
func (c *completions) unlessNothing(res Result) Result {
	if res.Verdict != Valid || c.n > 0 {
		return res
	}
	start := c.first
	if start < unixNanos2001 {
		start = 0 // the run's own clock starts at 0
	}
	span := time.Duration(max(c.last-start, 0))
	res.Verdict = Unknown
	res.Summary = fmt.Sprintf("nothing was checked: 0 operations completed in %s", span.Round(time.Millisecond))
	return res
}

// unixNanos2001 is 2001-09-09 in Unix nanoseconds: a history time below it is not a
// wall-clock time but a time since some start.
const unixNanos2001 = 1_000_000_000 * 1_000_000_000
