// Package cockroach is the CockroachDB adapter: the PostgreSQL adapter (CockroachDB
// speaks PostgreSQL's wire protocol, and pgx drives it unchanged) plus what is
// CockroachDB's own.
//
//   - SQLSTATE 40003 (statement_completion_unknown: "result is ambiguous") is the
//     server's own word that a commit's outcome is unknown. It is classified unknown
//     with workloads.ReasonServerUnknown, which the counter workload keeps as the
//     evidence that lets it attribute a counter above the acknowledged increments to
//     ambiguous commits, and nothing else does.
//   - SQLSTATE 40001 covers every transaction retry error (RETRY_WRITE_TOO_OLD,
//     RETRY_SERIALIZABLE, ...): a conflict, recognised by code, never by message.
//   - The server counts transaction restarts by reason (txn.restarts.writetooold,
//     .serializable, .txnpush, .txnaborted, .readwithinuncertainty, ...) in
//     crdb_internal.node_metrics. The counters are cumulative since the node started,
//     so RestartCounters is snapshotted before and after a run and reported as the
//     difference. They are the gateway node's (the one the DSN points at): node_metrics
//     is node-local. Server restarts and client retries are different quantities: the
//     server also counts restarts it retried internally, which the client never sees.
//
// No CockroachDB can be launched here: the adapter runs against a server given by its
// DSN (compose/ starts a three-node cluster where Docker is available).
package cockroach

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/indoubt/indoubt/stores/postgres"
	"github.com/indoubt/indoubt/workloads/counter"
)

// Config configures a Client.
type Config struct {
	// DSN is a URL such as postgresql://root@localhost:26257/defaultdb?sslmode=disable.
	DSN string
	// MaxConns bounds the pool; 0 means 64.
	MaxConns int32
}

// Client is a pool of connections to one CockroachDB node. It is safe for concurrent
// use.
type Client struct {
	pg      *postgres.Client
	version string
}

// Open connects, and refuses a server that is not CockroachDB: its restart counters and
// error codes are what this adapter adds, and they would silently be missing.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	pg, err := postgres.Open(ctx, postgres.Config{DSN: cfg.DSN, MaxConns: cfg.MaxConns})
	if err != nil {
		return nil, fmt.Errorf("cockroach: %w", err)
	}
	var v string
	if err := pg.Pool().QueryRow(ctx, `SELECT version()`).Scan(&v); err != nil {
		pg.Close()
		return nil, fmt.Errorf("cockroach: read server version: %w", postgres.Classify(err))
	}
	if !strings.Contains(v, "CockroachDB") {
		pg.Close()
		return nil, fmt.Errorf("cockroach: the server is not CockroachDB (version() = %q): use --store postgres", firstLine(v))
	}
	return &Client{pg: pg, version: v}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}

// Version is the server's version() string.
func (c *Client) Version() string { return c.version }

// Close closes every connection.
func (c *Client) Close() { c.pg.Close() }

// Postgres returns the PostgreSQL adapter underneath.
func (c *Client) Postgres() *postgres.Client { return c.pg }

// RestartCounters reads the gateway node's transaction restart counters
// (crdb_internal.node_metrics, names txn.restarts*), cumulative since the node started.
func (c *Client) RestartCounters(ctx context.Context) (map[string]int64, error) {
	rows, err := c.pg.Pool().Query(ctx, `SELECT name, value FROM crdb_internal.node_metrics WHERE name LIKE 'txn.restarts%'`)
	if err != nil {
		return nil, fmt.Errorf("cockroach: read restart counters: %w", postgres.Classify(err))
	}
	defer rows.Close()
	m := map[string]int64{}
	for rows.Next() {
		var name string
		var v float64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, fmt.Errorf("cockroach: read restart counters: %w", err)
		}
		m[name] = int64(math.Round(v))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cockroach: read restart counters: %w", postgres.Classify(err))
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("cockroach: crdb_internal.node_metrics has no txn.restarts counters")
	}
	return m, nil
}

// Counter is the PostgreSQL adapter's hot-row counter with the server's restart
// counters, which the counter workload snapshots before and after each run.
type Counter struct {
	*postgres.Counter
	c *Client
}

var (
	_ counter.Store           = (*Counter)(nil)
	_ counter.RestartCounters = (*Counter)(nil)
)

// Counter returns the hot-row counter on c.
func (c *Client) Counter(cfg postgres.CounterConfig) (*Counter, error) {
	k, err := postgres.NewCounter(c.pg, cfg)
	if err != nil {
		return nil, fmt.Errorf("cockroach: %w", err)
	}
	return &Counter{Counter: k, c: c}, nil
}

// RestartCounters reads the gateway node's restart counters.
func (k *Counter) RestartCounters(ctx context.Context) (map[string]int64, error) {
	return k.c.RestartCounters(ctx)
}
