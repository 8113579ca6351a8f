// Package payments is a small payments service, the kind indoubt exists to test: a
// prepaid account from which each charge takes one credit, written against three
// stores (pgpay: PostgreSQL with pgx; redispay: Redis with go-redis; mongopay: MongoDB
// with mongo-driver) in two versions each:
//
//   - Naive retries any error. When the connection is lost after the store committed a
//     charge but before the reply arrived (an ambiguous commit), the retry charges again:
//     the customer pays twice.
//   - Idempotent writes the charge's idempotency key in the same atomic step as the
//     charge, and a retry that finds the key returns the first outcome.
//
// Each store's test drives both through indoubttest under commit faults and checks the
// histories with the budget model: the naive version fails under commit-cut, the
// idempotent one passes, both pass without faults and under commit-drop (a dropped
// commit never applied, so retrying it is safe).
package payments

import (
	"context"
	"time"
)

// Receipt is the outcome of a charge.
type Receipt struct {
	// Applied is true when the charge took a credit, false when none was left.
	Applied bool
	// Balance is the credits left after the charge (-1 when the store does not say).
	Balance int64
	// Replayed is true when the service answered from its record of an earlier attempt
	// of the same charge (the idempotency key it wrote), whose reply was lost: the credit
	// was taken once, by that attempt, and this one changed nothing.
	Replayed bool
}

// Service charges one prepaid account.
type Service interface {
	// Charge takes one credit, once, whatever the retries: key identifies the charge
	// (the caller's idempotency key; the naive versions ignore it).
	Charge(ctx context.Context, key string) (Receipt, error)
	// Balance reads the credits left.
	Balance(ctx context.Context) (int64, error)
}

// Retries is how many times the services try a charge before giving up.
const Retries = 10

type retryHook struct{}

// OnRetry returns ctx carrying f, which the services call with the error of each
// failed attempt they retry: for logs and metrics, and for indoubttest's Op.Retried.
func OnRetry(ctx context.Context, f func(error)) context.Context {
	return context.WithValue(ctx, retryHook{}, f)
}

// Retry calls attempt until it succeeds, Retries times at most, pausing a little
// between attempts: "retry any error", the wrapper many services have. It returns the
// last error.
func Retry[T any](ctx context.Context, attempt func(context.Context) (T, error)) (T, error) {
	var v T
	var err error
	for i := 0; i < Retries; i++ {
		if v, err = attempt(ctx); err == nil || ctx.Err() != nil {
			return v, err
		}
		if f, ok := ctx.Value(retryHook{}).(func(error)); ok && i+1 < Retries {
			f(err)
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
	return v, err
}
