// Package redispay is the payments service on Redis (go-redis v9): Naive, which retries
// any error, and Idempotent, whose Lua script records the charge's key with SET in the
// same atomic step as the DECR, and answers a retry from it.
//
// Both turn go-redis's own retries off (MaxRetries -1): go-redis retries a command after
// a lost connection by default, which is the naive retry again, hidden in the driver.
package redispay

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/examples/payments"
)

// The account's keys share a hash tag, so that the script's keys live on one node of
// a cluster.
const (
	balanceKey   = "{acct}:balance"
	chargePrefix = "{acct}:charge:"
)

// charge takes one credit if any is left and returns the balance after, or -1 when
// none was left.
var charge = redis.NewScript(`
local b = tonumber(redis.call('GET', KEYS[1]) or '0')
if b <= 0 then return -1 end
return redis.call('DECR', KEYS[1])
`)

// chargeOnce is charge, remembered under KEYS[2]: a second call with the same key
// returns the first call's answer and takes nothing. It returns {balance, replayed}.
var chargeOnce = redis.NewScript(`
local seen = redis.call('GET', KEYS[2])
if seen then return {tonumber(seen), 1} end
local b = tonumber(redis.call('GET', KEYS[1]) or '0')
local r = -1
if b > 0 then r = redis.call('DECR', KEYS[1]) end
redis.call('SET', KEYS[2], r)
return {r, 0}
`)

// Open returns a client for dsn (redis://...) with go-redis's retries off.
func Open(dsn string) (*redis.Client, error) {
	opt, err := redis.ParseURL(dsn)
	if err != nil {
		return nil, err
	}
	opt.MaxRetries = -1
	return redis.NewClient(opt), nil
}

// Setup sets the account to credits.
func Setup(ctx context.Context, c *redis.Client, credits int64) error {
	return c.Set(ctx, balanceKey, credits, 0).Err()
}

// Naive charges with a script and retries any error.
type Naive struct{ Client *redis.Client }

// Idempotent charges with a script that records the key, and retries any error.
type Idempotent struct{ Client *redis.Client }

var (
	_ payments.Service = (*Naive)(nil)
	_ payments.Service = (*Idempotent)(nil)
)

// Charge takes one credit; key is ignored.
func (s *Naive) Charge(ctx context.Context, key string) (payments.Receipt, error) {
	return payments.Retry(ctx, func(ctx context.Context) (payments.Receipt, error) {
		return receipt(charge.Run(ctx, s.Client, []string{balanceKey}).Int64())
	})
}

// Charge takes one credit unless a charge with key ran before, whose receipt it returns.
func (s *Idempotent) Charge(ctx context.Context, key string) (payments.Receipt, error) {
	return payments.Retry(ctx, func(ctx context.Context) (payments.Receipt, error) {
		v, err := chargeOnce.Run(ctx, s.Client, []string{balanceKey, chargePrefix + key}).Int64Slice()
		if err == nil && len(v) != 2 {
			err = fmt.Errorf("redispay: the charge script answered %v, want {balance, replayed}", v)
		}
		if err != nil {
			return payments.Receipt{}, err
		}
		r, err := receipt(v[0], nil)
		r.Replayed = v[1] == 1
		return r, err
	})
}

func receipt(b int64, err error) (payments.Receipt, error) {
	if err != nil {
		return payments.Receipt{}, err
	}
	if b < 0 {
		return payments.Receipt{Applied: false, Balance: 0}, nil
	}
	return payments.Receipt{Applied: true, Balance: b}, nil
}

// Balance reads the credits left.
func (s *Naive) Balance(ctx context.Context) (int64, error) { return balance(ctx, s.Client) }

// Balance reads the credits left.
func (s *Idempotent) Balance(ctx context.Context) (int64, error) { return balance(ctx, s.Client) }

func balance(ctx context.Context, c *redis.Client) (int64, error) {
	return c.Get(ctx, balanceKey).Int64()
}
