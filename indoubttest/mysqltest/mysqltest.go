// Package mysqltest gives a test a MySQL or MariaDB database of its own behind
// indoubt's commit-aware proxy. It links go-sql-driver/mysql and nothing of the other
// stores.
//
//	func TestCharges(t *testing.T) {
//		srv := mysqltest.MySQL(t)                // a fresh database; srv.DSN goes through the proxy
//		db, _ := sql.Open("mysql", mysqltest.DriverDSN(t, srv.DSN))
//		srv.Arm("commit-cut:0.2")                // cut 20% of the replies that prove a commit
//		...
//	}
//
// The server is launched once per test binary (Debian's mariadb-server), or is the one
// INDOUBT_MYSQL_DSN names (mysql://user:password@host:port/, a user allowed to create
// databases); every test gets a database created for it and dropped after it, and
// touches no other (CREATE DATABASE refuses a name that exists, so a test never drops a
// database it did not create). Call indoubttest.Main from TestMain to stop a launched
// server when the tests end; without it, the server ends with the test binary. Where
// MariaDB is not installed the test skips (fails under CI=true). Clients of the proxy
// connect without TLS (go-sql-driver's default): the proxy reads the protocol.
package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	mysqlstore "github.com/indoubt/indoubt/stores/mysql"
)

// EnvDSN names the environment variable that points the tests at an existing MySQL or
// MariaDB instead of a launched one. Its user must be allowed to create databases.
const EnvDSN = "INDOUBT_MYSQL_DSN"

var server = &serve.SharedServer{Env: EnvDSN, Timeout: 2 * time.Minute,
	Launch: func(ctx context.Context) (string, func() error, error) {
		m, err := mariadb.Start(ctx, mariadb.Options{})
		if err != nil {
			return "", nil, err
		}
		return m.DSN, m.Stop, nil
	},
}

// MySQL returns a database of the test's own on the shared server, behind a
// commit-aware proxy, both gone when the test ends. srv.DSN (a mysql:// URL) reaches it
// through the proxy, srv.DirectDSN without; DriverDSN turns either into
// go-sql-driver's form. The error rules are those of the stores/mysql adapter: 1213 and
// 1205 are conflicts, another error the server answered is a failure, a connection
// lost after the request is unknown. opts configure the Server (indoubttest.Seed).
func MySQL(tb testing.TB, opts ...indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	admin := server.Need(tb, "mysqltest: launch MariaDB")
	name := serve.DatabaseName(tb)
	serve.OwnDatabase(tb, "mysqltest", func(ctx context.Context, stmt string) error { return exec(ctx, admin, stmt) },
		"CREATE DATABASE `"+name+"`", "DROP DATABASE IF EXISTS `"+name+"`")
	direct, addr, err := withDatabase(admin, name)
	if err != nil {
		tb.Fatalf("mysqltest: %s: %v", EnvDSN, err)
	}
	return serve.NewServer(tb, serve.Target{
		Store:      "mysql",
		DirectAddr: addr,
		DirectDSN:  direct,
		Database:   name,
		Protocol:   toxics.MySQL{},
		Options:    opts,
		Classify:   mysqlstore.Classify,
	}).(*indoubttest.Server)
}

// DriverDSN returns a mysql:// URL (srv.DSN, srv.DirectDSN) in go-sql-driver's form,
// user:password@tcp(host:port)/database, for sql.Open("mysql", ...).
func DriverDSN(tb testing.TB, dsn string) string {
	tb.Helper()
	cfg, err := mysqlstore.ParseDSN(dsn)
	if err != nil {
		tb.Fatalf("mysqltest: %v", err)
	}
	return cfg.FormatDSN()
}

func exec(ctx context.Context, dsn, query string) error {
	cfg, err := mysqlstore.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.Logger = log.New(io.Discard, "", 0)
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	_, err = db.ExecContext(ctx, query)
	return err
}

// withDatabase returns dsn naming database name, and its host:port.
func withDatabase(dsn, name string) (string, string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "mysql" && u.Scheme != "mariadb" || u.Host == "" {
		return "", "", fmt.Errorf("want a URL mysql://user:password@host:port/, got %q", redacted(dsn))
	}
	u.Path = "/" + name
	addr := u.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "3306")
	}
	return u.String(), addr, nil
}

func redacted(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unparseable)"
	}
	return u.Redacted()
}
