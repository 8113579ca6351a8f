package runner

import (
	"fmt"
	"math/rand/v2"
	"time"

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
	Name        string
	MaxAttempts int
	BaseBackoff time.Duration
	MaxBackoff  time.Duration
}

// Policies lists the policy names in the order --help shows them.
var Policies = []string{"none", "conflict", "naive", "idempotent", "driver"}

// ParsePolicy returns the named policy with indoubt's defaults: at most 10 attempts,
// backoff from 1 ms doubling to at most 100 ms.
func ParsePolicy(name string) (Policy, error) {
	p := Policy{Name: name, MaxAttempts: 10, BaseBackoff: time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	switch name {
	case "none", "driver":
		p.MaxAttempts = 1
	case "conflict", "naive", "idempotent":
	default:
		return Policy{}, fmt.Errorf("unknown retry policy %q (want one of none, conflict, naive, idempotent, driver)", name)
	}
	return p, nil
}

// Idempotent reports whether operations carry their op id to the store.
func (p Policy) Idempotent() bool { return p.Name == "idempotent" }

// DriverRetry reports whether the client library's own retries are left on.
func (p Policy) DriverRetry() bool { return p.Name == "driver" }

// retries reports whether an attempt that failed with class c is retried.
func (p Policy) retries(c workloads.Class) bool {
	switch p.Name {
	case "conflict":
		return c == workloads.ClassConflict
	case "naive", "idempotent":
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
