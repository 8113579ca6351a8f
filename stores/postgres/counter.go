package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/counter"
)

var (
	_ counter.Store   = (*Counter)(nil)
	_ counter.Session = (*counterSession)(nil)
)

// CounterMechanism is how one increment of the hot counter is written.
type CounterMechanism string

const (
	// Increment lets the server compute the new value in one statement:
	// UPDATE ... SET hits = hits + 1 RETURNING hits.
	Increment CounterMechanism = "increment"
	// ReadWrite reads the value, then writes what it read plus one.
	ReadWrite CounterMechanism = "read-write"
	// ForUpdate reads the value with SELECT ... FOR UPDATE, locking the row, then writes
	// what it read plus one.
	ForUpdate CounterMechanism = "for-update"
)

// CounterMechanisms lists the mechanisms in the order --help shows them.
var CounterMechanisms = []CounterMechanism{Increment, ReadWrite, ForUpdate}

// Isolation is a transaction isolation level.
type Isolation string

// The levels, as --isolation spells them.
const (
	Serializable   Isolation = "serializable"    // SERIALIZABLE
	RepeatableRead Isolation = "repeatable-read" // REPEATABLE READ
	ReadCommitted  Isolation = "read-committed"  // READ COMMITTED
)

// Isolations lists the levels in the order --help shows them.
var Isolations = []Isolation{Serializable, RepeatableRead, ReadCommitted}

// sql is the level as BEGIN ISOLATION LEVEL spells it.
func (i Isolation) sql() string {
	switch i {
	case RepeatableRead:
		return "REPEATABLE READ"
	case ReadCommitted:
		return "READ COMMITTED"
	}
	return "SERIALIZABLE"
}

// shown is the level as SHOW transaction_isolation reports it, in PostgreSQL and in
// CockroachDB alike.
func (i Isolation) shown() string {
	switch i {
	case RepeatableRead:
		return "repeatable read"
	case ReadCommitted:
		return "read committed"
	}
	return "serializable"
}

// CounterConfig configures a Counter.
type CounterConfig struct {
	// Mechanism is Increment (default), ReadWrite or ForUpdate.
	Mechanism CounterMechanism
	// Isolation is Serializable (default), RepeatableRead or ReadCommitted.
	Isolation Isolation
}

// ErrIsolation is returned when the server runs a transaction at another isolation
// level than the one asked for: a proxy or pooler that rewrote it, or a server that
// upgrades a level it does not enable (CockroachDB runs REPEATABLE READ as SERIALIZABLE
// unless sql.txn.repeatable_read_isolation.enabled is set).
var ErrIsolation = errors.New("isolation level differs from the one asked for")

// counterSchema holds the hot row and, for the idempotent path, the op ids of applied
// increments with the value each wrote. The statements run one at a time: CockroachDB
// runs a multi-statement query as one implicit transaction, which schema changes avoid.
var counterSchema = []string{
	`CREATE TABLE IF NOT EXISTS indoubt_counter (id int PRIMARY KEY, hits bigint NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS indoubt_counter_ops (op_id text PRIMARY KEY, wrote bigint NOT NULL)`,
}

// The statements of the three mechanisms, on the one hot row.
const (
	incrementSQL = `UPDATE indoubt_counter SET hits = hits + 1 WHERE id = 1 RETURNING hits`
	readSQL      = `SELECT hits FROM indoubt_counter WHERE id = 1`
	lockSQL      = `SELECT hits FROM indoubt_counter WHERE id = 1 FOR UPDATE`
	writeSQL     = `UPDATE indoubt_counter SET hits = $1 WHERE id = 1`
)

// Counter is the hot-row counter on a Client: every increment is one transaction at
// the configured isolation level, begun together with SHOW transaction_isolation in one
// round trip so that the level is checked in every transaction at no extra cost.
//
// Errors follow Classify, with one exception that keeps the experiment's retry loop
// exact: deadlock_detected (40P01) is a definite failure here, not a conflict, so that
// the conflict policy retries SQLSTATE 40001 and nothing else. On one row every
// transaction locks the same single row, so the workload cannot deadlock by itself; a
// 40P01 would mean something else is going on, and it is counted under its reason
// (deadlock) rather than retried away.
type Counter struct {
	c    *Client
	mech CounterMechanism
	iso  Isolation
}

// NewCounter returns the counter on c. It errs on an unknown mechanism or level.
func NewCounter(c *Client, cfg CounterConfig) (*Counter, error) {
	if cfg.Mechanism == "" {
		cfg.Mechanism = Increment
	}
	if cfg.Isolation == "" {
		cfg.Isolation = Serializable
	}
	if _, err := choice.Parse("counter mechanism", cfg.Mechanism, Increment, ReadWrite, ForUpdate); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if _, err := choice.Parse("isolation", cfg.Isolation, Serializable, RepeatableRead, ReadCommitted); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &Counter{c: c, mech: cfg.Mechanism, iso: cfg.Isolation}, nil
}

// Mechanism names the mechanism and the level, for reports.
func (k *Counter) Mechanism() string { return string(k.mech) + ", " + string(k.iso) }

// Client returns the client the counter runs on.
func (k *Counter) Client() *Client { return k.c }

// Reset creates the schema if needed, sets the counter to 0 and forgets recorded op ids.
func (k *Counter) Reset(ctx context.Context) error {
	for _, q := range counterSchema {
		if err := k.c.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: create counter schema: %w", err)
		}
	}
	if err := k.c.Exec(ctx, `TRUNCATE indoubt_counter_ops`); err != nil {
		return fmt.Errorf("postgres: reset counter op ids: %w", err)
	}
	err := k.c.Exec(ctx, `INSERT INTO indoubt_counter(id, hits) VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET hits = 0`)
	if err != nil {
		return fmt.Errorf("postgres: reset counter: %w", err)
	}
	return nil
}

// Value reads the counter.
func (k *Counter) Value(ctx context.Context) (int64, error) {
	var v int64
	if err := k.c.pool.QueryRow(ctx, readSQL).Scan(&v); err != nil {
		return 0, fmt.Errorf("postgres: read counter: %w", Classify(err))
	}
	return v, nil
}

// Session acquires one connection for a worker and checks, in a transaction of its
// own, that the server runs transactions at the configured level: a mismatch is an
// error that names both levels, so that a run never measures a level it did not ask for.
func (k *Counter) Session(ctx context.Context) (counter.Session, error) {
	s := &counterSession{session: session{pool: k.c.pool}, k: k}
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.begin(ctx, conn); err != nil {
		s.abort(conn)
		s.Close()
		return nil, err
	}
	if err := conn.PgConn().Exec(ctx, "rollback").Close(); err != nil {
		s.Close()
		return nil, fmt.Errorf("postgres: end isolation check: %w", Classify(err))
	}
	return s, nil
}

type counterSession struct {
	session
	k *Counter
}

// begin opens a transaction at the configured level and verifies it, in one round trip.
func (s *counterSession) begin(ctx context.Context, conn *pgx.Conn) error {
	res, err := conn.PgConn().Exec(ctx, "BEGIN ISOLATION LEVEL "+s.k.iso.sql()+"; SHOW transaction_isolation").ReadAll()
	if err != nil {
		return classifyCounter(err)
	}
	if len(res) != 2 || len(res[1].Rows) != 1 || len(res[1].Rows[0]) != 1 {
		return workloads.Definite(fmt.Errorf("postgres: SHOW transaction_isolation returned no single value"), "isolation")
	}
	return checkIsolation(s.k.iso, string(res[1].Rows[0][0]))
}

// checkIsolation compares what SHOW transaction_isolation said with the level asked for.
func checkIsolation(want Isolation, shown string) error {
	if shown != want.shown() {
		return workloads.Definite(fmt.Errorf("postgres: asked for %s, the server runs the transaction at %q: %w", want.sql(), shown, ErrIsolation), "isolation")
	}
	return nil
}

// abort rolls back whatever transaction an error left open, so that the next attempt
// starts clean on the same connection; if that fails the connection is dropped and the
// session dials a new one on its next call.
func (s *counterSession) abort(conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := conn.PgConn().Exec(ctx, "rollback").Close(); err != nil {
		conn.Close(ctx)
	}
}

// Increment runs one increment transaction.
func (s *counterSession) Increment(ctx context.Context, req workloads.Request) (counter.Outcome, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return counter.Outcome{}, err
	}
	if err := s.begin(ctx, conn); err != nil {
		s.abort(conn)
		return counter.Outcome{}, err
	}
	out, err := s.increment(ctx, conn, req)
	if err != nil {
		s.abort(conn)
		return counter.Outcome{}, classifyCounter(err)
	}
	// COMMIT goes as a simple query, as pgx's own Tx.Commit sends it, so that the fault
	// proxy sees the commit it knows.
	tag, err := conn.PgConn().Exec(ctx, "commit").ReadAll()
	if err != nil {
		s.abort(conn)
		return counter.Outcome{}, classifyCounter(err)
	}
	if len(tag) != 1 || tag[0].CommandTag.String() != "COMMIT" {
		// The server rolled back instead: certainly not applied.
		return counter.Outcome{}, workloads.Definite(pgx.ErrTxCommitRollback, "rollback")
	}
	return out, nil
}

func (s *counterSession) increment(ctx context.Context, conn *pgx.Conn, req workloads.Request) (counter.Outcome, error) {
	if req.Idempotent {
		var w int64
		err := conn.QueryRow(ctx, `SELECT wrote FROM indoubt_counter_ops WHERE op_id = $1`, req.OpID).Scan(&w)
		if err == nil {
			return counter.Outcome{Wrote: w, Replayed: true}, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return counter.Outcome{}, err
		}
	}
	var out counter.Outcome
	switch s.k.mech {
	case Increment:
		if err := conn.QueryRow(ctx, incrementSQL).Scan(&out.Wrote); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return counter.Outcome{}, &counterError{errors.New("postgres: the counter row is missing"), "no-row"}
			}
			return counter.Outcome{}, err
		}
	default:
		q := readSQL
		if s.k.mech == ForUpdate {
			q = lockSQL
		}
		var r int64
		if err := conn.QueryRow(ctx, q).Scan(&r); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return counter.Outcome{}, &counterError{errors.New("postgres: the counter row is missing"), "no-row"}
			}
			return counter.Outcome{}, err
		}
		tag, err := conn.Exec(ctx, writeSQL, r+1)
		if err != nil {
			return counter.Outcome{}, err
		}
		if tag.RowsAffected() != 1 {
			return counter.Outcome{}, &counterError{fmt.Errorf("postgres: counter write updated %d rows, want 1", tag.RowsAffected()), "no-row"}
		}
		out = counter.Outcome{Read: &r, Wrote: r + 1}
	}
	if req.Idempotent {
		if _, err := conn.Exec(ctx, `INSERT INTO indoubt_counter_ops(op_id, wrote) VALUES ($1, $2)`, req.OpID, out.Wrote); err != nil {
			return counter.Outcome{}, err
		}
	}
	return out, nil
}

// Read reads the counter on the session's connection, outside a transaction block.
func (s *counterSession) Read(ctx context.Context) (int64, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return 0, err
	}
	var v int64
	if err := conn.QueryRow(ctx, readSQL).Scan(&v); err != nil {
		return 0, classifyCounter(err)
	}
	return v, nil
}

// classifyCounter is Classify with deadlock_detected (40P01) made definite: the
// counter's retry loop retries SQLSTATE 40001 only, as the experiment prescribes.
func classifyCounter(err error) error {
	var ce *counterError
	if errors.As(err, &ce) {
		return workloads.Definite(ce.err, ce.reason)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
		return workloads.Definite(err, workloads.ReasonDeadlock)
	}
	return Classify(err)
}

// counterError is a definite failure found by the counter itself (the row is missing),
// kept apart from driver errors until it is classified.
type counterError struct {
	err    error
	reason workloads.Reason
}

func (e *counterError) Error() string { return e.err.Error() }
func (e *counterError) Unwrap() error { return e.err }
