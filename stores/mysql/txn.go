package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

var _ txn.Store = (*Txns)(nil)

// Isolation is an InnoDB isolation level.
type Isolation string

// The levels of TxnConfig.Isolation.
const (
	Serializable    Isolation = "serializable"
	RepeatableRead  Isolation = "repeatable-read"
	ReadCommitted   Isolation = "read-committed"
	ReadUncommitted Isolation = "read-uncommitted"
)

// Isolations are the levels, strongest first.
var Isolations = []Isolation{Serializable, RepeatableRead, ReadCommitted, ReadUncommitted}

func (l Isolation) sql() string { return strings.ToUpper(strings.ReplaceAll(string(l), "-", " ")) }

// TxnConfig configures Txns.
type TxnConfig struct {
	// Model is workloads.ListAppend or workloads.RWRegister.
	Model workloads.Name
	// Isolation is the level of every transaction: Serializable (default),
	// RepeatableRead, ReadCommitted or ReadUncommitted. It is verified in each session.
	Isolation Isolation
	// Galera says the server is a node of a Galera cluster whose other nodes other
	// sessions use: a key's reads are then not linearizable (a node applies the others'
	// writesets after it acknowledges its own), and the promise checked is the one
	// Galera is said to give across nodes.
	Galera bool
}

// Txns is the list-append or rw-register store on a Client: one table of (key, list)
// or (key, value), every micro-op one statement inside START TRANSACTION ... COMMIT at
// the session's level:
//
//	append  INSERT INTO indoubt_append (k, v) VALUES (?, 'x') ON DUPLICATE KEY UPDATE v = CONCAT(v, ',', VALUES(v))
//	write   INSERT INTO indoubt_txn_register (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)
//	read    SELECT v FROM indoubt_append (or indoubt_txn_register) WHERE k = ?
//
// A list is a comma-separated text grown by the statement itself, so that an append
// never reads the list into the client. Errors follow Classify: a deadlock (1213, a
// Galera certification failure too) and a lock wait timeout are conflicts.
type Txns struct {
	c     *Client
	model workloads.Name
	iso   Isolation
	gal   bool
}

const (
	appendSQL   = `INSERT INTO indoubt_append (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = CONCAT(v, ',', VALUES(v))`
	listReadSQL = `SELECT v FROM indoubt_append WHERE k = ?`
	writeRegSQL = `INSERT INTO indoubt_txn_register (k, v) VALUES (?, ?) ON DUPLICATE KEY UPDATE v = VALUES(v)`
	regReadSQL  = `SELECT v FROM indoubt_txn_register WHERE k = ?`
)

var txnSchema = []string{
	`CREATE TABLE IF NOT EXISTS indoubt_append (k BIGINT PRIMARY KEY, v TEXT NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS indoubt_txn_register (k BIGINT PRIMARY KEY, v BIGINT NOT NULL) ENGINE=InnoDB`,
}

// NewTxns returns the store on c. It errs on an unknown model or level.
func NewTxns(c *Client, cfg TxnConfig) (*Txns, error) {
	if cfg.Model != workloads.ListAppend && cfg.Model != workloads.RWRegister {
		return nil, fmt.Errorf("mysql: no transactional model %q (want list-append or rw-register)", cfg.Model)
	}
	if cfg.Isolation == "" {
		cfg.Isolation = Serializable
	}
	if _, err := choice.Parse("isolation", cfg.Isolation, Isolations...); err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	return &Txns{c: c, model: cfg.Model, iso: cfg.Isolation, gal: cfg.Galera}, nil
}

// Guarantee is the level's promise as measured by Hermitage for MySQL/InnoDB (MySQL's
// own documentation names the levels, not the anomalies they allow): READ UNCOMMITTED
// prevents dirty writes only, READ COMMITTED and REPEATABLE READ are read committed
// (Hermitage: monotonic atomic view; REPEATABLE READ lets lost updates through), and
// SERIALIZABLE is serializable. Each key is a row of one server, linearizable. On
// Galera, REPEATABLE READ and SERIALIZABLE are checked for snapshot isolation, what
// Galera's first-committer-wins certification is usually said to give across nodes
// (SERIALIZABLE's locks are local to a node).
func (t *Txns) Guarantee() txn.Guarantee {
	g := txn.Guarantee{
		Mechanism:        fmt.Sprintf("SET TRANSACTION ISOLATION LEVEL %s, START TRANSACTION, one statement a micro-op, COMMIT", t.iso.sql()),
		WFRKeys:          true,
		LinearizableKeys: !t.gal,
		SequentialKeys:   !t.gal,
	}
	switch t.iso {
	case ReadUncommitted:
		g.Models = []string{"read-uncommitted"}
		g.Promise = "Hermitage measured MySQL's READ UNCOMMITTED as read uncommitted: no dirty writes"
	case ReadCommitted:
		g.Models = []string{"read-committed"}
		g.Promise = "Hermitage measured MySQL's READ COMMITTED as monotonic atomic view: no dirty reads or writes"
	case RepeatableRead:
		g.Models = []string{"read-committed"}
		g.Promise = "Hermitage measured MySQL's REPEATABLE READ as monotonic atomic view (consistent reads from one snapshot, but lost updates let through)"
	default:
		g.Models = []string{"serializable"}
		g.Promise = "MySQL documents SERIALIZABLE as REPEATABLE READ with every read a locking read: serializable"
	}
	if t.gal {
		g.Mechanism += ", each client on the Galera node it stands beside"
		if t.iso == RepeatableRead || t.iso == Serializable {
			g.Models = []string{"snapshot-isolation"}
			g.Promise = "Galera's certification (first committer wins across nodes) is usually said to give snapshot isolation to cluster-wide transactions"
		}
	}
	return g
}

func (t *Txns) table() string {
	if t.model == workloads.RWRegister {
		return "indoubt_txn_register"
	}
	return "indoubt_append"
}

// Reset creates the tables if needed and empties the model's.
func (t *Txns) Reset(ctx context.Context) error {
	for _, q := range txnSchema {
		if err := t.c.Exec(ctx, q); err != nil {
			return fmt.Errorf("mysql: create transaction schema: %w", err)
		}
	}
	if err := t.c.Exec(ctx, "DELETE FROM "+t.table()); err != nil {
		return fmt.Errorf("mysql: reset %s: %w", t.table(), err)
	}
	return nil
}

// Session dials a worker's connection, sets its level and checks it.
func (t *Txns) Session(ctx context.Context) (txn.Session, error) {
	s := &txnSession{t: t, session: session{db: t.c.db}}
	if err := s.setLevel(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

type txnSession struct {
	session
	t *Txns
	// on is the connection the level was set on.
	on *sql.Conn
}

// setLevel sets the session's level on its connection (again after a reconnect) and
// reads it back.
func (s *txnSession) setLevel(ctx context.Context) error {
	conn, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	if s.on == conn {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL "+s.t.iso.sql()); err != nil {
		return s.fail(err)
	}
	var got string
	if err := conn.QueryRowContext(ctx, "SELECT @@tx_isolation").Scan(&got); err != nil {
		return s.fail(err)
	}
	if want := strings.ReplaceAll(s.t.iso.sql(), " ", "-"); got != want {
		return workloads.Definite(fmt.Errorf("mysql: the session runs at %s, not %s", got, want), "isolation")
	}
	s.on = conn
	return nil
}

// Txn runs t in one transaction on the session's connection.
func (s *txnSession) Txn(ctx context.Context, req workloads.Request, t txn.Txn) (txn.Txn, int, error) {
	if err := workloads.Start(ctx); err != nil {
		return nil, 0, err
	}
	if err := s.setLevel(ctx); err != nil {
		return nil, 0, err
	}
	err := inTx(ctx, s.on, func(tx *sql.Tx) error {
		for i := range t {
			if err := s.mop(ctx, tx, &t[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, s.fail(err)
	}
	return t, 0, nil
}

// mop runs one micro-op and fills in a read's result.
func (s *txnSession) mop(ctx context.Context, tx *sql.Tx, m *txn.Mop) error {
	switch {
	case m.F == txn.Append:
		_, err := tx.ExecContext(ctx, appendSQL, m.Key, strconv.FormatInt(m.Value, 10))
		return err
	case m.F == txn.Write:
		_, err := tx.ExecContext(ctx, writeRegSQL, m.Key, m.Value)
		return err
	case s.t.model == workloads.ListAppend:
		var raw string
		err := tx.QueryRowContext(ctx, listReadSQL, m.Key).Scan(&raw)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		l := []int64{}
		if raw != "" {
			for _, f := range strings.Split(raw, ",") {
				v, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					return workloads.Definite(fmt.Errorf("mysql: list of key %d: %q", m.Key, raw), workloads.ReasonBadReply)
				}
				l = append(l, v)
			}
		}
		m.List, m.Done = l, true
		return nil
	default:
		var v int64
		err := tx.QueryRowContext(ctx, regReadSQL, m.Key).Scan(&v)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			m.Done = true
			return nil
		case err != nil:
			return err
		}
		m.Value, m.Found, m.Done = v, true, true
		return nil
	}
}
