// Package postgres is the PostgreSQL adapter (pgx v5 pool). It implements the budget
// workload's Store with the stand's mechanism, one conditional UPDATE
//
//	UPDATE indoubt_account SET balance = balance - 1 WHERE id = 1 AND balance > 0
//
// whose rows-affected count tells applied (1) from rejected (0), either as an autocommit
// statement or inside an explicit BEGIN/COMMIT, and an idempotent path that records the
// op id in the same transaction as the effect.
//
// Errors follow the contract of package workloads: an error the server answered
// (*pgconn.PgError) is definite, except 40001 and 40P01 (conflict) and 40003
// (statement_completion_unknown: unknown, with workloads.ReasonServerUnknown); any other
// error after which pgx cannot say the request was never sent (!pgconn.SafeToRetry) is
// unknown.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/workloads"
)

// Mechanism selects how a decrement is committed.
type Mechanism string

const (
	// Autocommit sends the conditional UPDATE alone; the server commits it implicitly.
	Autocommit Mechanism = "autocommit"
	// Transaction wraps it in BEGIN ... COMMIT.
	Transaction Mechanism = "transaction"
)

// Config configures a Client.
type Config struct {
	// DSN is a libpq connection string or URL.
	DSN string
	// Mechanism is Autocommit (default) or Transaction.
	Mechanism Mechanism
	// MaxConns bounds the pool; 0 means 64.
	MaxConns int32
	// Dial, when set, dials every connection (pgx's DialFunc): from a given local
	// address, for example. nil: pgx's own dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is a pool of connections to one PostgreSQL database. It is safe for concurrent
// use; each Session holds one of its connections.
type Client struct {
	pool *pgxpool.Pool
	mech Mechanism
}

// Open connects and checks that the server answers. An unreachable server is a definite
// error that names the address.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Mechanism == "" {
		cfg.Mechanism = Autocommit
	}
	if _, err := choice.Parse("mechanism", cfg.Mechanism, Autocommit, Transaction); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	pc, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", redactErr(err))
	}
	if cfg.Dial != nil {
		pc.ConnConfig.DialFunc = cfg.Dial
	}
	pc.MaxConns = cfg.MaxConns
	if pc.MaxConns <= 0 {
		pc.MaxConns = 64
	}
	pc.MinConns = 0
	// A pool health check would ping connections in the background and blur which
	// connection an operation used; sessions detect broken connections themselves.
	pc.HealthCheckPeriod = time.Hour
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", redactErr(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: connect %s:%d: %w", pc.ConnConfig.Host, pc.ConnConfig.Port, redactErr(err))
	}
	return &Client{pool: pool, mech: cfg.Mechanism}, nil
}

// redactErr folds pgx's multi-line connect errors (one line per address tried) into
// one line; pgx already keeps passwords out of them.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	return redact.Reword(err, strings.Join(strings.Fields(err.Error()), " "))
}

// Close closes every connection.
func (c *Client) Close() { c.pool.Close() }

// Pool exposes the pool for workloads of this package's other files and for tests.
func (c *Client) Pool() *pgxpool.Pool { return c.pool }

// Exec runs one statement on any connection; for setup.
func (c *Client) Exec(ctx context.Context, sql string, args ...any) error {
	_, err := c.pool.Exec(ctx, sql, args...)
	return Classify(err)
}

// session is one worker's connection, reacquired when it breaks.
type session struct {
	pool *pgxpool.Pool
	conn *pgxpool.Conn
	addr string
}

func (s *session) acquire(ctx context.Context) (*pgx.Conn, error) {
	if s.conn != nil && s.conn.Conn().IsClosed() {
		// Destroy rather than return it: the pool would hand a dead connection out again.
		s.conn.Hijack().Close(context.Background())
		s.conn = nil
	}
	if s.conn == nil {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			return nil, workloads.Definite(fmt.Errorf("acquire connection: %w", err), workloads.ReasonDial)
		}
		s.conn = c
		s.addr = localAddr(c.Conn())
	}
	return s.conn.Conn(), nil
}

func localAddr(c *pgx.Conn) string {
	nc := c.PgConn().Conn()
	if nc == nil {
		return ""
	}
	if a, ok := nc.LocalAddr().(*net.TCPAddr); ok {
		return a.String()
	}
	return nc.LocalAddr().String()
}

// Conn returns the local address of the session's connection.
func (s *session) Conn() string { return s.addr }

// Close returns the connection to the pool, or destroys it if it broke.
func (s *session) Close() error {
	if s.conn == nil {
		return nil
	}
	if s.conn.Conn().IsClosed() {
		s.conn.Hijack().Close(context.Background())
	} else {
		s.conn.Release()
	}
	s.conn = nil
	return nil
}

// Classify applies the error contract of package workloads to an error from pgx.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001":
			return workloads.Conflict(err, workloads.ReasonSerialization)
		case "40P01":
			return workloads.Conflict(err, workloads.ReasonDeadlock)
		case "40003":
			return workloads.Unknown(err, workloads.ReasonServerUnknown)
		}
		return workloads.Definite(err, workloads.ServerCode(pgErr.Code))
	}
	if errors.Is(err, workloads.ErrUnknown) || errors.Is(err, workloads.ErrConflict) {
		return err
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		// Nothing of an operation is sent before the connection is established.
		return workloads.Definite(redactErr(err), workloads.ReasonDial)
	}
	if pgconn.SafeToRetry(err) {
		return workloads.Definite(err, reasonOf(err))
	}
	return workloads.Unknown(err, reasonOf(err))
}

// reasonOf names an error pgx raised without a server's answer. pgx does not always
// wrap the network error it met, so its texts are read where the chain says nothing.
func reasonOf(err error) workloads.Reason {
	if pgconn.Timeout(err) {
		return workloads.ReasonTimeout
	}
	if r := workloads.NetReason(err); r != "" {
		return r
	}
	switch msg := err.Error(); {
	case errors.Is(err, pgconn.ErrConnClosed), strings.Contains(msg, "conn closed"), strings.Contains(msg, "EOF"):
		return workloads.ReasonConnClosed
	case strings.Contains(msg, "connection reset"):
		return workloads.ReasonConnReset
	case strings.Contains(msg, "connect"):
		return workloads.ReasonDial
	}
	return workloads.ReasonConnLost
}
