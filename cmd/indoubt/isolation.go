package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/isolation"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	mysqlstore "github.com/indoubt/indoubt/stores/mysql"
)

const isolationHelp = `indoubt isolation: measure Hermitage's table on PostgreSQL. For each isolation
level, the interleavings that provoke each anomaly (G0, G1a, G1b, G1c, OTV, PMP, P4,
G-single, G2-item, G2) are driven statement by statement over two or three sessions,
and the transactional checker judges what they did: per anomaly and level, prevented
(blocked on a lock, aborted with an SQLSTATE, or neither) or observed, with the cycle
that proves it. Then the random list-append workload runs at each level, for the cost
columns: committed transactions per second, latency, and serialization-failure and
deadlock aborts per committed transaction (retried, counted), the history checked for
the level's own model; and read-modify-write transactions on one hot key, checked for
serializability, which names what each level lets through (the lost updates of READ
COMMITTED, with their cycles) and prices what it prevents. A cell that differs from Hermitage's table is a finding, printed
with its statements. The measurement's directory holds isolation.json and
isolation.html (the table, each cell's cycle drawn and its statements).

Usage: indoubt isolation [--store postgres|mysql] [--dsn DSN | --pg-version 15|18] [flags]

With --store mysql the table is Hermitage's for MySQL/InnoDB, at its four levels
(read-uncommitted too), measured on a launched MariaDB or on the MySQL or MariaDB
--dsn names (mysql://user:password@host:port/database); the cost columns are
PostgreSQL's only.

Without --dsn a throwaway PostgreSQL is launched and stopped. The scenarios use a
table of their own (indoubt_hermitage); the random workload indoubt_append.

Example:
  indoubt isolation --pg-version 18
  indoubt isolation --dsn postgres://me@db/test --levels serializable --txns 500
  indoubt isolation --store mysql

Exit codes: 0 the table agrees with Hermitage's and every random run is valid,
1 a finding (a cell that differs, or a random run invalid for its level), 2 a random
run undecided, 3 could not run.
`

func isolationCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("isolation", isolationHelp, stdout)
	store := fs.String("store", "postgres", "the server family: postgres or mysql (MySQL, MariaDB)")
	dsn := fs.String("dsn", "", "the server to measure (default: launch one)")
	version := fs.String("pg-version", "", "the launched PostgreSQL's version: 15, 18 or a bin directory")
	levels := fs.String("levels", "read-committed,repeatable-read,serializable", "the levels, comma-separated")
	txns := fs.Int("txns", 100, "the random workload's transactions per worker at each level (0: no cost columns)")
	workers := fs.Int("workers", 4, "the random workload's workers")
	seed := fs.Int64("seed", 1, "the random workload's seed")
	out := fs.String("out", "runs", "directory under which the measurement's directory is made")
	asJSON := fs.Bool("json", false, "print the table as JSON (isolation.json) instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("isolation: unexpected argument %q (see indoubt isolation --help)", fs.Arg(0))
	}
	if *dsn != "" && *version != "" {
		return errors.New("isolation: --pg-version chooses a launched server's binaries; give it or --dsn, not both")
	}
	switch *store {
	case "postgres":
	case "mysql":
		if *version != "" {
			return errors.New("isolation: --pg-version is for --store postgres")
		}
		return isolationMySQL(ctx, *dsn, *levels, *out, *asJSON, stdout)
	default:
		return fmt.Errorf("isolation: --store: unknown store %q (want postgres or mysql)", *store)
	}
	var lv []isolation.Level
	for _, s := range strings.Split(*levels, ",") {
		l := isolation.Level(strings.TrimSpace(s))
		ok := false
		for _, k := range isolation.Levels {
			ok = ok || k == l
		}
		if !ok {
			return fmt.Errorf("isolation: --levels: unknown level %q (want read-committed, repeatable-read or serializable)", s)
		}
		lv = append(lv, l)
	}
	if *txns < 0 || *workers < 1 {
		return errors.New("isolation: --txns must be 0 or more and --workers 1 or more")
	}
	if *dsn == "" {
		srv, err := postgres.Start(ctx, postgres.Options{Version: *version})
		if err != nil {
			return fmt.Errorf("isolation: launch PostgreSQL: %w", err)
		}
		defer srv.Stop()
		*dsn = srv.DSN
	}
	name, err := serverName(ctx, *dsn)
	if err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	dir, err := isolationDir(*out, name)
	if err != nil {
		return err
	}
	tab, err := isolation.Measure(ctx, *dsn, lv)
	if err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	tab.Server = name
	if *txns > 0 {
		opt := isolation.CostOptions{Workers: *workers, TxnsPerWorker: *txns, Seed: *seed, Out: dir}
		tab.Costs, err = isolation.MeasureCost(ctx, *dsn, lv, opt)
		if err != nil {
			return fmt.Errorf("isolation: %w", err)
		}
		tab.Contention, err = isolation.MeasureContention(ctx, *dsn, lv, opt)
		if err != nil {
			return fmt.Errorf("isolation: %w", err)
		}
	}
	return writeIsolation(stdout, dir, tab, *asJSON)
}

// isolationDir makes the directory of one isolation measurement under out, named
// for the time and the server.
func isolationDir(out, server string) (string, error) {
	dir := filepath.Join(out, time.Now().UTC().Format("20060102T150405Z")+"-isolation-"+strings.ReplaceAll(strings.ToLower(server), " ", "-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("isolation: %w", err)
	}
	return dir, nil
}

// writeIsolation writes the table to dir as isolation.json and isolation.html, prints
// it (the JSON with asJSON, else the text and the two paths) and returns its verdict:
// invalid for a finding or an invalid cost run, else unknown for an unknown one.
func writeIsolation(stdout io.Writer, dir string, tab isolation.Table, asJSON bool) error {
	b, err := json.MarshalIndent(tab, "", "  ")
	if err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "isolation.json"), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	var page bytes.Buffer
	if err := tab.WritePage(&page); err != nil {
		return fmt.Errorf("isolation: page: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "isolation.html"), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	if asJSON {
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		fmt.Fprint(stdout, tab.Text())
		fmt.Fprintf(stdout, "\n%s\n%s\n", filepath.Join(dir, "isolation.json"), filepath.Join(dir, "isolation.html"))
	}
	code := exitValid
	for _, c := range tab.Costs {
		switch c.Verdict {
		case checker.Invalid:
			code = exitInvalid
		case checker.Unknown:
			if code == exitValid {
				code = exitUnknown
			}
		}
	}
	if len(tab.Findings()) > 0 {
		code = exitInvalid
	}
	if code != exitValid {
		return verdictExit{code}
	}
	return nil
}

// serverName is "PostgreSQL " and the server's version.
func serverName(ctx context.Context, dsn string) (string, error) {
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer c.Close(context.Background())
	var v string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	if i := strings.IndexByte(v, ' '); i > 0 {
		v = v[:i]
	}
	return "PostgreSQL " + v, nil
}

// isolationMySQL measures Hermitage's MySQL/InnoDB table on dsn, or on a launched
// MariaDB, and writes the measurement's directory as for PostgreSQL.
func isolationMySQL(ctx context.Context, dsn, levels, out string, asJSON bool, stdout io.Writer) error {
	var lv []isolation.Level
	if levels == "read-committed,repeatable-read,serializable" {
		lv = isolation.MySQLLevels
	} else {
		for _, s := range strings.Split(levels, ",") {
			l := isolation.Level(strings.TrimSpace(s))
			if !slices.Contains(isolation.MySQLLevels, l) {
				return fmt.Errorf("isolation: --levels: unknown level %q (want read-uncommitted, read-committed, repeatable-read or serializable)", s)
			}
			lv = append(lv, l)
		}
	}
	if dsn == "" {
		srv, err := mariadb.Start(ctx, mariadb.Options{})
		if err != nil {
			return fmt.Errorf("isolation: launch MariaDB: %w", err)
		}
		defer srv.Stop()
		dsn = srv.DSN
	}
	cfg, err := mysqlstore.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("isolation: --dsn: %w", err)
	}
	native := cfg.FormatDSN()
	name, err := mysqlServerName(ctx, native)
	if err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	dir, err := isolationDir(out, name)
	if err != nil {
		return err
	}
	tab, err := isolation.MeasureMySQL(ctx, native, lv)
	if err != nil {
		return fmt.Errorf("isolation: %w", err)
	}
	tab.Server = name
	return writeIsolation(stdout, dir, tab, asJSON)
}

// mysqlServerName is "MariaDB 10.11.19" or "MySQL 8.0.36", from the server's version.
func mysqlServerName(ctx context.Context, dsn string) (string, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "", fmt.Errorf("server version: %w", err)
	}
	family := "MySQL"
	if strings.Contains(v, "MariaDB") {
		family = "MariaDB"
	}
	v, _, _ = strings.Cut(v, "-")
	return family + " " + v, nil
}
