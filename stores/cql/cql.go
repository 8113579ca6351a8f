// Package cql is the Apache Cassandra (CQL) adapter, over gocql. Every operation goes
// through lightweight transactions (Paxos), the only linearizable path Cassandra has:
//
//   - budget: the stand's LWT loop. A SERIAL read of the balance, then
//     UPDATE ... SET balance = b-1 ... IF balance = b; a lost race returns the current
//     balance, and the loop tries again from it until it applies or finds 0. Each lost
//     race counts as one conflict in the outcome.
//   - register: reads at SERIAL consistency; CAS as UPDATE ... IF value = from; a plain
//     write is an LWT too (UPDATE ... IF EXISTS, or IF value = null for an absent
//     register), because Cassandra does not order plain writes with Paxos writes on the
//     same cells: a non-LWT write carries a client timestamp and can be lost behind, or
//     overtake, a Paxos round, which would break the register's linearizability.
//   - list-append and rw-register: one partition a transaction (single-key
//     transactions), a serial read of the key's state, then an UPDATE of the state the
//     transaction makes of it IF the state is still the one read, round after round
//     until one applies (see Txns).
//
// Idempotent operations record their op id as a clustering row of the same partition as
// the value (the value is a static column), written by the same LWT as the effect, so a
// retry that finds the row returns the original outcome instead of applying again.
// Schema, in the configured keyspace:
//
//	budget   (account text, op text, balance bigint static, after bigint, PRIMARY KEY (account, op))
//	register (key text, op text, value bigint static, PRIMARY KEY (key, op))
//	txn      (key text PRIMARY KEY, list list<bigint>, value bigint)
//
// Reset starts a fresh generation of partitions (the partition key carries it) instead of
// truncating: TRUNCATE does not clear Paxos state, and a proposal left in progress by an
// ambiguous commit of an earlier run could otherwise be completed into the new one.
//
// Each session is its own gocql session holding one connection (NumConns 1) to each host;
// its dialer watches the requests written on its connections, and Conn names the one
// that carried the latest request. gocql also keeps a control connection per session,
// recognised by the REGISTER request it sends, and never named by Conn.
//
// Errors follow the contract of package workloads; see Classify.
package cql

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/internal/redact"
)

// Config says how to reach the cluster and how the client behaves.
type Config struct {
	// Hosts are the nodes' host:port (port 9042 when omitted). Sessions connect to these
	// only: peers are not discovered, so a proxy in front of each node sees all traffic.
	Hosts []string
	// Keyspace holds the adapter's tables; "" means "indoubt". Reset creates it if missing.
	Keyspace string
	// Username and Password, when Username is set, answer a cluster that asks for
	// authentication (PasswordAuthenticator); a cluster that does not ask ignores them.
	Username, Password string
	// Replication is the replication map of a keyspace Reset creates; "" means
	// "{'class': 'SimpleStrategy', 'replication_factor': 1}".
	Replication string
	// Consistency is the consistency of LWT commits (Paxos learn phase); 0 means QUORUM.
	Consistency gocql.Consistency
	// SerialConsistency is the Paxos consistency of LWTs and the consistency of reads;
	// 0 means SERIAL (LOCAL_SERIAL is the other choice).
	SerialConsistency gocql.SerialConsistency
	// Timeout is gocql's client-side timeout per request; 0 keeps its default (11 s).
	Timeout time.Duration
	// ConnectTimeout bounds connection setup; 0 keeps gocql's default (11 s).
	ConnectTimeout time.Duration
	// Logger receives gocql's own log lines (connection failures, reconnects); nil
	// discards them, as library code must not write to the process's output.
	Logger gocql.StdLogger
	// DriverRetry leaves gocql's retry and reconnection settings as gocql.NewCluster sets
	// them. In gocql v1.7.0 the default RetryPolicy is nil (no retries) and statements
	// are not idempotent (no speculative execution), so this changes nothing today; it
	// exists so that the "driver" retry policy means "whatever the driver does". When
	// false the adapter sets RetryPolicy to nil itself, so each attempt the caller sees
	// is one request on the wire, and tries a node marked down again every second
	// instead of gocql's 60 s (ReconnectInterval), so that a restarted node is used
	// again as soon as it serves.
	DriverRetry bool
	// Dial, when set, dials every connection to the nodes (gocql's Dialer): from a
	// given local address, for example. nil: a net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// dialFunc is a Dial as gocql's Dialer.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (f dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

var keyspaceName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,47}$`)

// ParseDSN reads "cql://[user:password@]host1:9042,host2:9042/keyspace?consistency=quorum
// &serial=serial&timeout=5s&replication={...}" into a Config (username= and password=
// parameters also give the credentials). Only the hosts are required. Its errors never
// quote a secret of dsn (net/url's errors quote the text they refused).
func ParseDSN(dsn string) (Config, error) {
	cfg, err := parseDSN(dsn)
	return cfg, redact.Error(err, dsn)
}

func parseDSN(dsn string) (Config, error) {
	scheme, rest, ok := strings.Cut(dsn, "://")
	if !ok || (scheme != "cql" && scheme != "cassandra") {
		return Config{}, errors.New("cql dsn: want cql://host:port[,host:port...]/keyspace?options")
	}
	// net/url refuses a comma-separated host list, so the hosts are cut off first.
	hosts := rest
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		hosts, rest = rest[:i], rest[i:]
	} else {
		rest = ""
	}
	u, err := url.Parse("cql://hosts" + rest)
	if err != nil {
		return Config{}, fmt.Errorf("cql dsn: %w", err)
	}
	var cfg Config
	// The user info ends at the last '@' of the host list, as net/url reads a URL's
	// authority: a raw '@' in the password stays in the password.
	if at := strings.LastIndexByte(hosts, '@'); at >= 0 {
		user, pw, _ := strings.Cut(hosts[:at], ":")
		hosts = hosts[at+1:]
		if cfg.Username, err = url.PathUnescape(user); err != nil {
			return Config{}, errors.New("cql dsn: the user name has a bad percent escape")
		}
		if cfg.Password, err = url.PathUnescape(pw); err != nil {
			return Config{}, errors.New("cql dsn: the password has a bad percent escape")
		}
	}
	for _, h := range strings.Split(hosts, ",") {
		if h != "" {
			cfg.Hosts = append(cfg.Hosts, h)
		}
	}
	if len(cfg.Hosts) == 0 {
		return Config{}, errors.New("cql dsn: no hosts")
	}
	cfg.Keyspace = strings.Trim(u.Path, "/")
	q := u.Query()
	if v := q.Get("consistency"); v != "" {
		if err := cfg.Consistency.UnmarshalText([]byte(strings.ToUpper(v))); err != nil {
			return Config{}, fmt.Errorf("cql dsn: consistency %q: %w", v, err)
		}
	}
	if v := q.Get("serial"); v != "" {
		if err := cfg.SerialConsistency.UnmarshalText([]byte(strings.ToUpper(v))); err != nil {
			return Config{}, fmt.Errorf("cql dsn: serial %q: %w", v, err)
		}
	}
	if v := q.Get("timeout"); v != "" {
		if cfg.Timeout, err = time.ParseDuration(v); err != nil {
			return Config{}, fmt.Errorf("cql dsn: timeout: %w", err)
		}
	}
	if v := q.Get("username"); v != "" {
		cfg.Username = v
	}
	if q.Has("password") {
		cfg.Password = q.Get("password")
	}
	cfg.Replication = q.Get("replication")
	cfg.DriverRetry, _ = strconv.ParseBool(q.Get("driver_retry"))
	return cfg, nil
}

// Client is an open adapter. It implements budget.Store; Register returns the register
// store over the same cluster. Client is safe for concurrent use; its sessions are not.
type Client struct {
	cfg   Config
	admin *gocql.Session
	// beside is set on a client made by Beside: its admin is its leader's.
	beside bool

	*generationState
}

// generationState is the data of the latest Reset, shared by a client and those Beside it.
type generationState struct {
	mu        sync.Mutex
	account   string // the budget partition of the current generation, "" before Reset
	registers string // the prefix of register partitions of the current generation
	txns      string // the prefix of the transactional workloads' partitions
}

// Open checks the configuration and connects an administrative session (for Reset and
// Balance). It does not need the keyspace to exist: Reset creates it.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if len(cfg.Hosts) == 0 {
		return nil, errors.New("open cql: no hosts")
	}
	if cfg.Keyspace == "" {
		cfg.Keyspace = "indoubt"
	}
	if !keyspaceName.MatchString(cfg.Keyspace) {
		return nil, fmt.Errorf("open cql: keyspace %q is not a plain CQL name", cfg.Keyspace)
	}
	if cfg.Replication == "" {
		cfg.Replication = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
	}
	if cfg.Consistency == 0 {
		cfg.Consistency = gocql.Quorum
	}
	if cfg.SerialConsistency == 0 {
		cfg.SerialConsistency = gocql.Serial
	}
	c := &Client{cfg: cfg, generationState: &generationState{}}
	var adminDialer gocql.Dialer
	if cfg.Dial != nil {
		adminDialer = dialFunc(cfg.Dial)
	}
	admin, err := c.cluster(adminDialer).CreateSession()
	if err != nil {
		return nil, fmt.Errorf("open cql %s: %w", strings.Join(cfg.Hosts, ","), err)
	}
	c.admin = admin
	if err := ctx.Err(); err != nil {
		admin.Close()
		return nil, fmt.Errorf("open cql: %w", err)
	}
	return c, nil
}

// Close closes the administrative session. Sessions are closed by their owners. On a
// client made by Beside it does nothing: the session is c's.
func (c *Client) Close() {
	if !c.beside {
		c.admin.Close()
	}
}

// Beside returns a client of the same keyspace and data as c (the account and
// registers of c's latest Reset, made before or after), whose sessions connect to
// hosts and dial with dial (nil: a net.Dialer): the clients that stand beside another
// node of a ring, coordinating through it. Reset and Balance on it go through c's
// administrative session. It opens no connection itself.
func (c *Client) Beside(hosts []string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *Client {
	cfg := c.cfg
	cfg.Hosts, cfg.Dial = append([]string(nil), hosts...), dial
	return &Client{cfg: cfg, admin: c.admin, beside: true, generationState: c.generationState}
}

// cluster builds the gocql configuration; dialer, when not nil, replaces gocql's.
func (c *Client) cluster(dialer gocql.Dialer) *gocql.ClusterConfig {
	cl := gocql.NewCluster(c.cfg.Hosts...)
	// Protocol v4 is the highest gocql v1.7.0 speaks; fixing it skips the extra
	// connection gocql otherwise opens to discover the version.
	cl.ProtoVersion = 4
	cl.NumConns = 1
	if c.cfg.Username != "" {
		cl.Authenticator = gocql.PasswordAuthenticator{Username: c.cfg.Username, Password: c.cfg.Password}
	}
	cl.Consistency = c.cfg.Consistency
	cl.SerialConsistency = c.cfg.SerialConsistency
	// Only the configured hosts: peers discovered from system.peers would be dialed
	// directly, around any proxy in front of the configured ones.
	cl.DisableInitialHostLookup = true
	cl.Events.DisableTopologyEvents = true
	if c.cfg.Timeout > 0 {
		cl.Timeout = c.cfg.Timeout
	}
	if c.cfg.ConnectTimeout > 0 {
		cl.ConnectTimeout = c.cfg.ConnectTimeout
	}
	if !c.cfg.DriverRetry {
		cl.RetryPolicy = nil
		// gocql marks a host down once its pool cannot be refilled, and only tries it
		// again every ReconnectInterval (60 s by default): a node that restarted would
		// stay unused for up to a minute, answered with ErrNoConnections.
		cl.ReconnectInterval = reconnectInterval
	}
	if dialer != nil {
		cl.Dialer = dialer
	}
	cl.Logger = c.cfg.Logger
	if cl.Logger == nil {
		cl.Logger = log.New(io.Discard, "", 0)
	}
	return cl
}

// table returns keyspace.name.
func (c *Client) table(name string) string { return c.cfg.Keyspace + "." + name }

// ensureSchema creates the keyspace and its tables if they are missing.
func (c *Client) ensureSchema(ctx context.Context) error {
	stmts := []string{
		"CREATE KEYSPACE IF NOT EXISTS " + c.cfg.Keyspace + " WITH replication = " + c.cfg.Replication,
		"CREATE TABLE IF NOT EXISTS " + c.table("budget") +
			" (account text, op text, balance bigint static, after bigint, PRIMARY KEY (account, op))",
		"CREATE TABLE IF NOT EXISTS " + c.table("register") +
			" (key text, op text, value bigint static, PRIMARY KEY (key, op))",
		"CREATE TABLE IF NOT EXISTS " + c.table("txn") + " (key text PRIMARY KEY, list list<bigint>, value bigint)",
	}
	for _, s := range stmts {
		if err := c.admin.Query(s).WithContext(ctx).Exec(); err != nil {
			return fmt.Errorf("schema: %w", Classify(err))
		}
	}
	return nil
}

// generation names a fresh set of partitions for Reset.
func generation() string { return strconv.FormatInt(time.Now().UnixNano(), 36) }

// session is one worker's gocql session, with the connections its dialer made.
type session struct {
	c     *Client
	gs    *gocql.Session
	conns *connTracker
}

func (c *Client) newSession(ctx context.Context) (*session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cql session: %w", err)
	}
	t := &connTracker{dial: c.cfg.Dial}
	gs, err := c.connect(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("cql session: %w", err)
	}
	return &session{c: c, gs: gs, conns: t}, nil
}

// connect creates a gocql session whose connections t dials, its connection setup
// bounded by ctx's deadline too.
func (c *Client) connect(ctx context.Context, t *connTracker) (*gocql.Session, error) {
	cl := c.cluster(t)
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d > 0 && d < cl.ConnectTimeout {
			cl.ConnectTimeout = d
		}
	}
	return cl.CreateSession()
}

// Conn returns the local address of the connection that carried the session's latest
// request, even when it has closed since (a cut connection is the one the failed call
// used); until the first request, the pool connection gocql opened for the session, or
// "" when there is none.
func (s *session) Conn() string { return s.conns.current() }

// Close closes the session's connections.
func (s *session) Close() error {
	s.gs.Close()
	return nil
}

// reconnectInterval is how often a session tries a node gocql marked down.
const reconnectInterval = time.Second

// noConnWait bounds how long an operation waits for gocql to replace a broken
// connection. gocql answers ErrNoConnections, without sending anything, while its pool
// refills in the background; the wait keeps that from failing the next operation.
const noConnWait = 5 * time.Second

// exec calls run (one gocql request) and returns its error, raw. It retries
// ErrNoConnections only: that error means nothing was sent, so sending now is still the
// first attempt. A context that has already ended is reported without sending.
func (s *session) exec(ctx context.Context, run func() error) error {
	if err := ctx.Err(); err != nil {
		return &notSentError{err}
	}
	deadline := time.Now().Add(noConnWait)
	for {
		err := run()
		if !errors.Is(err, gocql.ErrNoConnections) {
			return err
		}
		if time.Now().After(deadline) {
			s.reopen(ctx)
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reopen replaces the gocql session of s with a new one, unless the driver's own
// behaviour was asked for (DriverRetry). gocql v1.7.0 was seen keeping a session with
// no connection for good after its only node restarted ("no hosts available in the
// pool" until the run ended, while the node served), where a new session connects at
// once. A failed reopen keeps the old session, to be tried again on the next wait.
func (s *session) reopen(ctx context.Context) {
	if s.c.cfg.DriverRetry {
		return
	}
	gs, err := s.c.connect(ctx, s.conns)
	if err != nil {
		return
	}
	s.gs.Close()
	s.gs = gs
}

// connTracker is a gocql Dialer that watches the frames written on the connections it
// made, so that Conn can name the one that carries the session's requests.
//
// What gocql v1.7.0 does per session, with the configuration of cluster: it dials the
// control connection first (OPTIONS, STARTUP, a QUERY of system.local, then REGISTER for
// status and schema events) and only then, once that is set up, the pool's one connection
// to the host, which carries every request of the session. When a connection breaks,
// gocql hands the error to the waiting request before it closes the socket, then dials a
// replacement in the background; so by the time the caller asks, the broken connection
// may already be closed and its replacement open. Dial order therefore cannot say which
// connection the last call used; the frames written can. The control connection also
// sends QUERY frames (of system tables), which is why it is recognised by REGISTER and
// why queries of system tables never count as the session's requests.
type connTracker struct {
	d net.Dialer
	// dial replaces d when set (Config.Dial).
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	mu    sync.Mutex
	conns []*trackedConn // open ones, in dial order
	// last is the connection that carried the latest request of the session. It stays
	// after the connection closes: the call that used it may still be ending.
	last *trackedConn
}

func (t *connTracker) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := t.d.DialContext
	if t.dial != nil {
		dial = t.dial
	}
	c, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, t: t, local: c.LocalAddr().String()}
	t.mu.Lock()
	t.conns = append(t.conns, tc)
	t.mu.Unlock()
	return tc, nil
}

// current returns the connection that carried the session's latest request, open or
// not; before the first request, the newest open connection that is not the control
// connection, which is the pool's: gocql dials it after the control connection is set up.
func (t *connTracker) current() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last != nil {
		return t.last.local
	}
	for i := len(t.conns) - 1; i >= 0; i-- {
		if c := t.conns[i]; !c.control {
			return c.local
		}
	}
	return ""
}

func (t *connTracker) drop(c *trackedConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, x := range t.conns {
		if x == c {
			t.conns = append(t.conns[:i], t.conns[i+1:]...)
			return
		}
	}
}

func (t *connTracker) markControl(c *trackedConn) {
	t.mu.Lock()
	c.control = true
	if t.last == c {
		t.last = nil
	}
	t.mu.Unlock()
}

func (t *connTracker) carried(c *trackedConn) {
	t.mu.Lock()
	if !c.control {
		t.last = c
	}
	t.mu.Unlock()
}

// trackedConn watches the request frames gocql writes. gocql writes whole frames (its
// write coalescer hands each frame to Write on its own, since trackedConn offers no
// writev), so a frame header starts each Write: byte 0 is the version, with the bit 0x80
// clear on requests, byte 4 the opcode, and the body follows the 9-byte header.
type trackedConn struct {
	net.Conn
	t       *connTracker
	local   string
	control bool // guarded by t.mu
	once    sync.Once
}

// Request opcodes of the native protocol.
const (
	opQuery    = 0x07
	opExecute  = 0x0A
	opRegister = 0x0B
	opBatch    = 0x0D
)

func (c *trackedConn) Write(p []byte) (int, error) {
	if len(p) >= 9 && p[0]&0x80 == 0 {
		switch p[4] {
		case opRegister:
			c.t.markControl(c)
		case opExecute, opBatch:
			c.t.carried(c)
		case opQuery:
			if !readsSystemTable(p[9:]) {
				c.t.carried(c)
			}
		}
	}
	return c.Conn.Write(p)
}

// readsSystemTable reports whether a QUERY body is one of gocql's own queries of the
// system keyspace (host discovery on the control connection, schema agreement after a
// schema change); the adapter's statements never read it. The body starts with the
// statement as a [long string]: a 4-byte length, then the text.
func readsSystemTable(body []byte) bool {
	const prefix = "SELECT "
	if len(body) < 4 {
		return false
	}
	stmt := body[4:]
	if n := int(binary.BigEndian.Uint32(body)); n >= 0 && n < len(stmt) {
		stmt = stmt[:n]
	}
	return len(stmt) > len(prefix) && strings.EqualFold(string(stmt[:len(prefix)]), prefix) &&
		strings.Contains(string(stmt), " FROM system.")
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.t.drop(c) })
	return c.Conn.Close()
}
