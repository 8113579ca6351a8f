package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

var _ budget.Store = (*Client)(nil)

// decrementScript checks and decrements the balance in one atomic step. With an op id it
// first looks the id up and returns the recorded outcome, and records the new outcome
// ("applied:balance") in the same script, rejections included. It replies
// {replayed, applied, balance}.
//
// KEYS[1] balance, KEYS[2] op ids; ARGV[1] op id, "" when not idempotent.
var decrementScript = goredis.NewScript(`
local id = ARGV[1]
if id ~= '' then
  local prev = redis.call('HGET', KEYS[2], id)
  if prev then
    local a, b = string.match(prev, '^(%d):(%-?%d+)$')
    if not a then
      return redis.error_reply('INDOUBT bad recorded outcome for op ' .. id)
    end
    return {1, tonumber(a), tonumber(b)}
  end
end
local v = redis.call('GET', KEYS[1])
local b = tonumber(v)
if not b then
  return redis.error_reply('INDOUBT budget not set: reset it first')
end
local applied = 0
if b > 0 then
  b = redis.call('DECR', KEYS[1])
  applied = 1
end
if id ~= '' then
  redis.call('HSET', KEYS[2], id, applied .. ':' .. b)
end
return {0, applied, b}
`)

// budgetKeys returns the balance's and the op ids' keys. The slice is shared by every
// call (built once at Open: the decrement is on every operation's path) and must not
// be changed.
func (c *Client) budgetKeys() []string {
	if c.bkeys == nil {
		return budgetKeysOf(c.prefix)
	}
	return c.bkeys
}

func budgetKeysOf(prefix string) []string {
	tag := "{" + prefix + ":budget}"
	return []string{tag + ":balance", tag + ":ops"}
}

// Mechanism names the atomic mechanism for the report.
func (c *Client) Mechanism() string { return "Lua script (EVALSHA)" }

// Reset sets the balance and deletes the recorded op ids in one MULTI/EXEC.
func (c *Client) Reset(ctx context.Context, amount int64) error {
	keys := c.budgetKeys()
	_, err := c.admin.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		p.Set(ctx, keys[0], amount, 0)
		p.Del(ctx, keys[1])
		return nil
	})
	if err != nil {
		return fmt.Errorf("reset budget: %w", Classify(err))
	}
	return nil
}

// Balance reads the balance; it errs when the budget was never set.
func (c *Client) Balance(ctx context.Context) (int64, error) {
	v, err := c.admin.Get(ctx, c.budgetKeys()[0]).Result()
	if errors.Is(err, goredis.Nil) {
		return 0, fmt.Errorf("read balance: %w", budget.ErrNoAccount)
	}
	if err != nil {
		return 0, fmt.Errorf("read balance: %w", Classify(err))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read balance: %w", err)
	}
	return n, nil
}

// Session dials one worker's connection.
func (c *Client) Session(ctx context.Context) (budget.Session, error) {
	s, err := c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &budgetSession{s}, nil
}

type budgetSession struct{ *session }

// Decrement runs the decrement script. The outcome's Balance is always reported.
func (s *budgetSession) Decrement(ctx context.Context, req workloads.Request) (budget.Outcome, error) {
	if err := workloads.Start(ctx); err != nil {
		return budget.Outcome{}, err
	}
	id := ""
	if req.Idempotent {
		if req.OpID == "" {
			return budget.Outcome{}, errors.New("decrement: idempotent request without op id")
		}
		id = req.OpID
	}
	reply, err := decrementScript.Run(ctx, s.client, s.c.budgetKeys(), id).Int64Slice()
	if err != nil {
		return budget.Outcome{}, fmt.Errorf("decrement: %w", Classify(err))
	}
	if len(reply) != 3 {
		// The script ran, so its effect is unknown to us.
		return budget.Outcome{}, workloads.Unknown(fmt.Errorf("decrement: reply %v is not {replayed, applied, balance}", reply), workloads.ReasonBadReply)
	}
	return budget.Outcome{Replayed: reply[0] == 1, Applied: reply[1] == 1, Balance: reply[2]}, nil
}
