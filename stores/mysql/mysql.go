// Package mysql is the adapter for MySQL and MariaDB (go-sql-driver/mysql through
// database/sql). It implements the budget workload's Store with one conditional UPDATE
//
//	UPDATE indoubt_account SET balance = balance - 1 WHERE id = 1 AND balance > 0
//
// whose affected rows tell applied (1) from rejected (0), prepared once per connection
// and executed either as an autocommit statement or inside START TRANSACTION ... COMMIT,
// and an idempotent path that records the op id in the same transaction as the effect.
// The register, the counter (NewCounter), insert (Client.PrepareInsert), the bank
// (NewBank) and the transactional workloads (NewTxns) are in this package's other files.
//
// Errors follow the contract of package workloads: an error the server answered
// (*mysql.MySQLError) is definite, except 1213 (deadlock, also Galera's certification
// failure) and 1205 (lock wait timeout), which are conflicts: the server rolled the
// statement or transaction back, and 1180 (an error during COMMIT), which is unknown: on
// Galera such a commit was seen to take effect. driver.ErrBadConn is definite: this driver returns it
// only when nothing of the request was written. Any other error after the request was
// written (mysql.ErrInvalidConn, which the driver returns for a connection lost while
// it waits for the reply, an I/O error, a timeout) is unknown.
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
)

// Mechanism selects how a decrement is committed.
type Mechanism string

const (
	// Autocommit sends the conditional UPDATE alone; the server commits it at once.
	Autocommit Mechanism = "autocommit"
	// Transaction wraps it in START TRANSACTION ... COMMIT.
	Transaction Mechanism = "transaction"
)

// Config configures a Client.
type Config struct {
	// DSN is a mysql:// URL (mysql://user:password@host:port/database?param=value) or a
	// go-sql-driver DSN (user:password@tcp(host:port)/database?param=value). Parameters
	// are go-sql-driver's.
	DSN string
	// Mechanism is Autocommit (default) or Transaction.
	Mechanism Mechanism
	// Dial, when set, dials every connection: from a given local address, for example.
	// nil: the driver's own dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Client is a set of connections to one MySQL or MariaDB database. It is safe for
// concurrent use; each Session holds one connection of its own.
type Client struct {
	db   *sql.DB
	mech Mechanism
}

// ParseDSN reads a mysql:// URL or a go-sql-driver DSN into the driver's Config. The
// error never holds the password.
func ParseDSN(dsn string) (*mysql.Config, error) {
	if !strings.HasPrefix(dsn, "mysql://") && !strings.HasPrefix(dsn, "mariadb://") {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, errors.New("not a mysql:// URL or a go-sql-driver DSN")
		}
		return cfg, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, errors.New("not a mysql:// URL")
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if u.RawQuery == "" {
		return cfg, nil
	}
	// The driver reads its parameters from its own DSN form: let it parse them there.
	base := cfg.FormatDSN()
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	withParams, err := mysql.ParseDSN(base + sep + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("parameters: %v", redactParams(err, cfg.Passwd))
	}
	return withParams, nil
}

// redactParams keeps a password out of the driver's parse error.
func redactParams(err error, password string) string {
	if password == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), password, "REDACTED")
}

// Open connects and checks that the server answers. An unreachable server is a definite
// error that names the address.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Mechanism == "" {
		cfg.Mechanism = Autocommit
	}
	if _, err := choice.Parse("mechanism", cfg.Mechanism, Autocommit, Transaction); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	mc, err := ParseDSN(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("mysql: parse dsn: %w", err)
	}
	dial := cfg.Dial
	if dial == nil {
		d := net.Dialer{Timeout: 10 * time.Second}
		dial = d.DialContext
	}
	// Every connection is dialed for one session, which learns its local address
	// through the slot its context carries.
	mc.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			if slot, ok := ctx.Value(addrSlot{}).(*string); ok {
				*slot = c.LocalAddr().String()
			}
		}
		return c, err
	}
	mc.Logger = quiet{}
	// Affected rows count the rows a statement matched, not only those it changed: a
	// CAS whose from and to are equal, or a write of the value a row holds, still
	// reports its row.
	mc.ClientFoundRows = true
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	// No idle connections: a session's connection is its own, dialed for it, and
	// closed with it, so the slot above always names it.
	db.SetMaxIdleConns(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: connect %s: %w", mc.Addr, Classify(err))
	}
	return &Client{db: db, mech: cfg.Mechanism}, nil
}

// addrSlot is the context key of the local address a dial writes for its session.
type addrSlot struct{}

// quiet discards the driver's log lines: every error it logs is also returned.
type quiet struct{}

func (quiet) Print(...any) {}

// Close closes every connection.
func (c *Client) Close() error { return c.db.Close() }

// DB exposes the connections for workloads of this package's other files and for tests.
func (c *Client) DB() *sql.DB { return c.db }

// Exec runs statements on a connection of their own; for setup.
func (c *Client) Exec(ctx context.Context, query string, args ...any) error {
	_, err := c.db.ExecContext(ctx, query, args...)
	return Classify(err)
}

// session is one worker's connection, dialed again when it breaks.
type session struct {
	db   *sql.DB
	conn *sql.Conn
	addr string
	// broken: the last error left the connection unusable; the next call dials anew.
	broken bool
}

func (s *session) acquire(ctx context.Context) (*sql.Conn, error) {
	if s.conn != nil && s.broken {
		_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = s.conn.Close()
		s.conn = nil
	}
	if s.conn == nil {
		var addr string
		c, err := s.db.Conn(context.WithValue(ctx, addrSlot{}, &addr))
		if err != nil {
			return nil, workloads.Definite(fmt.Errorf("acquire connection: %w", err), workloads.ReasonDial)
		}
		s.conn, s.addr, s.broken = c, addr, false
	}
	return s.conn, nil
}

// fail classifies err and marks the connection broken when the error was not the
// server's answer.
func (s *session) fail(err error) error {
	var me *mysql.MySQLError
	if err != nil && !errors.As(err, &me) {
		s.broken = true
	}
	return Classify(err)
}

// Conn returns the local address of the session's connection.
func (s *session) Conn() string { return s.addr }

// Close closes the session's connection.
func (s *session) Close() error {
	if s.conn == nil {
		return nil
	}
	if s.broken {
		_ = s.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	err := s.conn.Close()
	s.conn = nil
	if errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) {
		return nil
	}
	return err
}

// Server error numbers the contract names.
const (
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
	// ER_ERROR_DURING_COMMIT: the server met an error while committing. Galera answers
	// it to a COMMIT on a node cut from the primary component while its writeset was
	// being replicated ("Error while appending streaming replication fragment"), and
	// the rest of the cluster may have applied that writeset: unknown.
	erErrorDuringCommit = 1180
	// Client-side codes of libmysqlclient, in errors relayed from other clients.
	crServerGone = 2006
	crServerLost = 2013
)

// Classify applies the error contract of package workloads to an error from the driver.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if workloads.Classify(err) != workloads.ClassDefinite || workloads.ReasonOf(err) != workloads.ReasonError {
		// Classified already (an unknown, a conflict, or a definite failure with its
		// reason): kept.
		return err
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case erLockDeadlock:
			return workloads.Conflict(err, workloads.ReasonDeadlock)
		case erLockWaitTimeout:
			return workloads.Conflict(err, workloads.ServerCode(strconv.Itoa(erLockWaitTimeout)))
		case crServerGone, crServerLost:
			return workloads.Unknown(err, workloads.ReasonConnLost)
		case erErrorDuringCommit:
			return workloads.Unknown(err, workloads.ServerCode(strconv.Itoa(erErrorDuringCommit)))
		}
		return workloads.Definite(err, workloads.ServerCode(strconv.Itoa(int(me.Number))))
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		// Nothing of an operation is sent before the connection is established.
		return workloads.Definite(err, workloads.ReasonDial)
	}
	if errors.Is(err, driver.ErrBadConn) {
		// The driver's promise: nothing of the request was written.
		return workloads.Definite(err, workloads.ReasonNotSent)
	}
	if r := workloads.NetReason(err); r != "" {
		return workloads.Unknown(err, r)
	}
	if errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, sql.ErrConnDone) {
		return workloads.Unknown(err, workloads.ReasonConnLost)
	}
	if errors.Is(err, mysql.ErrMalformPkt) || errors.Is(err, mysql.ErrPktSync) || errors.Is(err, mysql.ErrPktSyncMul) {
		return workloads.Unknown(err, workloads.ReasonBadReply)
	}
	return workloads.Unknown(err, workloads.ReasonConnLost)
}
