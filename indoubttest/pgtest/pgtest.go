// Package pgtest gives a test a PostgreSQL database of its own behind indoubt's
// commit-aware proxy. It links pgx and nothing of the other stores.
//
//	func TestCharges(t *testing.T) {
//		srv := pgtest.Postgres(t)        // a fresh database; srv.DSN goes through the proxy
//		srv.Arm("commit-cut:0.2")        // cut 20% of the replies that prove a commit
//		...
//	}
//
// The server is launched once per test binary from PostgreSQL's installed binaries
// (/usr/lib/postgresql/*/bin, or INDOUBT_PG_BIN), or is the one INDOUBT_POSTGRES_DSN
// names; every test gets a database created for it and dropped after it, and touches no
// other (CREATE DATABASE refuses a name that exists, so a test never drops a database
// it did not create). Call
// indoubttest.Main from TestMain to stop a launched server when the tests end; without
// it, the server ends with the test binary. Where PostgreSQL is not installed the test
// skips (fails under CI=true).
//
// INDOUBT_KEEP_DB=1 keeps each test's database, to look at the rows a verdict is about:
// the test's log names it, its DSN, and the statement that removes it. A launched
// server still stops with the tests, but keeps its data directory, which the log names
// with the commands that start the server on it again and remove it; on a server of
// your own (INDOUBT_POSTGRES_DSN) the database stays where it is.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/stores/postgres"
)

// EnvDSN names the environment variable that points the tests at an existing PostgreSQL
// instead of a launched one. Its user must be allowed to create databases.
const EnvDSN = "INDOUBT_POSTGRES_DSN"

// EnvKeep names the environment variable that keeps each test's database (and a
// launched server's data directory) when set to 1 or true.
const EnvKeep = "INDOUBT_KEEP_DB"

// keep reports whether EnvKeep asks to keep the databases.
func keep() bool {
	v, _ := strconv.ParseBool(os.Getenv(EnvKeep))
	return v
}

// launched describes the launched server's kept data directory for the log, "" when
// the server was not launched here or is not kept.
var launched atomic.Value // string

// server is the shared server; its Addr is an admin DSN.
var server = &serve.SharedServer{Env: EnvDSN, Timeout: 2 * time.Minute,
	Launch: func(ctx context.Context) (string, func() error, error) {
		pg, err := pgserver.Start(ctx, pgserver.Options{Keep: keep()})
		if err != nil {
			return "", nil, err
		}
		if keep() {
			launched.Store(fmt.Sprintf("the launched server stops with the tests and keeps its data directory %s: "+
				"start it again with %s -D %s -o '-p %d' -l %s start (user %s, password %s), remove it with rm -rf %s",
				pg.DataDir, filepath.Join(pg.BinDir, "pg_ctl"), pg.DataDir, pg.Port, filepath.Join(pg.Dir, "restart.log"),
				pgserver.User, pg.Password, pg.Dir))
		}
		return pg.DSN, pg.Stop, nil
	},
}

// Postgres returns a database of the test's own on the shared PostgreSQL, behind a
// commit-aware proxy, both gone when the test ends. srv.DSN reaches it through the
// proxy (sslmode=disable: the proxy reads the protocol), srv.DirectDSN without. The
// server's error rules are those of the stores/postgres adapter: an error the server
// answered is a failure, any other error after which pgx cannot say the request was
// never sent is unknown. opts configure the Server (indoubttest.Seed).
func Postgres(tb testing.TB, opts ...indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	admin := server.Need(tb, "pgtest: launch PostgreSQL")
	name := serve.DatabaseName(tb)
	drop := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
	var direct string
	dropAtEnd := drop
	if keep() {
		tb.Cleanup(func() {
			msg := fmt.Sprintf("pgtest: %s: kept database %s (%s); remove it with: %s", EnvKeep, name, redacted(direct), drop)
			if d, _ := launched.Load().(string); d != "" {
				msg += "; " + d
			}
			tb.Log(msg)
		})
		dropAtEnd = ""
	}
	serve.OwnDatabase(tb, "pgtest", func(ctx context.Context, stmt string) error { return exec(ctx, admin, stmt) },
		"CREATE DATABASE "+pgx.Identifier{name}.Sanitize(), dropAtEnd)
	direct, addr, err := withDatabase(admin, name)
	if err != nil {
		tb.Fatalf("pgtest: %s: %v", EnvDSN, err)
	}
	return serve.NewServer(tb, serve.Target{
		Store:      "postgres",
		DirectAddr: addr,
		DirectDSN:  direct,
		Database:   name,
		Protocol:   toxics.Postgres{},
		Options:    opts,
		Classify:   postgres.Classify,
	}).(*indoubttest.Server)
}

func exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns dsn naming database name, with sslmode=disable, and its host:port.
func withDatabase(dsn, name string) (string, string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" || u.Host == "" {
		return "", "", fmt.Errorf("want a URL postgres://user:password@host:port/db, got %q", redacted(dsn))
	}
	u.Path = "/" + name
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	addr := u.Host
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "5432")
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
