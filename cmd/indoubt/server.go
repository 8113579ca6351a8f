package main

import (
	"context"
	"fmt"
	"io"

	"github.com/indoubt/indoubt/servers"
)

const serverHelp = `indoubt server: launch a throwaway local server and keep it up until Ctrl-C.

It prints the server's DSN and address as shell assignments, so a script or an
application under test can reach it (and 'indoubt run --dsn' or 'indoubt proxy
--upstream' can share it). The data directory is removed when it stops.

Usage: indoubt server [flags]

Example:
  indoubt server --store postgres
  # DSN=postgres://indoubt@127.0.0.1:41234/indoubt?sslmode=disable
  # ADDR=127.0.0.1:41234
  # BINDIR=/usr/lib/postgresql/15/bin
`

func serverCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("server", serverHelp, stdout)
	store := fs.String("store", "postgres", "which server: postgres")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch *store {
	case "postgres":
		pg, err := servers.StartPostgres(ctx, servers.PostgresOptions{})
		if err != nil {
			return err
		}
		defer pg.Stop()
		fmt.Fprintf(stdout, "DSN=%s\nADDR=%s\nBINDIR=%s\nPID=%d\n", pg.DSN, pg.Addr, pg.BinDir, pg.Pid())
		if f, ok := stdout.(interface{ Sync() error }); ok {
			f.Sync()
		}
		select {
		case <-ctx.Done():
		case <-pg.Exited():
			return fmt.Errorf("server: postgres exited; see %s", pg.LogPath)
		}
		return nil
	}
	return fmt.Errorf("server: unknown --store %q (want postgres)", *store)
}
