package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/servers"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
)

// exec --keep: the launched PostgreSQL stops with the run, as always, but keeps its data
// directory, so that a user can look at the rows the verdict is about; the run ends
// saying how to start a server on it again and how to remove it.

// checkKeep refuses --keep where there is no launched PostgreSQL to keep.
func (a *execArgs) checkKeep() error {
	switch {
	case !a.keep:
		return nil
	case a.dsn != "" || a.upstream != "":
		return fmt.Errorf("exec: --keep keeps the data of the PostgreSQL exec launches; with --dsn or --upstream the server is yours, and its data stays where it is")
	case a.store.name != runner.Postgres:
		return fmt.Errorf("exec: --keep keeps a launched PostgreSQL's data directory; for %s give --dsn, a server of your own", a.store.name)
	}
	return nil
}

// launchKept launches PostgreSQL as launchExecPostgres does, keeping its directory
// after it stops, and keeps in r.kept what to tell the user about it.
func (r *execRun) launchKept(ctx context.Context, dir string) (dsn, desc string, stop func() error, err error) {
	pg, err := pgserver.Start(ctx, pgserver.Options{LogPath: filepath.Join(dir, "postgres.log"), Keep: true})
	if err != nil {
		return "", "", nil, err
	}
	pgCtl := filepath.Join(pg.BinDir, "pg_ctl")
	if acct, err := servers.ServerAccount(); err == nil && os.Geteuid() == 0 && acct.Name != "" && acct.Name != "root" {
		// PostgreSQL refuses to run as root: the server ran as acct, and so must pg_ctl.
		pgCtl = "runuser -u " + acct.Name + " -- " + pgCtl
	}
	r.kept = []string{
		fmt.Sprintf("--keep: the server stopped and kept its data in %s; to look at it, start it again with", pg.DataDir),
		fmt.Sprintf("  %s -D %s -o '-p %d -k %s' -l %s start", pgCtl, pg.DataDir, pg.Port, pg.SocketDir, filepath.Join(pg.Dir, "kept.log")),
		fmt.Sprintf("  and connect to %s", pg.DSN),
		fmt.Sprintf("  then stop it with %s -D %s stop, and remove it with rm -rf %s", pgCtl, pg.DataDir, pg.Dir),
	}
	return pg.DSN, "launched PostgreSQL " + pg.Version + " at " + pg.Addr + " (kept)", pg.Stop, nil
}
