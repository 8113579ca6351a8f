// Package etcd is indoubt's store adapter for etcd v3, through the official client
// (go.etcd.io/etcd/client/v3): the register workload (Put and Get, compare-and-set by
// a Txn that compares the value) and the budget workload (a decrement by a Txn that
// compares the balance's mod revision).
//
// Reads are linearizable by default: etcd confirms with the leader (ReadIndex) that
// the member serving the read has applied everything committed when the read arrived.
// With Reads set to Serializable they are served by whichever member the client
// reaches from its own state, without that round: a follower cut off from the leader,
// or behind it, answers with what it has. That is etcd's documented trade, and the
// register's linearizability checker names the stale reads it gives.
//
// Every Session is a client of its own (one gRPC connection per member it reaches), as
// Jepsen's etcd test gives every worker its own: a worker's requests go to the
// members its DSN names and nowhere else. Writes and compare-and-sets are Txns
// proposed through Raft: acknowledged once committed by a majority.
//
// The error contract (package workloads): an error before anything was sent is
// definite; a Txn refused before it was proposed (too many requests, a request too
// large, a Raft proposal dropped for want of a leader) is definite; etcd's own "request
// timed out" errors say the proposal may yet commit and are unknown with
// ReasonServerUnknown; a lost connection, a gRPC Unavailable and a deadline are
// unknown; a lost compare (the balance moved under a decrement) is a conflict.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/indoubt/indoubt/workloads"
)

// Reads is how a register read is served.
type Reads string

// The read modes.
const (
	// Linearizable reads (etcd's default) are confirmed by the leader: they see every
	// write acknowledged before they began.
	Linearizable Reads = "linearizable"
	// Serializable reads are served from the local state of the member reached, with
	// no round to the leader: they may be stale.
	Serializable Reads = "serializable"
)

// ReadModes lists the read modes, for flags and tables.
var ReadModes = []Reads{Linearizable, Serializable}

// DefaultTimeout bounds one request when Config.Timeout is 0: a request to a member
// cut off from the majority waits this long and is then unknown.
const DefaultTimeout = 5 * time.Second

// Config configures Open.
type Config struct {
	// Endpoints are the members' client addresses, host:port.
	Endpoints []string
	// Reads is Linearizable (also "") or Serializable.
	Reads Reads
	// Prefix is the key prefix of every key the adapter writes; "" means "indoubt".
	Prefix string
	// Timeout bounds each request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Dial, when set, opens the TCP connections to the members (a dialer bound to a
	// source address, in a topology with a network of its own).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// ParseDSN reads an etcd DSN: etcd://HOST:PORT[/PREFIX][?addr=HOST:PORT...&reads=MODE],
// the first member in the host, the others in addr (in that order), MODE linearizable
// or serializable.
func ParseDSN(dsn string) (Config, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "etcd" || u.Host == "" {
		return Config{}, fmt.Errorf("etcd dsn: want etcd://host:port[/prefix][?addr=host:port...&reads=linearizable|serializable]")
	}
	c := Config{Endpoints: []string{u.Host}, Prefix: strings.Trim(u.Path, "/")}
	q := u.Query()
	for k := range q {
		switch k {
		case "addr", "reads":
		default:
			return Config{}, fmt.Errorf("etcd dsn: unknown parameter %q (want addr, reads)", k)
		}
	}
	c.Endpoints = append(c.Endpoints, q["addr"]...)
	for _, e := range c.Endpoints {
		if _, port, err := net.SplitHostPort(e); err != nil || port == "" {
			return Config{}, fmt.Errorf("etcd dsn: member %q is not host:port", e)
		}
	}
	if q.Has("reads") {
		c.Reads = Reads(q.Get("reads"))
		if c.Reads != Linearizable && c.Reads != Serializable {
			return Config{}, fmt.Errorf("etcd dsn: reads=%q: want linearizable or serializable", c.Reads)
		}
	}
	return c, nil
}

// DSN writes the DSN of endpoints (the first in the host) with reads, as ParseDSN reads
// it; "" reads leaves the parameter out.
func DSN(endpoints []string, reads Reads) string {
	q := url.Values{}
	for _, e := range endpoints[1:] {
		q.Add("addr", e)
	}
	if reads != "" {
		q.Set("reads", string(reads))
	}
	s := "etcd://" + endpoints[0] + "/"
	if len(q) > 0 {
		s += "?" + q.Encode()
	}
	return s
}

// Client is an open adapter: the configuration, and the client of the harness's own
// requests (Reset, the budget's Balance). Sessions have clients of their own.
type Client struct {
	cfg    Config
	prefix string
	admin  *clientv3.Client
}

// Open checks cfg and connects the admin client, and returns once a member answered.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd: no endpoints")
	}
	switch cfg.Reads {
	case "":
		cfg.Reads = Linearizable
	case Linearizable, Serializable:
	default:
		return nil, fmt.Errorf("etcd: reads %q: want linearizable or serializable", cfg.Reads)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	c := &Client{cfg: cfg, prefix: cfg.Prefix}
	if c.prefix == "" {
		c.prefix = "indoubt"
	}
	admin, _, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.admin = admin
	// A first request, so that a wrong address fails here rather than in the run.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := admin.Get(rctx, c.prefix+"/", clientv3.WithCountOnly()); err != nil {
		admin.Close()
		return nil, fmt.Errorf("etcd: %s: %w", strings.Join(cfg.Endpoints, ","), Classify(err))
	}
	return c, nil
}

// Reads returns the read mode of the sessions.
func (c *Client) Reads() Reads { return c.cfg.Reads }

// Close closes the admin client.
func (c *Client) Close() error { return c.admin.Close() }

// connTracker records the local address of the last connection a client dialled.
type connTracker struct {
	mu   sync.Mutex
	addr string
}

func (t *connTracker) get() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.addr
}

// dial makes a client of the configured members with its own connections, which it
// opens with cfg.Dial when set, and records in the returned tracker.
func (c *Client) dial(ctx context.Context) (*clientv3.Client, *connTracker, error) {
	if err := workloads.Start(ctx); err != nil {
		return nil, nil, err
	}
	tr := &connTracker{}
	dial := c.cfg.Dial
	if dial == nil {
		d := &net.Dialer{}
		dial = d.DialContext
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.cfg.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			if _, rest, ok := strings.Cut(addr, "://"); ok {
				addr = rest
			}
			conn, err := dial(ctx, "tcp", addr)
			if err == nil {
				tr.mu.Lock()
				tr.addr = conn.LocalAddr().String()
				tr.mu.Unlock()
			}
			return conn, err
		})},
	})
	if err != nil {
		return nil, nil, workloads.Definite(fmt.Errorf("etcd: %w", err), workloads.ReasonDial)
	}
	return cli, tr, nil
}

// session is one worker's client.
type session struct {
	c   *Client
	cli *clientv3.Client
	tr  *connTracker
}

func (c *Client) newSession(ctx context.Context) (*session, error) {
	cli, tr, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	return &session{c: c, cli: cli, tr: tr}, nil
}

// Conn returns the local address of the connection the session's client opened last.
func (s *session) Conn() string { return s.tr.get() }

// Close closes the session's client.
func (s *session) Close() error { return s.cli.Close() }

// reqCtx bounds one request by the configured timeout.
func (s *session) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.c.cfg.Timeout)
}

// readOpts are the options of a register read: serializable when configured.
func (s *session) readOpts() []clientv3.OpOption {
	if s.c.cfg.Reads == Serializable {
		return []clientv3.OpOption{clientv3.WithSerializable()}
	}
	return nil
}

// Classify wraps an error of the etcd client under the contract of package workloads,
// with the reason it names; see the package comment for the classes.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return workloads.Unknown(err, workloads.NetReason(err))
	}
	// The client's typed errors first: etcd's own words.
	switch rpctypes.Error(err) {
	case rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrTimeoutWaitAppliedIndex:
		// The proposal may still commit: etcd says it does not know.
		return workloads.Unknown(err, workloads.ReasonServerUnknown)
	case rpctypes.ErrTooManyRequests:
		return workloads.Definite(err, workloads.ServerCode("too-many-requests"))
	case rpctypes.ErrRequestTooLarge:
		return workloads.Definite(err, workloads.ServerCode("request-too-large"))
	case rpctypes.ErrNoLeader:
		// Refused by the member before the request was proposed (a write is proposed
		// without waiting for a leader; only a read waits for one and gives up so).
		return workloads.Definite(err, workloads.ServerCode("no-leader"))
	case rpctypes.ErrLeaderChanged:
		// A linearizable read's index round lost its leader: nothing was written, but
		// for a write it would be unknown, and this code says nothing of which.
		return workloads.Unknown(err, workloads.ServerCode("leader-changed"))
	case rpctypes.ErrStopped:
		return workloads.Unknown(err, workloads.ServerCode("stopped"))
	}
	st, ok := status.FromError(err)
	if !ok {
		if r := workloads.NetReason(err); r != "" {
			return workloads.Unknown(err, r)
		}
		return workloads.Unknown(err, workloads.ReasonUnknown)
	}
	msg := st.Message()
	switch st.Code() {
	case codes.DeadlineExceeded:
		return workloads.Unknown(err, workloads.ReasonTimeout)
	case codes.Canceled:
		return workloads.Unknown(err, workloads.ReasonCanceled)
	case codes.Unavailable:
		// Not sent: no connection was ready to carry it.
		if strings.Contains(msg, "Error while dialing") || msg == "there is no address available" || msg == "there is no connection available" {
			return workloads.Definite(err, workloads.ReasonDial)
		}
		return workloads.Unknown(err, workloads.ReasonConnLost)
	case codes.Unknown:
		// etcd's raft drops a proposal it cannot forward (no leader): never in the log.
		if strings.Contains(msg, "raft proposal dropped") {
			return workloads.Definite(err, workloads.ServerCode("proposal-dropped"))
		}
		return workloads.Unknown(err, workloads.ReasonUnknown)
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition, codes.OutOfRange, codes.ResourceExhausted:
		return workloads.Definite(err, workloads.ServerCode(strings.ToLower(st.Code().String())))
	}
	return workloads.Unknown(err, workloads.ReasonUnknown)
}
