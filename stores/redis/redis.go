// Package redis is the Redis adapter: the budget workload as one Lua script that checks
// and decrements on the server, and per-key registers with CAS as a Lua script.
//
// With Config.MasterName the adapter reaches Redis through Sentinel: every client is
// go-redis's failover client, which asks the Sentinels where the primary is whenever it
// dials, so after a failover the workload carries on against the promoted replica.
//
// Each session is its own go-redis client with a pool of exactly one connection, so a
// worker's operations and their retries run on one TCP connection while it survives, and
// the session's Conn is the local address the proxy sees. Scripts run with EVALSHA and
// fall back to EVAL when the server does not know them (NOSCRIPT).
//
// Idempotent operations record their op id inside the same script as the effect, in a
// hash beside the data (op id -> outcome), so a replay finds the original outcome. Scripts
// are atomic on the server: nothing else runs between the check and the write.
//
// Keys, with the default prefix "indoubt": the budget is {indoubt:budget}:balance with its
// op ids in {indoubt:budget}:ops; register k is indoubt:register:{k} with its op ids in
// indoubt:register:{k}:ops. The hash tags keep each script's keys in one cluster slot.
package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/indoubt/indoubt/workloads"
)

// Config says how to reach Redis and how the client behaves.
type Config struct {
	// Addr is the server's host:port. Required unless MasterName is set.
	Addr string
	// Password authenticates with AUTH when not empty.
	Password string
	// MasterName, when set, reaches the server through Redis Sentinel: the client asks
	// the Sentinels at SentinelAddrs which server is the primary named MasterName, and
	// asks again when it loses its connection (go-redis's failover client), so that
	// after a failover it writes to the promoted replica. Addr is not used then.
	MasterName    string
	SentinelAddrs []string
	// SentinelPassword authenticates with the Sentinels when not empty.
	SentinelPassword string
	// DB is the logical database selected on connect.
	DB int
	// KeyPrefix starts every key the adapter touches; "" means "indoubt". It must not
	// hold glob characters (*?[]\), because Reset finds register keys by pattern.
	KeyPrefix string
	// DriverRetry leaves go-redis's own retries at their defaults (MaxRetries 3: a command
	// that fails with EOF, a timeout or LOADING/READONLY/TRYAGAIN is sent again, and dials
	// are retried 5 times). When false the adapter turns them off (MaxRetries -1, one dial
	// attempt), so every attempt the caller sees is one request on the wire.
	DriverRetry bool
	// Timeout bounds each command's read and write on the socket; 0 keeps go-redis's
	// default (3 s). A context deadline applies as well.
	Timeout time.Duration
	// Dial, when set, dials every connection, to the servers and the Sentinels alike
	// (go-redis's Dialer): from a given local address, for example. nil: a
	// net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is an open adapter. It implements budget.Store; Register returns the register
// store over the same server. Client is safe for concurrent use; its sessions are not.
type Client struct {
	cfg    Config
	prefix string
	bkeys  []string // budgetKeys
	admin  *goredis.Client
}

// Open checks the configuration and that the server answers PING. The client it returns
// uses its own small pool for Reset and Balance; sessions dial their own connections.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	switch {
	case cfg.MasterName == "" && cfg.Addr == "":
		return nil, errors.New("open redis: no address")
	case cfg.MasterName != "" && len(cfg.SentinelAddrs) == 0:
		return nil, fmt.Errorf("open redis: master %q: no Sentinel address", cfg.MasterName)
	}
	silenceDriverLog()
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = "indoubt"
	}
	if strings.ContainsAny(prefix, `*?[]\`) {
		return nil, fmt.Errorf("open redis: key prefix %q holds glob characters", prefix)
	}
	c := &Client{cfg: cfg, prefix: prefix, bkeys: budgetKeysOf(prefix)}
	opts := c.options(cfg.Dial)
	opts.PoolSize = 2
	c.admin = c.newClient(opts)
	if err := c.admin.Ping(ctx).Err(); err != nil {
		c.admin.Close()
		return nil, fmt.Errorf("open redis %s: %w", c.where(), err)
	}
	return c, nil
}

// where names the server for errors: its address, or the master and its Sentinels.
func (c *Client) where() string {
	if c.cfg.MasterName == "" {
		return c.cfg.Addr
	}
	return fmt.Sprintf("master %q (Sentinels %s)", c.cfg.MasterName, strings.Join(c.cfg.SentinelAddrs, ","))
}

// newClient returns a client for one server with o or, with MasterName, a failover
// client with the same settings that finds the primary through the Sentinels.
func (c *Client) newClient(o *goredis.Options) *goredis.Client {
	if c.cfg.MasterName == "" {
		return goredis.NewClient(o)
	}
	return goredis.NewFailoverClient(&goredis.FailoverOptions{
		MasterName: c.cfg.MasterName, SentinelAddrs: c.cfg.SentinelAddrs, SentinelPassword: c.cfg.SentinelPassword,
		Dialer: o.Dialer, Password: o.Password, DB: o.DB,
		MaxRetries: o.MaxRetries, DialerRetries: o.DialerRetries,
		ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, ContextTimeoutEnabled: o.ContextTimeoutEnabled,
		PoolSize: o.PoolSize, MaxActiveConns: o.MaxActiveConns, MinIdleConns: o.MinIdleConns,
		PipelinePoolSize: o.PipelinePoolSize, DisableIdentity: o.DisableIdentity,
	})
}

// Close closes the client's pool. Sessions are closed by their owners.
func (c *Client) Close() error { return c.admin.Close() }

// options builds go-redis options; dial, when not nil, replaces the dialer.
func (c *Client) options(dial func(ctx context.Context, network, addr string) (net.Conn, error)) *goredis.Options {
	o := &goredis.Options{
		Addr:                  c.cfg.Addr,
		Password:              c.cfg.Password,
		DB:                    c.cfg.DB,
		Dialer:                dial,
		ContextTimeoutEnabled: true,
		ReadTimeout:           c.cfg.Timeout,
		WriteTimeout:          c.cfg.Timeout,
		// Keep the handshake to HELLO (and AUTH/SELECT when configured): fewer frames
		// for the proxy's parsers, and no probing of features Redis 7.0 lacks.
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	if !c.cfg.DriverRetry {
		o.MaxRetries = -1
		o.DialerRetries = 1
	}
	return o
}

// session is one worker's connection: a go-redis client whose pool holds at most one
// connection, dialed through a dialer that remembers its local address.
type session struct {
	c      *Client
	client *goredis.Client
	addr   atomic.Pointer[string]
}

func (c *Client) newSession(ctx context.Context) (*session, error) {
	s := &session{c: c}
	var d net.Dialer
	dial := d.DialContext
	if c.cfg.Dial != nil {
		dial = c.cfg.Dial
	}
	opts := c.options(func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		// A failover client dials the Sentinels with the same dialer: only the data
		// node's connection is the session's.
		if !slices.Contains(c.cfg.SentinelAddrs, addr) {
			local := conn.LocalAddr().String()
			s.addr.Store(&local)
		}
		return conn, nil
	})
	// One connection, never more: no overflow beyond the pool and no separate pipeline
	// pool, so every command of this session shares one TCP connection.
	opts.PoolSize = 1
	opts.MaxActiveConns = 1
	opts.MinIdleConns = 0
	opts.PipelinePoolSize = -1
	s.client = c.newClient(opts)
	// Dial now, so the first operation's invocation already has a connection to name.
	if err := s.client.Ping(ctx).Err(); err != nil {
		s.client.Close()
		return nil, fmt.Errorf("redis session: %w", Classify(err))
	}
	return s, nil
}

// Conn returns the local address of the connection last dialed, which is the one the
// last call used unless that call had to dial a new one.
func (s *session) Conn() string {
	if p := s.addr.Load(); p != nil {
		return *p
	}
	return ""
}

// Close closes the session's connection.
func (s *session) Close() error { return s.client.Close() }

// Classify wraps an error from go-redis in the contract of package workloads:
//   - a reply error from the server (script error, NOSCRIPT, WRONGTYPE, LOADING ...) is
//     definite: the command did not run, or our scripts failed before writing; the
//     reason is the error's first word;
//   - a dial error, a pool timeout or a closed client are definite: nothing was sent;
//   - a cut connection (a bare io.EOF is what a cut reply looks like), a reset, a broken
//     pipe, a timeout or a context ended during the call are unknown;
//   - anything else is unknown.
//
// Classify returns nil for nil and never wraps redis.Nil, which callers handle first.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		return workloads.Definite(err, replyReason(rerr.Error()))
	}
	var opErr *net.OpError
	switch {
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return workloads.Definite(err, workloads.ReasonDial)
	case errors.Is(err, goredis.ErrPoolTimeout):
		return workloads.Definite(err, "pool-timeout")
	case errors.Is(err, goredis.ErrClosed):
		return workloads.Definite(err, workloads.ReasonClientClosed)
	}
	return workloads.Unknown(err, workloads.NetReason(err))
}

// replyReason is the error code Redis puts first in an error reply ("NOSCRIPT", "ERR").
func replyReason(msg string) workloads.Reason {
	code, _, _ := strings.Cut(msg, " ")
	if code == "" {
		return "reply-error"
	}
	return workloads.ServerCode(code)
}
