// Package checker decides whether a history is correct, and explains why not.
//
// It works on histories alone (package histories) and never sees the proxy's ground
// truth. An invalid history is a Result, not an error; errors mean the input could not be
// read. Exact checkers (budget, counter) run in O(n log n) without search; porcupine
// models (register, cas-register) search, under a timeout that yields Unknown.
package checker

import (
	"encoding/json"
	"fmt"
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
	Kind        string  `json:"kind"`
	Ops         []int64 `json:"ops"`
	Explanation string  `json:"explanation"`
}

// Result is a checker's finding.
type Result struct {
	Verdict   Verdict   `json:"verdict"`
	Checker   string    `json:"checker"`
	Anomalies []Anomaly `json:"anomalies"`
	// Summary is one sentence: why valid, why invalid, or why undecided.
	Summary string `json:"summary"`
	// Details holds checker-specific figures (budget: acknowledged, possible range).
	Details map[string]json.RawMessage `json:"details,omitempty"`
}
