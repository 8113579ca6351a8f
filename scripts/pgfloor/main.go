// Command pgfloor is the floor scripts/bench-budget-pg reads indoubt's PostgreSQL figure
// against: the budget's conditional UPDATE from N goroutines for a fixed time, through
// pgx with the pool indoubt's postgres adapter builds, and nothing of the harness around
// it (no history, no retry policy, no metrics, no progress, no report).
//
// Each goroutine holds one pooled connection, prepares the statement under its own text
// (Bind/Execute/Sync per call, as the adapter and pgbench -M prepared send it) and
// executes it until the time is up, with a context that can be cancelled, as indoubt's
// is (signal-aware): pgx watches every call's context only when it can be cancelled.
// An UPDATE that changes no row is an error: the floor measures the statement applying.
//
// It prints one line: the calls completed and the seconds they took.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/scripts/internal/floor"
	"github.com/indoubt/indoubt/stores/postgres"
)

func main() {
	dsn := flag.String("dsn", "", "PostgreSQL DSN")
	clients := flag.Int("clients", 16, "goroutines, each holding its own connection")
	d := flag.Duration("time", 10*time.Second, "how long to call")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole command to this file")
	flag.Parse()
	if *dsn == "" || *clients < 1 || *d <= 0 {
		fmt.Fprintln(os.Stderr, "usage: pgfloor -dsn DSN [-clients N] [-time D] [-cpuprofile FILE]")
		os.Exit(3)
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "pgfloor:", err)
			os.Exit(3)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, took, err := run(ctx, *dsn, *clients, *d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pgfloor:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	fmt.Printf("%d calls in %.3f s\n", n, took.Seconds())
}

// run opens the pool as postgres.Open does, has clients goroutines execute the
// decrement until d has passed, and returns the calls completed and the time from the
// first to the last.
func run(ctx context.Context, dsn string, clients int, d time.Duration) (int64, time.Duration, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return 0, 0, err
	}
	// postgres.Open's settings: up to 64 connections, none kept idle, no health check.
	pc.MaxConns, pc.MinConns, pc.HealthCheckPeriod = 64, 0, time.Hour
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	conns := make([]*pgxpool.Conn, 0, clients)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range clients {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return 0, 0, err
		}
		conns = append(conns, c)
		if _, err := c.Conn().Prepare(ctx, postgres.DecrementSQL, postgres.DecrementSQL); err != nil {
			return 0, 0, err
		}
		// One call before the clock starts, so every connection has done one.
		if err := decrement(ctx, c); err != nil {
			return 0, 0, err
		}
	}
	calls := make([]func() error, len(conns))
	for i, c := range conns {
		calls[i] = func() error { return decrement(ctx, c) }
	}
	return floor.Run(calls, d)
}

var errNoRow = errors.New("the decrement changed no row: is the balance positive?")

func decrement(ctx context.Context, c *pgxpool.Conn) error {
	tag, err := c.Conn().Exec(ctx, postgres.DecrementSQL)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errNoRow
	}
	return nil
}
