package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

var _ register.Store = (*Registers)(nil)

// Registers is the register store over a Client's server: integer registers as string
// keys holding decimal values. Get it from Client.Register.
type Registers struct{ c *Client }

// Register returns the register store over the same server and configuration.
func (c *Client) Register() *Registers { return &Registers{c} }

// writeScript sets the register unless its op id is recorded; it records the id in the
// same step. It replies 1 when it wrote, 0 on replay.
//
// KEYS[1] register, KEYS[2] its op ids; ARGV[1] value, ARGV[2] op id.
var writeScript = goredis.NewScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[2]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], '1')
return 1
`)

// casScript sets the register to ARGV[2] if it holds ARGV[1]. Values are compared as
// the decimal strings this adapter writes, which is exact for every int64 (Lua numbers
// are doubles and are not). With an op id it returns a recorded outcome instead of
// running again, and records the outcome, failures included. It replies 1 or 0.
//
// KEYS[1] register, KEYS[2] its op ids; ARGV[1] from, ARGV[2] to, ARGV[3] op id or "".
var casScript = goredis.NewScript(`
local id = ARGV[3]
if id ~= '' then
  local prev = redis.call('HGET', KEYS[2], id)
  if prev then
    return tonumber(prev)
  end
end
local ok = 0
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2])
  ok = 1
end
if id ~= '' then
  redis.call('HSET', KEYS[2], id, ok)
end
return ok
`)

func (r *Registers) keys(key string) []string {
	k := r.c.prefix + ":register:{" + key + "}"
	return []string{k, k + ":ops"}
}

// Reset deletes every register key and recorded op id under the prefix, found with SCAN.
// It is not atomic and must not race with sessions.
func (r *Registers) Reset(ctx context.Context) error {
	iter := r.c.admin.Scan(ctx, 0, r.c.prefix+":register:*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := r.c.admin.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return fmt.Errorf("reset registers: %w", Classify(err))
			}
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("reset registers: %w", Classify(err))
	}
	if err := flush(); err != nil {
		return fmt.Errorf("reset registers: %w", Classify(err))
	}
	return nil
}

// Session dials one worker's connection.
func (r *Registers) Session(ctx context.Context) (register.Session, error) {
	s, err := r.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &registerSession{session: s, r: r}, nil
}

type registerSession struct {
	*session
	r *Registers
}

// Read is a GET: Redis serves every command from its single thread in order, so a read
// on the primary sees every acknowledged write.
func (s *registerSession) Read(ctx context.Context, key string) (int64, bool, error) {
	if err := workloads.Start(ctx); err != nil {
		return 0, false, err
	}
	v, err := s.client.Get(ctx, s.r.keys(key)[0]).Result()
	if errors.Is(err, goredis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", key, Classify(err))
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: value %q is not an integer: %w", key, v, err)
	}
	return n, true, nil
}

// Write is a SET, or the write script when idempotent.
func (s *registerSession) Write(ctx context.Context, req workloads.Request, key string, value int64) error {
	if err := workloads.Start(ctx); err != nil {
		return err
	}
	keys := s.r.keys(key)
	v := strconv.FormatInt(value, 10)
	var err error
	if req.Idempotent {
		if req.OpID == "" {
			return errors.New("write: idempotent request without op id")
		}
		err = writeScript.Run(ctx, s.client, keys, v, req.OpID).Err()
	} else {
		err = s.client.Set(ctx, keys[0], v, 0).Err()
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", key, Classify(err))
	}
	return nil
}

// CAS runs the cas script.
func (s *registerSession) CAS(ctx context.Context, req workloads.Request, key string, from, to int64) (bool, error) {
	if err := workloads.Start(ctx); err != nil {
		return false, err
	}
	id := ""
	if req.Idempotent {
		if req.OpID == "" {
			return false, errors.New("cas: idempotent request without op id")
		}
		id = req.OpID
	}
	n, err := casScript.Run(ctx, s.client, s.r.keys(key),
		strconv.FormatInt(from, 10), strconv.FormatInt(to, 10), id).Int64()
	if err != nil {
		return false, fmt.Errorf("cas %s: %w", key, Classify(err))
	}
	switch n {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, workloads.Unknown(fmt.Errorf("cas %s: reply %d is not 0 or 1", key, n), workloads.ReasonBadReply)
}
