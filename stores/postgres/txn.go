package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

var (
	_ txn.Store        = (*Txns)(nil)
	_ txn.PrimaryStore = (*Txns)(nil)
)

// The tables of the transactional workloads. A list is a bigint[] grown by one
// statement that inserts the key or appends to it, so that an append never reads the
// list into the client and back: what the isolation level does to a read-then-write is
// measured by the workload's reads, not hidden in the append.
const (
	appendTable   = "indoubt_append"
	registerTable = "indoubt_txn_register"

	appendSQL   = `INSERT INTO indoubt_append AS t (k, v) VALUES ($1, ARRAY[$2::bigint]) ON CONFLICT (k) DO UPDATE SET v = t.v || $2::bigint`
	listReadSQL = `SELECT v FROM indoubt_append WHERE k = $1`
	writeRegSQL = `INSERT INTO indoubt_txn_register AS t (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`
	regReadSQL  = `SELECT v FROM indoubt_txn_register WHERE k = $1`
)

var txnSchema = []string{
	`CREATE TABLE IF NOT EXISTS indoubt_append (k bigint PRIMARY KEY, v bigint[] NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS indoubt_txn_register (k bigint PRIMARY KEY, v bigint NOT NULL)`,
}

// TxnConfig configures Txns.
type TxnConfig struct {
	// Model is workloads.ListAppend or workloads.RWRegister.
	Model workloads.Name
	// Isolation is the level of every transaction: Serializable (default),
	// RepeatableRead or ReadCommitted. It is verified in each transaction.
	Isolation Isolation
	// Standby, when set, is a client of a hot standby of the primary: read-only
	// transactions run there, READ ONLY, at READ COMMITTED under ReadCommitted and at
	// REPEATABLE READ otherwise (PostgreSQL refuses SERIALIZABLE on a hot standby).
	// Transactions that write run on the primary.
	Standby *Client
}

// Txns is the list-append or rw-register store on a Client: one table of (key, list)
// or (key, value), every micro-op one statement inside BEGIN ISOLATION LEVEL ... /
// COMMIT:
//
//	append  INSERT INTO indoubt_append AS t (k, v) VALUES ($1, ARRAY[$2]) ON CONFLICT (k) DO UPDATE SET v = t.v || $2
//	write   INSERT INTO indoubt_txn_register AS t (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v
//	read    SELECT v FROM indoubt_append (or indoubt_txn_register) WHERE k = $1
//
// Errors follow Classify: a serialization failure (40001) and a deadlock the server
// broke (40P01) are conflicts, which the conflict policy retries; a lost connection
// around COMMIT is unknown.
type Txns struct {
	c, standby *Client
	model      workloads.Name
	iso        Isolation
}

// NewTxns returns the store on c. It errs on an unknown model or level.
func NewTxns(c *Client, cfg TxnConfig) (*Txns, error) {
	if cfg.Model != workloads.ListAppend && cfg.Model != workloads.RWRegister {
		return nil, fmt.Errorf("postgres: no transactional model %q (want list-append or rw-register)", cfg.Model)
	}
	if cfg.Isolation == "" {
		cfg.Isolation = Serializable
	}
	if _, err := choice.Parse("isolation", cfg.Isolation, Serializable, RepeatableRead, ReadCommitted); err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &Txns{c: c, standby: cfg.Standby, model: cfg.Model, iso: cfg.Isolation}, nil
}

// Guarantee is what PostgreSQL documents for the level: READ COMMITTED, snapshot
// isolation for REPEATABLE READ (its documentation says so), SERIALIZABLE. Each key is a
// row, which is linearizable on the primary, and a transaction's write of a key follows
// its read of it. With reads on a standby, each level's promise is checked for the
// combined history as well, and only writes-follow-reads is assumed: a standby's reads
// are of a WAL prefix, stale by the replication lag.
func (t *Txns) Guarantee() txn.Guarantee {
	g := txn.Guarantee{
		Mechanism:        fmt.Sprintf("BEGIN ISOLATION LEVEL %s, one statement a micro-op, COMMIT", t.iso.sql()),
		WFRKeys:          true,
		LinearizableKeys: t.standby == nil,
		SequentialKeys:   t.standby == nil,
	}
	switch t.iso {
	case ReadCommitted:
		g.Models = []string{"read-committed"}
		g.Promise = "PostgreSQL documents READ COMMITTED: no dirty reads or writes; each statement sees what was committed before it began"
	case RepeatableRead:
		g.Models = []string{"snapshot-isolation"}
		g.Promise = "PostgreSQL documents REPEATABLE READ as snapshot isolation: every read of a transaction sees one snapshot, and a write to a row changed since it aborts"
	default:
		g.Models = []string{"serializable"}
		g.Promise = "PostgreSQL documents SERIALIZABLE: the committed transactions have the effect of some serial order (serializable snapshot isolation)"
	}
	if t.standby != nil {
		g.Mechanism += fmt.Sprintf("; read-only transactions on the hot standby, READ ONLY at %s", t.standbyIso().sql())
		g.Promise += "; the hot standby's read-only transactions see a snapshot of the WAL it has replayed, which PostgreSQL promises nothing more about"
	}
	return g
}

// standbyIso is the level of a read-only transaction on the standby.
func (t *Txns) standbyIso() Isolation {
	if t.iso == ReadCommitted {
		return ReadCommitted
	}
	return RepeatableRead
}

func (t *Txns) table() string {
	if t.model == workloads.RWRegister {
		return registerTable
	}
	return appendTable
}

// Reset creates the tables if needed and empties the model's; with a standby, it
// returns once the standby has replayed the reset.
func (t *Txns) Reset(ctx context.Context) error {
	for _, q := range txnSchema {
		if err := t.c.Exec(ctx, q); err != nil {
			return fmt.Errorf("postgres: create transaction schema: %w", err)
		}
	}
	if err := t.c.Exec(ctx, "TRUNCATE "+t.table()); err != nil {
		return fmt.Errorf("postgres: reset %s: %w", t.table(), err)
	}
	if t.standby == nil {
		return nil
	}
	return t.waitStandby(ctx)
}

// waitStandby waits until the standby has replayed the primary's WAL as it stands now.
func (t *Txns) waitStandby(ctx context.Context) error {
	var lsn string
	if err := t.c.pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return fmt.Errorf("postgres: primary's WAL position: %w", Classify(err))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var caught bool
		err := t.standby.pool.QueryRow(ctx, "SELECT coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)", lsn).Scan(&caught)
		if err != nil {
			return fmt.Errorf("postgres: standby's replay position: %w", Classify(err))
		}
		if caught {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("postgres: the standby did not replay the reset within a minute")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Session acquires a worker's connection to the primary (and one to the standby, when
// there is one), and checks the level in a transaction of its own.
func (t *Txns) Session(ctx context.Context) (txn.Session, error) { return t.session(ctx, t.standby) }

// PrimarySession is Session without the standby: every transaction on the primary.
func (t *Txns) PrimarySession(ctx context.Context) (txn.Session, error) { return t.session(ctx, nil) }

func (t *Txns) session(ctx context.Context, standby *Client) (txn.Session, error) {
	s := &txnSession{t: t, primary: &session{pool: t.c.pool}}
	if err := s.probe(ctx, s.primary, t.iso, false); err != nil {
		s.Close()
		return nil, err
	}
	if standby != nil {
		s.standby = &session{pool: standby.pool}
		if err := s.probe(ctx, s.standby, t.standbyIso(), true); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.last = s.primary
	return s, nil
}

type txnSession struct {
	t                      *Txns
	primary, standby, last *session
}

// Conn is the local address of the connection the last transaction used.
func (s *txnSession) Conn() string {
	if s.last == nil {
		return ""
	}
	return s.last.addr
}

// Close returns the connections.
func (s *txnSession) Close() error {
	err := s.primary.Close()
	if s.standby != nil {
		err = errors.Join(err, s.standby.Close())
	}
	return err
}

// probe opens a connection on ss and checks, in a transaction it rolls back, that the
// server runs transactions at level.
func (s *txnSession) probe(ctx context.Context, ss *session, level Isolation, readOnly bool) error {
	conn, err := ss.acquire(ctx)
	if err != nil {
		return err
	}
	if err := begin(ctx, conn, level, readOnly); err != nil {
		rollback(conn)
		return err
	}
	if err := conn.PgConn().Exec(ctx, "rollback").Close(); err != nil {
		return fmt.Errorf("postgres: end isolation check: %w", Classify(err))
	}
	return nil
}

// begin opens a transaction at level and verifies the level, in one round trip.
func begin(ctx context.Context, conn *pgx.Conn, level Isolation, readOnly bool) error {
	q := "BEGIN ISOLATION LEVEL " + level.sql()
	if readOnly {
		q += " READ ONLY"
	}
	res, err := conn.PgConn().Exec(ctx, q+"; SHOW transaction_isolation").ReadAll()
	if err != nil {
		return Classify(err)
	}
	if len(res) != 2 || len(res[1].Rows) != 1 || len(res[1].Rows[0]) != 1 {
		return workloads.Definite(fmt.Errorf("postgres: SHOW transaction_isolation returned no single value"), "isolation")
	}
	return checkIsolation(level, string(res[1].Rows[0][0]))
}

// rollback ends whatever transaction an error left open, so that the next attempt
// starts clean; if that fails the connection is closed and the session dials anew.
func rollback(conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := conn.PgConn().Exec(ctx, "rollback").Close(); err != nil {
		conn.Close(ctx)
	}
}

// Txn runs t in one transaction: on the standby when it only reads and there is one,
// else on the primary.
func (s *txnSession) Txn(ctx context.Context, req workloads.Request, t txn.Txn) (txn.Txn, int, error) {
	if err := workloads.Start(ctx); err != nil {
		return nil, 0, err
	}
	on, level, readOnly := s.primary, s.t.iso, false
	if s.standby != nil && t.ReadOnly() {
		on, level, readOnly = s.standby, s.t.standbyIso(), true
	}
	s.last = on
	conn, err := on.acquire(ctx)
	if err != nil {
		return nil, 0, err
	}
	if err := begin(ctx, conn, level, readOnly); err != nil {
		rollback(conn)
		return nil, 0, err
	}
	for i := range t {
		if err := s.mop(ctx, conn, &t[i]); err != nil {
			rollback(conn)
			return nil, 0, Classify(err)
		}
	}
	// COMMIT goes as a simple query, as pgx's own Tx.Commit sends it, so that the fault
	// proxy sees the commit it knows.
	tag, err := conn.PgConn().Exec(ctx, "commit").ReadAll()
	if err != nil {
		rollback(conn)
		return nil, 0, Classify(err)
	}
	if len(tag) != 1 || tag[0].CommandTag.String() != "COMMIT" {
		return nil, 0, workloads.Definite(pgx.ErrTxCommitRollback, "rollback")
	}
	return t, 0, nil
}

// mop runs one micro-op and fills in a read's result.
func (s *txnSession) mop(ctx context.Context, conn *pgx.Conn, m *txn.Mop) error {
	switch {
	case m.F == txn.Append:
		_, err := conn.Exec(ctx, appendSQL, m.Key, m.Value)
		return err
	case m.F == txn.Write:
		_, err := conn.Exec(ctx, writeRegSQL, m.Key, m.Value)
		return err
	case s.t.model == workloads.ListAppend:
		var l []int64
		err := conn.QueryRow(ctx, listReadSQL, m.Key).Scan(&l)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if l == nil {
			l = []int64{}
		}
		m.List, m.Done = l, true
		return nil
	default:
		var v int64
		err := conn.QueryRow(ctx, regReadSQL, m.Key).Scan(&v)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			m.Done = true
			return nil
		case err != nil:
			return err
		}
		m.Value, m.Found, m.Done = v, true, true
		return nil
	}
}
