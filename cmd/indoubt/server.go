package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/stores/redis"
)

const serverHelp = `indoubt server: launch a throwaway local server and keep it up until Ctrl-C.

It prints the server's DSN and address as shell assignments, so a script or an
application under test can reach it (and 'indoubt run --dsn' or 'indoubt proxy
--upstream' can share it). The server accepts no client without its password, random
for each launch, which is in the DSN and in PASSWORD (for PGPASSWORD, or redis-cli's
REDISCLI_AUTH, or MariaDB's MYSQL_PWD). The data directory is removed when it stops. For Redis it
also loads the budget's decrement script and prints its SHA and keys, so a reference
client such as redis-benchmark can run the very script indoubt runs.

Usage: indoubt server [flags]

Example:
  indoubt server --store postgres
  # DSN=postgres://indoubt:PASSWORD@127.0.0.1:41234/indoubt?sslmode=disable
  # ADDR=127.0.0.1:41234
  # PASSWORD=PASSWORD
  # BINDIR=/usr/lib/postgresql/15/bin
  indoubt server --store redis --persistence always
  indoubt server --store mysql
  # DSN=mysql://indoubt:PASSWORD@127.0.0.1:41235/indoubt, HOST, PORT, USER, DATABASE too
`

func serverCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("server", serverHelp, stdout)
	store := fs.String("store", string(runner.Postgres), "which server: postgres, redis, mysql (MariaDB)")
	persistence := fs.String("persistence", "none", "redis: none, everysec, always")
	pgVersion := fs.String("pg-version", "", "postgres: 15, 18 (scripts/prepare-postgres18) or a directory of its binaries (default: INDOUBT_PG_VERSION, INDOUBT_PG_BIN, else the installed one)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("server: unexpected argument %q", fs.Arg(0))
	}
	var exited <-chan struct{}
	var logPath string
	switch runner.StoreName(*store) {
	case runner.Postgres:
		pg, err := postgres.Start(ctx, postgres.Options{Version: *pgVersion})
		if err != nil {
			return err
		}
		defer pg.Stop()
		fmt.Fprintf(stdout, "DSN=%s\nADDR=%s\nPASSWORD=%s\nBINDIR=%s\nPID=%d\n", pg.DSN, pg.Addr, pg.Password, pg.BinDir, pg.Pid())
		exited, logPath = pg.Exited(), pg.LogPath
	case runner.Redis:
		rs, err := redisserver.Start(ctx, redisserver.Options{Persistence: *persistence})
		if err != nil {
			return err
		}
		defer rs.Stop()
		c, err := redis.Open(ctx, redis.Config{Addr: rs.Addr, Password: rs.Password})
		if err != nil {
			return err
		}
		sha, keys, err := c.LoadBudgetScript(ctx)
		c.Close()
		if err != nil {
			return fmt.Errorf("server: load the budget script: %v", err)
		}
		fmt.Fprintf(stdout, "DSN=%s\nADDR=%s\nHOST=127.0.0.1\nPORT=%d\nPASSWORD=%s\nBUDGET_SHA=%s\nBUDGET_KEYS='%s'\nPID=%d\n",
			rs.DSN, rs.Addr, rs.Port, rs.Password, sha, strings.Join(keys, " "), rs.Pid())
		exited, logPath = rs.Exited(), rs.LogPath
	case runner.MySQL:
		// The options indoubt run --store mysql launches with, so that a reference
		// client measures the same server.
		m, err := mariadb.Start(ctx, mariadb.Options{})
		if err != nil {
			return err
		}
		defer m.Stop()
		fmt.Fprintf(stdout, "DSN=%s\nADDR=%s\nHOST=127.0.0.1\nPORT=%d\nUSER=%s\nPASSWORD=%s\nDATABASE=%s\nPID=%d\n",
			m.DSN, m.Addr, m.Port, m.User, m.Password, m.Database, m.Pid())
		exited, logPath = m.Exited(), m.LogPath
	default:
		return fmt.Errorf("server: unknown --store %q (want postgres, redis or mysql)", *store)
	}
	if f, ok := stdout.(interface{ Sync() error }); ok {
		f.Sync()
	}
	select {
	case <-ctx.Done():
	case <-exited:
		return fmt.Errorf("server: %s exited; see %s", *store, logPath)
	}
	return nil
}
