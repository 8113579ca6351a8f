package twopc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// GIDPrefix starts the gid of every transaction a Cluster prepares ("indoubt-2pc-" and
// the operation's op id); recovery touches nothing else.
const GIDPrefix = "indoubt-2pc-"

// Options configure a Cluster.
type Options struct {
	// DSNs are the servers, PostgreSQL with prepared transactions enabled
	// (max_prepared_transactions above 0). Row r lives on server r mod len(DSNs).
	DSNs []string
	// Mode is the coordinator's; a Logged one keeps its decisions in LogPath.
	Mode    Mode
	LogPath string
	// Seed drives the crash points (Coordinator.Crash).
	Seed int64
	// Conns bounds each server's pool.
	Conns int32
}

// Cluster is the table simplecount (id, counter) spread over several PostgreSQL servers,
// with the markers table applied (op_id, row_id) beside it on each, and transactions over
// them: local ones on one server, distributed ones under two-phase commit through a
// Coordinator. It implements transfer.Store. It is safe for concurrent use.
type Cluster struct {
	pools   []*pgxpool.Pool
	co      *Coordinator
	log     *Log // nil when Naive
	mode    Mode
	logPath string

	mu        sync.Mutex
	crashedAt time.Time
}

var _ transfer.Store = (*Cluster)(nil)

// Open connects to every server and opens the coordinator (and its decision log, when
// Logged). The caller closes the cluster.
func Open(ctx context.Context, opt Options) (*Cluster, error) {
	if len(opt.DSNs) == 0 {
		return nil, errors.New("twopc: no servers")
	}
	c := &Cluster{mode: opt.Mode, logPath: opt.LogPath}
	for i, dsn := range opt.DSNs {
		p, err := pool(ctx, dsn, opt.Conns)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("server %d: %w", i, err)
		}
		c.pools = append(c.pools, p)
	}
	if opt.Mode == Logged {
		var err error
		if c.log, err = OpenLog(opt.LogPath); err != nil {
			c.Close()
			return nil, err
		}
	}
	var err error
	if c.co, err = New(c.pools, opt.Mode, c.log, opt.Seed); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func pool(ctx context.Context, dsn string, conns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("the DSN does not parse")
	}
	if conns > 0 {
		pc.MaxConns = conns
	}
	// A distributed deadlock is invisible to each server's detector; the rows are
	// locked in one global order so none should form, and lock_timeout ends one that
	// would.
	pc.ConnConfig.RuntimeParams["lock_timeout"] = "10s"
	p, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := p.Ping(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close closes the pools and the decision log.
func (c *Cluster) Close() {
	for _, p := range c.pools {
		p.Close()
	}
	if c.log != nil {
		c.log.Close()
	}
}

// Servers is how many servers hold the rows.
func (c *Cluster) Servers() int { return len(c.pools) }

// server returns the server that holds row.
func (c *Cluster) server(row int) int { return row % len(c.pools) }

// Reset rolls back what an earlier run left prepared under GIDPrefix, and creates the
// tables on every server: row r on server r mod n, every row at transfer.Initial.
func (c *Cluster) Reset(ctx context.Context, rows int) error {
	left, err := ListInDoubt(ctx, c.pools, GIDPrefix)
	if err != nil {
		return err
	}
	for _, d := range left {
		if _, err := c.pools[d.Participant].Exec(ctx, "ROLLBACK PREPARED '"+quote(d.GID)+"'"); err != nil && !notPrepared(err) {
			return err
		}
	}
	for i, p := range c.pools {
		_, err := p.Exec(ctx, `
			DROP TABLE IF EXISTS simplecount, applied;
			CREATE TABLE simplecount (id int PRIMARY KEY, counter bigint NOT NULL);
			CREATE TABLE applied (op_id text NOT NULL, row_id int NOT NULL, PRIMARY KEY (op_id, row_id))`)
		if err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
		_, err = p.Exec(ctx, `INSERT INTO simplecount SELECT g, $1 FROM generate_series(0, $2 - 1) g WHERE g % $3 = $4`,
			transfer.Initial, rows, len(c.pools), i)
		if err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
		if _, err := p.Exec(ctx, "VACUUM ANALYZE simplecount"); err != nil {
			return fmt.Errorf("server %d: %w", i, err)
		}
	}
	return nil
}

// side is one row's part of a transaction: the work on its server's open transaction.
type side struct {
	row  int
	work func(ctx context.Context, conn *pgx.Conn) error
}

// Transfer moves 1 from row from to row to, each side with its marker.
func (c *Cluster) Transfer(ctx context.Context, opID string, from, to int) error {
	update := func(row, delta int) side {
		return side{row, func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, "UPDATE simplecount SET counter = counter + $1 WHERE id = $2", delta, row); err != nil {
				return err
			}
			_, err := conn.Exec(ctx, "INSERT INTO applied (op_id, row_id) VALUES ($1, $2)", opID, row)
			return err
		}}
	}
	return c.do(ctx, opID, update(from, -1), update(to, 1))
}

// ReadRows reads rows a and b in one transaction.
func (c *Cluster) ReadRows(ctx context.Context, opID string, a, b int) (int64, int64, error) {
	var va, vb int64
	read := func(row int, into *int64) side {
		return side{row, func(ctx context.Context, conn *pgx.Conn) error {
			return conn.QueryRow(ctx, "SELECT counter FROM simplecount WHERE id = $1", row).Scan(into)
		}}
	}
	err := c.do(ctx, opID, read(a, &va), read(b, &vb))
	return va, vb, err
}

// do runs the two sides in one local transaction when their rows share a server, and
// under two-phase commit otherwise, and classifies the outcome by the error contract.
func (c *Cluster) do(ctx context.Context, opID string, x, y side) error {
	if y.row < x.row { // every transaction locks its rows in one order: no deadlock
		x, y = y, x
	}
	if c.server(x.row) == c.server(y.row) {
		return c.local(ctx, c.server(x.row), x, y)
	}
	branches := []Branch{{Participant: c.server(x.row), Work: x.work}, {Participant: c.server(y.row), Work: y.work}}
	// Each server's detector sees only its own waits, so a cycle across servers would
	// go unbroken: every transaction takes its servers in one order.
	if branches[1].Participant < branches[0].Participant {
		branches[0], branches[1] = branches[1], branches[0]
	}
	out, err := c.co.Do(ctx, GIDPrefix+opID, branches)
	switch out {
	case Committed:
		return nil
	case Abandoned:
		return workloads.Unknown(err, reason(err, workloads.ReasonUnknown))
	}
	return workloads.Definite(err, reason(err, workloads.ReasonError))
}

// local runs both sides in one transaction on their server. Only the commit can end
// with the outcome unknown: an error before it leaves nothing committed.
func (c *Cluster) local(ctx context.Context, server int, sides ...side) error {
	conn, err := c.pools[server].Acquire(ctx)
	if err != nil {
		return workloads.Definite(err, workloads.ReasonDial)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return workloads.Definite(err, reason(err, workloads.ReasonError))
	}
	for _, s := range sides {
		if err := s.work(ctx, conn.Conn()); err != nil {
			_ = tx.Rollback(ctx)
			return workloads.Definite(err, reason(err, workloads.ReasonError))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return workloads.Definite(err, reason(err, workloads.ReasonError))
		}
		return workloads.Unknown(err, reason(err, workloads.ReasonUnknown))
	}
	return nil
}

// reason names err in the error contract's vocabulary, or is otherwise.
func reason(err error, otherwise workloads.Reason) workloads.Reason {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, ErrCrashed):
		return transfer.ReasonCrashed
	case errors.As(err, &pe):
		return workloads.ServerCode(pe.Code)
	}
	if r := workloads.NetReason(err); r != "" {
		return r
	}
	return otherwise
}

// ReadTotal sums every server's rows, one server after another: no global snapshot.
func (c *Cluster) ReadTotal(ctx context.Context) (int64, error) {
	var total int64
	for _, p := range c.pools {
		var s int64
		if err := p.QueryRow(ctx, "SELECT coalesce(sum(counter), 0) FROM simplecount").Scan(&s); err != nil {
			return 0, workloads.Definite(err, reason(err, workloads.ReasonError)) // a read changes nothing
		}
		total += s
	}
	return total, nil
}

// Rows reads every row of every server.
func (c *Cluster) Rows(ctx context.Context) (map[int]int64, error) {
	out := map[int]int64{}
	for i, p := range c.pools {
		rows, err := p.Query(ctx, "SELECT id, counter FROM simplecount")
		if err != nil {
			return nil, fmt.Errorf("server %d: %w", i, err)
		}
		var id int
		var counter int64
		if _, err := pgx.ForEachRow(rows, []any{&id, &counter}, func() error {
			out[id] = counter
			return nil
		}); err != nil {
			return nil, fmt.Errorf("server %d: %w", i, err)
		}
	}
	return out, nil
}

// Markers reads server's applied table: op id to the rows its transfer applied on there.
func (c *Cluster) Markers(ctx context.Context, server int) (map[string][]int, error) {
	rows, err := c.pools[server].Query(ctx, "SELECT op_id, row_id FROM applied ORDER BY op_id, row_id")
	if err != nil {
		return nil, fmt.Errorf("server %d: %w", server, err)
	}
	out := map[string][]int{}
	var id string
	var row int
	if _, err := pgx.ForEachRow(rows, []any{&id, &row}, func() error {
		out[id] = append(out[id], row)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("server %d: %w", server, err)
	}
	return out, nil
}

// Prepared lists every transaction prepared in the servers' databases, whoever
// prepared it, as "gid@server".
func (c *Cluster) Prepared(ctx context.Context) ([]string, error) {
	left, err := ListInDoubt(ctx, c.pools, "")
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, d := range left {
		out = append(out, fmt.Sprintf("%s@%d", d.GID, d.Participant))
	}
	return out, nil
}

// Crash crashes the coordinator (Coordinator.Crash) and notes when.
func (c *Cluster) Crash() {
	c.mu.Lock()
	if c.crashedAt.IsZero() {
		c.crashedAt = time.Now()
	}
	c.mu.Unlock()
	c.co.Crash()
}

// LockProbe is one writer that tried a row an in-doubt transaction held.
type LockProbe struct {
	GID         string
	Participant int
	Row         int
	// Blocked is how long the probe waited (lock_timeout after lock_timeout) until
	// its update went through; Timeouts counts the waits.
	Blocked  time.Duration
	Timeouts int
	// LockedFor is from the row's PREPARE TRANSACTION to the probe's success.
	LockedFor time.Duration
	Err       string
}

// CrashReport is what a coordinator crash left and how it was repaired.
type CrashReport struct {
	At time.Time
	// Stops counts the transactions abandoned at each protocol point.
	Stops   map[string]int64
	InDoubt []InDoubt
	Probes  []LockProbe
	// Recovery is how long Recover took; Resolved is from the crash until every
	// in-doubt transaction was finished.
	Recovery time.Duration
	Resolved time.Duration
}

// Settle finishes every transaction the run left in doubt and returns what recovery
// did. After a crash it first lists what the crash left in doubt, starts a writer on
// each row those transactions hold, waits hold, recovers, and times how long the
// writers were blocked; the report is nil when the coordinator did not crash.
func (c *Cluster) Settle(ctx context.Context, hold time.Duration) (*CrashReport, []Resolution, error) {
	c.mu.Lock()
	at := c.crashedAt
	c.mu.Unlock()
	if at.IsZero() {
		res, err := Recover(ctx, c.pools, c.mode, c.logPath, GIDPrefix)
		return nil, res, err
	}
	rep := &CrashReport{At: at, Stops: c.co.Stops()}
	doubt, err := ListInDoubt(ctx, c.pools, GIDPrefix)
	if err != nil {
		return nil, nil, err
	}
	rep.InDoubt = doubt
	probes, err := c.heldRows(ctx)
	if err != nil {
		return nil, nil, err
	}
	prepared := map[string]time.Time{}
	for _, d := range doubt {
		prepared[fmt.Sprintf("%s@%d", d.GID, d.Participant)] = d.Prepared
	}
	var wg sync.WaitGroup
	for i := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &probes[i]
			var perr error
			p.Blocked, p.Timeouts, perr = probe(ctx, c.pools[p.Participant], p.Row)
			if perr != nil {
				p.Err = perr.Error()
			}
			p.LockedFor = time.Since(prepared[fmt.Sprintf("%s@%d", p.GID, p.Participant)])
		}()
	}
	select {
	case <-time.After(hold):
	case <-ctx.Done():
	}
	t0 := time.Now()
	res, err := Recover(ctx, c.pools, c.mode, c.logPath, GIDPrefix)
	rep.Recovery = time.Since(t0)
	rep.Resolved = time.Since(at)
	wg.Wait()
	rep.Probes = probes
	return rep, res, err
}

// heldRows lists, per in-doubt transaction and participant, the rows its update holds:
// those whose current version it deleted (xmax), which no other writer may touch until
// the transaction is finished. A two-rows transaction holds none.
func (c *Cluster) heldRows(ctx context.Context) ([]LockProbe, error) {
	var out []LockProbe
	for i, p := range c.pools {
		rows, err := p.Query(ctx, `
			SELECT x.gid, s.id FROM pg_prepared_xacts x JOIN simplecount s ON s.xmax = x.transaction
			WHERE x.database = current_database() AND starts_with(x.gid, $1) ORDER BY x.gid, s.id`, GIDPrefix)
		if err != nil {
			return nil, fmt.Errorf("participant %d: rows held: %w", i, err)
		}
		var gid string
		var row int
		if _, err := pgx.ForEachRow(rows, []any{&gid, &row}, func() error {
			out = append(out, LockProbe{GID: gid, Participant: i, Row: row})
			return nil
		}); err != nil {
			return nil, fmt.Errorf("participant %d: rows held: %w", i, err)
		}
	}
	return out, nil
}

// probe updates row in a loop of short lock timeouts until the update goes through, and
// returns how long that took and how many timeouts it met.
func probe(ctx context.Context, p *pgxpool.Pool, row int) (time.Duration, int, error) {
	t0 := time.Now()
	timeouts := 0
	for {
		err := pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '20ms'"); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE simplecount SET counter = counter WHERE id = $1", row)
			if err == nil {
				return errRollback // the probe changes nothing
			}
			return err
		})
		var pe *pgconn.PgError
		switch {
		case errors.Is(err, errRollback):
			if timeouts == 0 {
				return 0, 0, nil
			}
			return time.Since(t0), timeouts, nil
		case errors.As(err, &pe) && pe.Code == "55P03":
			timeouts++
		default:
			return time.Since(t0), timeouts, err
		}
		if ctx.Err() != nil {
			return time.Since(t0), timeouts, ctx.Err()
		}
	}
}

var errRollback = errors.New("rollback")
