package runner

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
)

// Policy is a retry policy: what a worker does when an attempt errs.
//
//	none        no retries: unknown stays info, definite stays fail
//	conflict    retry only certain conflicts (SQLSTATE 40001, CAS mismatch), as a
//	            serializable client must
//	naive       retry any error, the way most application code does
//	idempotent  retry any error, with the op id recorded in the same transaction as the
//	            effect, so a retry that finds it returns the original outcome
//	driver      no retries of indoubt's own; the client library's retry behaviour at
//	            its defaults
//
// Retries use exponential backoff with full jitter, capped, on the same connection while
// it survives.
type Policy struct {
	Name        PolicyName
	MaxAttempts int
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
}

// PolicyName names a retry policy. The names are defined here, once.
type PolicyName string

// The retry policies, in the order --help shows them.
const (
	NoRetry    PolicyName = "none"
	Conflict   PolicyName = "conflict"
	Naive      PolicyName = "naive"
	Idempotent PolicyName = "idempotent"
	Driver     PolicyName = "driver"
)

var policyNames = []PolicyName{NoRetry, Conflict, Naive, Idempotent, Driver}

// DefaultPolicy is the retry policy of a workload when none is asked for: the counter
// and the transactional workloads measure the retry loop a serializable client must
// write; the others retry nothing.
func DefaultPolicy(w workloads.Name) PolicyName {
	if w == workloads.Counter || isTxn(w) {
		return Conflict
	}
	return NoRetry
}

// ParsePolicy returns the named policy with indoubt's defaults: at most 10 attempts,
// backoff from 1 ms doubling to at most 100 ms.
func ParsePolicy(name string) (Policy, error) {
	p := Policy{Name: PolicyName(name), MaxAttempts: 10, BaseBackoff: time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	switch p.Name {
	case NoRetry, Driver:
		p.MaxAttempts = 1
	case Conflict, Naive, Idempotent:
	default:
		return Policy{}, fmt.Errorf("unknown retry policy %q (want one of %s)", name, choice.List(policyNames))
	}
	return p, nil
}

// Idempotent reports whether operations carry their op id to the store.
func (p Policy) Idempotent() bool { return p.Name == Idempotent }

// DriverRetry reports whether the client library's own retries are left on.
func (p Policy) DriverRetry() bool { return p.Name == Driver }

// retries reports whether an attempt that failed with class c is retried.
func (p Policy) retries(c workloads.Class) bool {
	switch p.Name {
	case Conflict:
		return c == workloads.ClassConflict
	case Naive, Idempotent:
		return c != workloads.ClassNone
	}
	return false
}

// backoff returns the pause before attempt n+1 (n >= 1): full jitter over an
// exponentially growing, capped window.
func (p Policy) backoff(n int, rng *rand.Rand) time.Duration {
	w := p.BaseBackoff
	for i := 1; i < n && w < p.MaxBackoff; i++ {
		w *= 2
	}
	if w > p.MaxBackoff {
		w = p.MaxBackoff
	}
	if w <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(w) + 1))
}
