package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
)

// A program's store: indoubt exec runs a program of the user's in front of a store,
// through the fault proxy, and the program reaches it by the variables its drivers
// read. Store is the store table's row as such a program meets it: launched as indoubt
// run launches it, its DSN pointed at the proxy as indoubt run points it, and given to
// the program (backend.env). A row with env is a store exec serves; the API layers,
// http and grpc, are rows of their own (apis) with no server and no DSN: the proxy
// stands in front of a service the user runs.

// Store is a store (or an API layer) as indoubt exec serves it to a program.
type Store struct{ b backend }

// apis are the API layers: the proxy stands in front of a service, not a database, and
// its faults are response-cut (commit-cut) and request-drop (commit-drop). They name no
// store indoubt run has; indoubt exec and indoubt proxy reach them by name, the proxy
// by its aliases (schemes) too.
var apis = []backend{
	{name: "http", protocol: toxics.HTTP{}, env: apiEnv},
	{name: "grpc", schemes: []string{"h2c", "http2"}, protocol: toxics.HTTP2{}, env: apiEnv},
}

// ProgramStores are the stores indoubt exec serves, in the store table's order, then
// the API layers.
func ProgramStores() []Store {
	var out []Store
	for _, b := range append(slices.Clone(backends), apis...) {
		if b.env != nil {
			out = append(out, Store{b})
		}
	}
	return out
}

// ProgramStore returns the store indoubt exec serves by that name; ok is false for a
// name it does not serve.
func ProgramStore(name string) (s Store, ok bool) {
	for _, s := range ProgramStores() {
		if string(s.b.name) == name {
			return s, true
		}
	}
	return Store{}, false
}

// Name is the store's name.
func (s Store) Name() StoreName { return s.b.name }

// Protocol is the commit-aware toxics' protocol of the store's wire protocol.
func (s Store) Protocol() toxics.Protocol { return s.b.protocol }

// Launchable reports whether a throwaway server of the store can be launched: false
// for a store reached only by its DSN, and for an API layer.
func (s Store) Launchable() bool { return s.b.launch != nil && !s.b.dsnOnly }

// Keeps reports whether a launched server can keep its data after it stops (Launch's
// keep).
func (s Store) Keeps() bool { return s.b.keep != nil }

// SQL reports whether the final state can be read with a query (FinalSQL).
func (s Store) SQL() bool { return s.b.finalSQL != nil }

// Server is a server launched for a program.
type Server struct {
	// DSN is the server's own DSN, not through the proxy.
	DSN string
	// Desc says what was launched, where: "launched PostgreSQL 15.4 at 127.0.0.1:5432".
	Desc string
	// Stop stops the server (and removes its files unless kept).
	Stop func() error
	// Kept says, line by line, where a kept server's data is and how to start a server
	// on it again, stop it and remove it; nil unless kept.
	Kept []string
}

// Launch starts a throwaway server of the store, as indoubt run launches it with its
// defaults, its log files in dir. With keep, the server keeps its data after it stops
// (Keeps).
func (s Store) Launch(ctx context.Context, dir string, keep bool) (Server, error) {
	launch := func(ctx context.Context, dir string) (launched, error) {
		return s.b.launch(ctx, Config{Store: s.b.name}, dir)
	}
	switch {
	case keep && s.b.keep == nil:
		return Server{}, fmt.Errorf("a launched %s keeps no data", s.b.name)
	case keep:
		launch = s.b.keep
	case !s.Launchable():
		return Server{}, fmt.Errorf("no %s can be launched here", s.b.name)
	}
	l, err := launch(ctx, dir)
	if err != nil {
		return Server{}, err
	}
	return Server{DSN: l.dsn, Desc: "launched " + l.desc, Stop: l.stop, Kept: l.kept}, nil
}

// Upstream returns the host:port dsn points at, where the proxy forwards; an error for a
// DSN the proxy cannot stand in front of.
func (s Store) Upstream(dsn string) (string, error) {
	if s.b.addr == nil {
		return "", fmt.Errorf("%s has no DSN", s.b.name)
	}
	return s.b.addr(dsn)
}

// ProxyDSN returns dsn pointed at the proxy at addr, as indoubt run points its clients.
func (s Store) ProxyDSN(dsn, addr string) (string, error) {
	if s.b.rewrite == nil {
		return "", fmt.Errorf("%s has no DSN", s.b.name)
	}
	return s.b.rewrite(dsn, addr)
}

// Encrypted returns, for a DSN through the proxy whose connections may be inside TLS
// (where the proxy sees no commit), the setting that asks for it ("sslmode=require");
// "" when they are not.
func (s Store) Encrypted(proxied string) string {
	if _, ok := s.b.protocol.(toxics.Postgres); !ok {
		return ""
	}
	u, err := url.Parse(proxied)
	if err != nil {
		return ""
	}
	if m := u.Query().Get("sslmode"); m != "disable" {
		return "sslmode=" + m
	}
	return ""
}

// Env returns the variables that give a program the store: its DSN through the proxy
// (proxied; "" when there is none, in front of a service the user runs) and the
// proxy's address, as the store's drivers and clients read them.
func (s Store) Env(proxied, addr string) ([]string, error) {
	return s.b.env(proxied, addr)
}

// FinalSQL runs query on the server at dsn and returns its rows as model's final read
// (finalSQL in finalsql.go); an error for a store without SQL.
func (s Store) FinalSQL(ctx context.Context, dsn, query, model string) (json.RawMessage, error) {
	if s.b.finalSQL == nil {
		return nil, fmt.Errorf("%s has no SQL", s.b.name)
	}
	return s.b.finalSQL(ctx, dsn, query, model)
}

// pgEnv gives a PostgreSQL DSN as DATABASE_URL and libpq's variables (psql and every
// libpq client connect unchanged). Variables that would send libpq elsewhere
// (PGHOSTADDR, PGSERVICE) are the caller's to remove.
func pgEnv(proxied, addr string) ([]string, error) {
	return clientVars{host: "PGHOST", port: "PGPORT", user: "PGUSER", password: "PGPASSWORD",
		database: "PGDATABASE", sslmode: "PGSSLMODE"}.env(proxied, addr)
}

// mysqlEnv gives a MySQL DSN as DATABASE_URL and the variables the mysql and mariadb
// clients read (MYSQL_HOST, MYSQL_TCP_PORT, MYSQL_PWD), with MYSQL_USER and
// MYSQL_DATABASE for programs that read those.
func mysqlEnv(proxied, addr string) ([]string, error) {
	return clientVars{host: "MYSQL_HOST", port: "MYSQL_TCP_PORT", user: "MYSQL_USER", password: "MYSQL_PWD",
		database: "MYSQL_DATABASE"}.env(proxied, addr)
}

// clientVars names the variables a SQL client reads its connection from; sslmode ""
// is a client with no such variable.
type clientVars struct {
	host, port, user, password, database, sslmode string
}

// env gives the proxy's address in the host and port variables and, with a DSN, the
// DSN as DATABASE_URL and its user, password, database (and sslmode) in theirs.
func (v clientVars) env(proxied, addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	env := []string{v.host + "=" + host, v.port + "=" + port}
	if proxied == "" {
		return env, nil
	}
	u, err := url.Parse(proxied)
	if err != nil {
		return nil, err
	}
	env = append(env, "DATABASE_URL="+proxied)
	if u.User != nil {
		env = append(env, v.user+"="+u.User.Username())
		if pw, ok := u.User.Password(); ok {
			env = append(env, v.password+"="+pw)
		}
	}
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		env = append(env, v.database+"="+db)
	}
	if m := u.Query().Get("sslmode"); m != "" && v.sslmode != "" {
		env = append(env, v.sslmode+"="+m)
	}
	return env, nil
}

// urlEnv gives the DSN through the proxy in the variable name.
func urlEnv(name string) func(proxied, addr string) ([]string, error) {
	return func(proxied, _ string) ([]string, error) {
		if proxied == "" {
			return nil, nil
		}
		return []string{name + "=" + proxied}, nil
	}
}

// apiEnv gives a program the proxy's base URL, in front of the service it calls: a
// client reads INDOUBT_BASE_URL where it would read its API's address, with no
// HTTP_PROXY in the way.
func apiEnv(_, addr string) ([]string, error) {
	return []string{"INDOUBT_BASE_URL=http://" + addr}, nil
}

// launchKeptPostgres launches PostgreSQL as launchPostgres does with its defaults,
// keeping its data directory after it stops, and says how to look at it again.
func launchKeptPostgres(ctx context.Context, dir string) (launched, error) {
	pg, err := pgserver.Start(ctx, pgserver.Options{LogPath: filepath.Join(dir, "postgres.log"), Keep: true})
	if err != nil {
		return launched{}, err
	}
	pgCtl := filepath.Join(pg.BinDir, "pg_ctl")
	if acct, err := servers.ServerAccount(); err == nil && os.Geteuid() == 0 && acct.Name != "" && acct.Name != "root" {
		// PostgreSQL refuses to run as root: the server ran as acct, and so must pg_ctl.
		pgCtl = "runuser -u " + acct.Name + " -- " + pgCtl
	}
	kept := []string{
		fmt.Sprintf("--keep: the server stopped and kept its data in %s; to look at it, start it again with", pg.DataDir),
		fmt.Sprintf("  %s -D %s -o '-p %d -k %s' -l %s start", pgCtl, pg.DataDir, pg.Port, pg.SocketDir, filepath.Join(pg.Dir, "kept.log")),
		fmt.Sprintf("  and connect to %s", pg.DSN),
		fmt.Sprintf("  then stop it with %s -D %s stop, and remove it with rm -rf %s", pgCtl, pg.DataDir, pg.Dir),
	}
	return launched{dsn: pg.DSN, desc: "PostgreSQL " + pg.Version + " at " + pg.Addr + " (kept)", stop: pg.Stop, ctl: pg, kept: kept}, nil
}
