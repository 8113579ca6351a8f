package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

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
	// Increment lets the server compute the new value in one statement, which hands
	// it back in the OK packet's last insert id:
	// UPDATE ... SET hits = LAST_INSERT_ID(hits + 1).
	Increment CounterMechanism = "increment"
	// ReadWrite reads the value with a plain (consistent) SELECT, then writes what it
	// read plus one.
	ReadWrite CounterMechanism = "read-write"
	// ForUpdate reads the value with SELECT ... FOR UPDATE, locking the row, then
	// writes what it read plus one.
	ForUpdate CounterMechanism = "for-update"
)

// CounterMechanisms lists the mechanisms in the order --help shows them.
var CounterMechanisms = []CounterMechanism{Increment, ReadWrite, ForUpdate}

// CounterConfig configures a Counter.
type CounterConfig struct {
	// Mechanism is Increment (default), ReadWrite or ForUpdate.
	Mechanism CounterMechanism
	// Isolation is the level of every increment's transaction: Serializable
	// (default), RepeatableRead, ReadCommitted or ReadUncommitted. It is set on each
	// connection and read back.
	Isolation Isolation
}

// The counter's tables: the hot row and, for the idempotent path, the op ids of
// applied increments with the value each wrote, recorded in the same transaction.
var counterSchema = []string{
	`CREATE TABLE IF NOT EXISTS indoubt_counter (id INT PRIMARY KEY, hits BIGINT NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS indoubt_counter_ops (op_id VARCHAR(128) PRIMARY KEY, wrote BIGINT NOT NULL) ENGINE=InnoDB`,
}

// The statements of the three mechanisms, on the one hot row.
const (
	counterIncrementSQL = `UPDATE indoubt_counter SET hits = LAST_INSERT_ID(hits + 1) WHERE id = 1`
	counterReadSQL      = `SELECT hits FROM indoubt_counter WHERE id = 1`
	counterLockSQL      = `SELECT hits FROM indoubt_counter WHERE id = 1 FOR UPDATE`
	counterWriteSQL     = `UPDATE indoubt_counter SET hits = ? WHERE id = 1`
)

// Counter is the hot-row counter on a Client: every increment is one transaction,
// START TRANSACTION ... COMMIT, at the configured level, set on the worker's
// connection and read back from @@tx_isolation before its first increment (and again
// on every new connection).
//
// Errors follow Classify: a deadlock (1213, which is how InnoDB's SERIALIZABLE and a
// Galera certification failure refuse a transaction) and a lock wait timeout (1205)
// are conflicts; InnoDB has no other serialization failure. A read-write increment at
// REPEATABLE READ or below reads its snapshot without a lock and writes over what
// another transaction committed meanwhile: InnoDB lets that lost update through, and
// the counter's exact count shows it.
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
	if _, err := choice.Parse("counter mechanism", cfg.Mechanism, CounterMechanisms...); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	if _, err := choice.Parse("isolation", cfg.Isolation, Isolations...); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	return &Counter{c: c, mech: cfg.Mechanism, iso: cfg.Isolation}, nil
}

// Mechanism names the mechanism and the level, for reports.
func (k *Counter) Mechanism() string { return string(k.mech) + ", " + string(k.iso) }

// Reset creates the schema if needed, sets the counter to 0 and forgets recorded op ids.
func (k *Counter) Reset(ctx context.Context) error {
	for _, q := range counterSchema {
		if err := k.c.Exec(ctx, q); err != nil {
			return fmt.Errorf("mysql: create counter schema: %w", err)
		}
	}
	if err := k.c.Exec(ctx, `TRUNCATE TABLE indoubt_counter_ops`); err != nil {
		return fmt.Errorf("mysql: reset counter op ids: %w", err)
	}
	if err := k.c.Exec(ctx, `INSERT INTO indoubt_counter (id, hits) VALUES (1, 0) ON DUPLICATE KEY UPDATE hits = 0`); err != nil {
		return fmt.Errorf("mysql: reset counter: %w", err)
	}
	return nil
}

// Value reads the counter.
func (k *Counter) Value(ctx context.Context) (int64, error) {
	var v int64
	if err := k.c.db.QueryRowContext(ctx, counterReadSQL).Scan(&v); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, workloads.Definite(errors.New("mysql: the counter row is missing"), "no-row")
		}
		return 0, fmt.Errorf("mysql: read counter: %w", Classify(err))
	}
	return v, nil
}

// Session dials one connection for a worker, sets its level and checks it.
func (k *Counter) Session(ctx context.Context) (counter.Session, error) {
	s := &counterSession{session: session{db: k.c.db}, k: k}
	if _, err := s.level(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

type counterSession struct {
	session
	k *Counter
	// on is the connection the level was set on.
	on *sql.Conn
}

// level returns the session's connection with the counter's level set on it (again
// after a reconnect) and read back. Nothing is written, so every failure is definite.
func (s *counterSession) level(ctx context.Context) (*sql.Conn, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	if s.on == conn {
		return conn, nil
	}
	err = setLevel(ctx, conn, s.k.iso)
	if err != nil {
		err = s.fail(err)
		if errors.Is(err, workloads.ErrUnknown) {
			return nil, workloads.Definite(err, workloads.ReasonOf(err))
		}
		return nil, err
	}
	s.on = conn
	return conn, nil
}

// setLevel sets the session level of conn and reads it back from @@tx_isolation: a
// level other than the one asked for is a definite error naming both.
func setLevel(ctx context.Context, conn *sql.Conn, iso Isolation) error {
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL "+iso.sql()); err != nil {
		return err
	}
	var got string
	if err := conn.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&got); err != nil {
		return err
	}
	if want := strings.ReplaceAll(iso.sql(), " ", "-"); got != want {
		return workloads.Definite(fmt.Errorf("mysql: the session runs at %s, not %s", got, want), "isolation")
	}
	return nil
}

// Increment runs one increment transaction.
func (s *counterSession) Increment(ctx context.Context, req workloads.Request) (counter.Outcome, error) {
	if err := workloads.Start(ctx); err != nil {
		return counter.Outcome{}, err
	}
	conn, err := s.level(ctx)
	if err != nil {
		return counter.Outcome{}, err
	}
	var out counter.Outcome
	err = inTx(ctx, conn, func(tx *sql.Tx) error {
		var err error
		out, err = s.increment(ctx, tx, req)
		return err
	})
	if err != nil {
		return counter.Outcome{}, s.fail(err)
	}
	return out, nil
}

func (s *counterSession) increment(ctx context.Context, tx *sql.Tx, req workloads.Request) (counter.Outcome, error) {
	if req.Idempotent {
		var w int64
		err := tx.QueryRowContext(ctx, `SELECT wrote FROM indoubt_counter_ops WHERE op_id = ? LOCK IN SHARE MODE`, req.OpID).Scan(&w)
		if err == nil {
			return counter.Outcome{Wrote: w, Replayed: true}, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return counter.Outcome{}, err
		}
	}
	missing := workloads.Definite(errors.New("mysql: the counter row is missing"), "no-row")
	var out counter.Outcome
	switch s.k.mech {
	case Increment:
		res, err := tx.ExecContext(ctx, counterIncrementSQL)
		if err != nil {
			return counter.Outcome{}, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return counter.Outcome{}, err
			}
			return counter.Outcome{}, missing
		}
		if out.Wrote, err = res.LastInsertId(); err != nil {
			return counter.Outcome{}, err
		}
	default:
		q := counterReadSQL
		if s.k.mech == ForUpdate {
			q = counterLockSQL
		}
		var r int64
		if err := tx.QueryRowContext(ctx, q).Scan(&r); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return counter.Outcome{}, missing
			}
			return counter.Outcome{}, err
		}
		res, err := tx.ExecContext(ctx, counterWriteSQL, r+1)
		if err != nil {
			return counter.Outcome{}, err
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			if err != nil {
				return counter.Outcome{}, err
			}
			return counter.Outcome{}, workloads.Definite(fmt.Errorf("mysql: counter write matched %d rows, want 1", n), "no-row")
		}
		out = counter.Outcome{Read: &r, Wrote: r + 1}
	}
	if req.Idempotent {
		if _, err := tx.ExecContext(ctx, `INSERT INTO indoubt_counter_ops (op_id, wrote) VALUES (?, ?)`, req.OpID, out.Wrote); err != nil {
			return counter.Outcome{}, err
		}
	}
	return out, nil
}

// Read reads the counter on the session's connection, outside a transaction.
func (s *counterSession) Read(ctx context.Context) (int64, error) {
	conn, err := s.acquire(ctx)
	if err != nil {
		return 0, err
	}
	var v int64
	if err := conn.QueryRowContext(ctx, counterReadSQL).Scan(&v); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return 0, workloads.Definite(errors.New("mysql: the counter row is missing"), "no-row")
		}
		return 0, s.fail(err)
	}
	return v, nil
}
