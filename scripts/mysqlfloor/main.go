// Command mysqlfloor is the floor scripts/bench-budget-mysql reads indoubt's MariaDB
// figure against: the budget's conditional UPDATE from N goroutines for a fixed time,
// through go-sql-driver/mysql set up as indoubt's mysql adapter sets it up, and nothing
// of the harness around it (no history, no retry policy, no metrics, no progress, no
// report).
//
// Each goroutine holds one connection of its own. By default it prepares the statement
// once (COM_STMT_PREPARE) and executes it (COM_STMT_EXECUTE) until the time is up, as the
// adapter does; -text sends it as a text query (COM_QUERY) each time instead, as
// mysqlslap does. An UPDATE that matches no row is an error: the floor measures the
// statement applying.
//
// It prints one line: the calls completed and the seconds they took.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/scripts/internal/floor"
	mysqlstore "github.com/indoubt/indoubt/stores/mysql"
)

func main() {
	dsn := flag.String("dsn", "", "mysql:// URL or go-sql-driver DSN")
	clients := flag.Int("clients", 16, "goroutines, each holding its own connection")
	d := flag.Duration("time", 10*time.Second, "how long to call")
	text := flag.Bool("text", false, "send the statement as a text query (COM_QUERY), as mysqlslap does, instead of prepared")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole command to this file")
	flag.Parse()
	if *dsn == "" || *clients < 1 || *d <= 0 || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: mysqlfloor -dsn DSN [-clients N] [-time D] [-text] [-cpuprofile FILE]")
		os.Exit(3)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mysqlfloor:", err)
			os.Exit(3)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, took, err := run(ctx, *dsn, *clients, *d, *text)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mysqlfloor:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	fmt.Printf("%d calls in %.3f s\n", n, took.Seconds())
}

// run opens the connections as mysql.Open does (found rows, no idle connections kept),
// has clients goroutines execute the decrement until d has passed, and returns the
// calls completed and the time from the first to the last.
func run(ctx context.Context, dsn string, clients int, d time.Duration, text bool) (int64, time.Duration, error) {
	mc, err := mysqlstore.ParseDSN(dsn)
	if err != nil {
		return 0, 0, err
	}
	mc.ClientFoundRows = true
	conn, err := mysql.NewConnector(mc)
	if err != nil {
		return 0, 0, err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	db.SetMaxIdleConns(0)
	calls := make([]func() error, 0, clients)
	for range clients {
		c, err := db.Conn(ctx)
		if err != nil {
			return 0, 0, err
		}
		defer c.Close()
		call := func() error { return applied(c.ExecContext(ctx, mysqlstore.DecrementSQL)) }
		if !text {
			st, err := c.PrepareContext(ctx, mysqlstore.DecrementSQL)
			if err != nil {
				return 0, 0, err
			}
			defer st.Close()
			call = func() error { return applied(st.ExecContext(ctx)) }
		}
		// One call before the clock starts, so every connection has done one.
		if err := call(); err != nil {
			return 0, 0, err
		}
		calls = append(calls, call)
	}
	return floor.Run(calls, d)
}

var errNoRow = errors.New("the decrement matched no row: is the balance positive?")

func applied(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return errNoRow
	}
	return nil
}
