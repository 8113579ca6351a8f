package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

var _ txn.Store = (*Txns)(nil)

// TxnMechanism is how Txns runs a transaction.
type TxnMechanism string

// The transaction mechanisms.
const (
	// Watch is optimistic: WATCH every key the transaction touches, read with plain
	// commands, then queue the writes in MULTI/EXEC. EXEC fails when a watched key
	// changed after WATCH, and the transaction is a conflict, tried again by the
	// conflict policy. A transaction that only reads ends with an EXEC too (of a PING),
	// so that its reads are known to still hold together.
	Watch TxnMechanism = "watch"
	// Multi is the same without WATCH: the reads run before MULTI and nothing checks
	// that they still hold when EXEC applies the writes. It is the read-then-write
	// pattern applications write when they take MULTI for a transaction; Redis makes
	// the writes atomic, and promises nothing about the reads.
	Multi TxnMechanism = "multi"
	// Script runs the whole transaction as one Lua script (EVALSHA), which Redis runs
	// with nothing interleaved.
	Script TxnMechanism = "script"
)

// TxnMechanisms are the mechanisms, the default first.
var TxnMechanisms = []TxnMechanism{Watch, Multi, Script}

// TxnConfig configures Txns.
type TxnConfig struct {
	// Model is workloads.ListAppend (a list a key, RPUSH and LRANGE) or
	// workloads.RWRegister (a string a key, SET and GET).
	Model     workloads.Name
	Mechanism TxnMechanism // Watch when empty
}

// Txns is the list-append or rw-register store on a Client's server: key k of the
// model is PREFIX:txn:MODEL:k, a list for list-append, a decimal string for
// rw-register.
type Txns struct {
	c     *Client
	model workloads.Name
	mech  TxnMechanism
}

// NewTxns returns the store on c. It errs on an unknown model or mechanism.
func NewTxns(c *Client, cfg TxnConfig) (*Txns, error) {
	if cfg.Model != workloads.ListAppend && cfg.Model != workloads.RWRegister {
		return nil, fmt.Errorf("redis: no transactional model %q (want list-append or rw-register)", cfg.Model)
	}
	if cfg.Mechanism == "" {
		cfg.Mechanism = Watch
	}
	if _, err := choice.Parse("mechanism", cfg.Mechanism, TxnMechanisms...); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return &Txns{c: c, model: cfg.Model, mech: cfg.Mechanism}, nil
}

func (t *Txns) key(k int64) string {
	return t.c.prefix + ":txn:" + string(t.model) + ":" + strconv.FormatInt(k, 10)
}

// Guarantee is what Redis documents for the mechanism: a transaction's commands run
// with nothing interleaved (MULTI/EXEC, a script), and EXEC aborts when a WATCHed key
// changed. Watch and Script are checked for serializability; Multi for read committed
// (its writes are atomic and its reads see what was applied before them), and a run
// that checks it for serializability names what the unwatched reads let happen. One
// server is linearizable per key.
func (t *Txns) Guarantee() txn.Guarantee {
	g := txn.Guarantee{LinearizableKeys: true, SequentialKeys: true, WFRKeys: true}
	switch t.mech {
	case Multi:
		g.Mechanism = "reads, then MULTI with the writes, EXEC (no WATCH)"
		g.Models = []string{"read-committed"}
		g.Promise = "Redis runs MULTI/EXEC's commands with nothing interleaved; reads made before MULTI are not part of the transaction, so nothing is promised of them beyond each seeing what was applied before it"
	case Script:
		g.Mechanism = "one Lua script a transaction (EVALSHA)"
		g.Models = []string{"serializable"}
		g.Promise = "Redis runs a script with nothing interleaved"
	default:
		g.Mechanism = "WATCH the keys, reads, MULTI with the writes, EXEC"
		g.Models = []string{"serializable"}
		g.Promise = "Redis runs MULTI/EXEC's commands with nothing interleaved, and EXEC aborts when a WATCHed key changed after WATCH, so the reads still hold when the writes apply"
	}
	return g
}

// Reset deletes every key of the transactional workloads under the prefix, found with
// SCAN. It must not race with sessions.
func (t *Txns) Reset(ctx context.Context) error {
	iter := t.c.admin.Scan(ctx, 0, t.c.prefix+":txn:*", 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("reset transaction keys: %w", Classify(err))
	}
	for len(batch) > 0 {
		n := min(500, len(batch))
		if err := t.c.admin.Unlink(ctx, batch[:n]...).Err(); err != nil {
			return fmt.Errorf("reset transaction keys: %w", Classify(err))
		}
		batch = batch[n:]
	}
	return nil
}

// Session dials one worker's connection.
func (t *Txns) Session(ctx context.Context) (txn.Session, error) {
	s, err := t.c.newSession(ctx)
	if err != nil {
		return nil, err
	}
	return &txnSession{session: s, t: t}, nil
}

type txnSession struct {
	*session
	t *Txns
}

// txnScript runs a transaction's micro-ops in order: KEYS[i] is micro-op i's key,
// ARGV[2i-1] its function (append, w, rl for a list read, r for a register read) and
// ARGV[2i] its value. It replies one entry a micro-op: a read's list or value (nil for
// a register never written), 0 for a write.
var txnScript = goredis.NewScript(`
local out = {}
for i = 1, #KEYS do
  local f = ARGV[2*i-1]
  if f == 'append' then
    redis.call('RPUSH', KEYS[i], ARGV[2*i]); out[i] = 0
  elseif f == 'w' then
    redis.call('SET', KEYS[i], ARGV[2*i]); out[i] = 0
  elseif f == 'rl' then
    out[i] = redis.call('LRANGE', KEYS[i], 0, -1)
  else
    out[i] = redis.call('GET', KEYS[i])
  end
end
return out
`)

// Txn runs t by the store's mechanism. A WATCH that saw a key change is a conflict;
// a connection lost around EXEC or the script is unknown.
func (s *txnSession) Txn(ctx context.Context, req workloads.Request, t txn.Txn) (txn.Txn, int, error) {
	if err := workloads.Start(ctx); err != nil {
		return nil, 0, err
	}
	switch s.t.mech {
	case Script:
		return s.script(ctx, t)
	case Multi:
		if err := s.readThenWrite(ctx, s.client, t, false); err != nil {
			return nil, 0, err
		}
		return t, 0, nil
	}
	keys := make([]string, 0, len(t))
	for _, k := range t.Keys() {
		keys = append(keys, s.t.key(k))
	}
	err := s.client.Watch(ctx, func(tx *goredis.Tx) error {
		return s.readThenWrite(ctx, tx, t, true)
	}, keys...)
	switch {
	case errors.Is(err, goredis.TxFailedErr):
		return nil, 0, workloads.Conflict(err, "watch")
	case err != nil:
		return nil, 0, err
	}
	return t, 0, nil
}

// cmdable is what readThenWrite needs of a client or a WATCH transaction.
type cmdable interface {
	goredis.Cmdable
	TxPipelined(ctx context.Context, fn func(goredis.Pipeliner) error) ([]goredis.Cmder, error)
}

// readThenWrite fills in t's reads from the server's values (read once a key, before
// MULTI) and t's own earlier writes, then applies the writes in MULTI/EXEC. With
// always, a transaction without writes still sends MULTI/EXEC (a PING), so that a
// WATCH checks its reads.
func (s *txnSession) readThenWrite(ctx context.Context, c cmdable, t txn.Txn, always bool) error {
	list := s.t.model == workloads.ListAppend
	type state struct {
		list  []int64
		val   int64
		found bool
	}
	seen := map[int64]*state{}
	load := func(k int64) (*state, error) {
		if st, ok := seen[k]; ok {
			return st, nil
		}
		st := &state{}
		if list {
			vs, err := c.LRange(ctx, s.t.key(k), 0, -1).Result()
			if err != nil {
				return nil, Classify(err)
			}
			st.list = make([]int64, 0, len(vs))
			for _, v := range vs {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, workloads.Definite(fmt.Errorf("redis: key %d holds %q, not an integer", k, v), "garbage")
				}
				st.list = append(st.list, n)
			}
		} else {
			v, err := c.Get(ctx, s.t.key(k)).Result()
			switch {
			case errors.Is(err, goredis.Nil):
			case err != nil:
				return nil, Classify(err)
			default:
				n, perr := strconv.ParseInt(v, 10, 64)
				if perr != nil {
					return nil, workloads.Definite(fmt.Errorf("redis: key %d holds %q, not an integer", k, v), "garbage")
				}
				st.val, st.found = n, true
			}
		}
		seen[k] = st
		return st, nil
	}
	writes := false
	for i := range t {
		m := &t[i]
		st, err := load(m.Key)
		if err != nil {
			return err
		}
		switch m.F {
		case txn.Append:
			st.list, writes = append(st.list, m.Value), true
		case txn.Write:
			st.val, st.found, writes = m.Value, true, true
		default:
			if list {
				m.List = slices.Clone(st.list)
			} else {
				m.Value, m.Found = st.val, st.found
			}
			m.Done = true
		}
	}
	if !writes && !always {
		return nil
	}
	_, err := c.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		if !writes {
			p.Ping(ctx)
		}
		for _, m := range t {
			switch m.F {
			case txn.Append:
				p.RPush(ctx, s.t.key(m.Key), m.Value)
			case txn.Write:
				p.Set(ctx, s.t.key(m.Key), m.Value, 0)
			}
		}
		return nil
	})
	if errors.Is(err, goredis.TxFailedErr) {
		return err
	}
	return Classify(err)
}

// script runs t as one call of txnScript.
func (s *txnSession) script(ctx context.Context, t txn.Txn) (txn.Txn, int, error) {
	keys := make([]string, len(t))
	args := make([]any, 0, 2*len(t))
	for i, m := range t {
		keys[i] = s.t.key(m.Key)
		f := string(m.F)
		if m.IsRead() && s.t.model == workloads.ListAppend {
			f = "rl"
		}
		args = append(args, f, m.Value)
	}
	res, err := txnScript.Run(ctx, s.client, keys, args...).Slice()
	if err != nil {
		return nil, 0, Classify(err)
	}
	if len(res) != len(t) {
		return nil, 0, workloads.Unknown(fmt.Errorf("redis: the script answered %d results for %d micro-ops", len(res), len(t)), "garbage")
	}
	for i := range t {
		m := &t[i]
		if !m.IsRead() {
			continue
		}
		m.Done = true
		switch v := res[i].(type) {
		case nil:
			if s.t.model == workloads.ListAppend {
				m.List = []int64{}
			}
		case []any:
			m.List = make([]int64, 0, len(v))
			for _, e := range v {
				n, err := strconv.ParseInt(fmt.Sprint(e), 10, 64)
				if err != nil {
					return nil, 0, workloads.Unknown(fmt.Errorf("redis: key %d holds %v, not an integer", m.Key, e), "garbage")
				}
				m.List = append(m.List, n)
			}
		case string:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, 0, workloads.Unknown(fmt.Errorf("redis: key %d holds %q, not an integer", m.Key, v), "garbage")
			}
			m.Value, m.Found = n, true
		default:
			return nil, 0, workloads.Unknown(fmt.Errorf("redis: the script answered %T for a read", v), "garbage")
		}
	}
	return t, 0, nil
}
