package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/insert"
)

// InsertTable is the insert workload's table, dropped and recreated for every run.
const InsertTable = "indoubt_insert"

// insertSeq is the sequence of the bigserial and identity-cache50 shapes (MariaDB's
// CREATE SEQUENCE).
const insertSeq = "indoubt_insert_seq"

var _ insert.Store = (*Client)(nil)

const erDupEntry = 1062

// insertKey is how one key shape is made on this server.
type insertKey struct {
	col string // the key column's type
	// draw, when set, is the query that has the server generate the next key: a
	// worker sends it before each INSERT and inserts the value it returns (neither
	// MySQL nor MariaDB hand back a default other than AUTO_INCREMENT's).
	draw string
	// prep runs before the table is created (the sequence).
	prep      []string
	generated string
	client    bool
	auto      bool // AUTO_INCREMENT: the OK packet's last insert id is the key
}

// keyShape returns how key is made on a server whose VERSION() is version: MariaDB
// has sequences (10.3) and a UUID type (10.7), UUID_v4() and UUID_v7() from 11.7.
func keyShape(ctx context.Context, db *sql.DB, key insert.Key, version string) (insertKey, error) {
	maria := strings.Contains(strings.ToLower(version), "mariadb")
	uuidCol := "CHAR(36)"
	if maria {
		uuidCol = "UUID"
	}
	has := func(fn string) bool {
		var s string
		return db.QueryRowContext(ctx, "SELECT "+fn+"()").Scan(&s) == nil
	}
	seq := func(cache string) (insertKey, error) {
		if !maria {
			return insertKey{}, fmt.Errorf("mysql: key %s: a sequence needs MariaDB (this server is %s)", key, version)
		}
		return insertKey{col: "BIGINT", draw: "SELECT NEXT VALUE FOR " + insertSeq,
			prep:      []string{"CREATE SEQUENCE " + insertSeq + " " + cache},
			generated: "a sequence (" + cache + ") on the server, drawn with NEXT VALUE FOR before each INSERT"}, nil
	}
	switch key {
	case insert.Identity:
		return insertKey{col: "BIGINT AUTO_INCREMENT", auto: true, generated: "AUTO_INCREMENT on the server"}, nil
	case insert.IdentityCache50:
		return seq("CACHE 50")
	case insert.BigSerial:
		return seq("NOCACHE")
	case insert.UUIDv4:
		if !has("UUID_v4") {
			return insertKey{}, fmt.Errorf("mysql: key %s: this server (%s) has no UUID_v4() (MariaDB 11.7 brought it); use client-uuidv4", key, version)
		}
		return insertKey{col: uuidCol, draw: "SELECT UUID_v4()", generated: "UUID_v4() on the server, drawn before each INSERT"}, nil
	case insert.UUIDv7:
		if !has("UUID_v7") {
			return insertKey{col: uuidCol, client: true, generated: "uuid v7 on the client (this server has no UUID_v7(): it came in MariaDB 11.7)"}, nil
		}
		return insertKey{col: uuidCol, draw: "SELECT UUID_v7()", generated: "UUID_v7() on the server, drawn before each INSERT"}, nil
	case insert.ClientMono:
		return insertKey{col: "BIGINT", client: true, generated: "monotonic counter on the client"}, nil
	case insert.ClientRandInt:
		return insertKey{col: "BIGINT", client: true, generated: "random 63-bit integer on the client"}, nil
	case insert.ClientUUIDv4:
		return insertKey{col: uuidCol, client: true, generated: "uuid v4 on the client"}, nil
	case insert.ClientUUIDv7:
		return insertKey{col: uuidCol, client: true, generated: "uuid v7 on the client"}, nil
	}
	return insertKey{}, fmt.Errorf("mysql: unknown key shape %q", key)
}

// lsn reads InnoDB's current log sequence number (MariaDB's Innodb_lsn_current), or
// "" where the server does not report it.
func (c *Client) lsn(ctx context.Context) string {
	var name, v string
	if err := c.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_lsn_current'").Scan(&name, &v); err != nil {
		return ""
	}
	return v
}

// PrepareInsert drops and recreates the insert table for key (the key, the op id and
// a BIGINT of data), with its sequence when the shape has one, and notes InnoDB's log
// sequence number, from which MeasureInsert reads the redo log written.
func (c *Client) PrepareInsert(ctx context.Context, key insert.Key) (insert.Plan, error) {
	var version string
	if err := c.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return insert.Plan{}, fmt.Errorf("mysql: server version: %w", Classify(err))
	}
	shape, err := keyShape(ctx, c.db, key, version)
	if err != nil {
		return insert.Plan{}, err
	}
	server := "MySQL " + version
	if v, _, ok := strings.Cut(version, "-MariaDB"); ok {
		server = "MariaDB " + v
	}
	p := insert.Plan{Key: key, ClientSide: shape.client, Generated: shape.generated, Server: server}
	qs := []string{"DROP TABLE IF EXISTS " + InsertTable}
	if strings.HasPrefix(server, "MariaDB") {
		qs = append(qs, "DROP SEQUENCE IF EXISTS "+insertSeq)
	}
	qs = append(qs, shape.prep...)
	qs = append(qs, "CREATE TABLE "+InsertTable+" (id "+shape.col+" PRIMARY KEY, op_id VARCHAR(128) NOT NULL, data BIGINT) ENGINE=InnoDB")
	for _, q := range qs {
		if err := c.Exec(ctx, q); err != nil {
			return insert.Plan{}, fmt.Errorf("mysql: %s: %w", q, err)
		}
	}
	if p.WALStart = c.lsn(ctx); p.WALStart == "" {
		p.Notes = append(p.Notes, "no redo log figure: the server does not report Innodb_lsn_current")
	}
	return p, nil
}

// InsertSession dials one connection for a worker.
func (c *Client) InsertSession(ctx context.Context, plan insert.Plan) (insert.Session, error) {
	var version string
	if err := c.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("mysql: server version: %w", Classify(err))
	}
	shape, err := keyShape(ctx, c.db, plan.Key, version)
	if err != nil {
		return nil, err
	}
	s := &insertSession{session: session{db: c.db}, shape: shape}
	if _, err := s.acquire(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

type insertSession struct {
	session
	shape insertKey
}

// Insert runs one autocommit INSERT (after drawing the server's key where the shape
// has the server generate it by a query). A duplicate key (1062) on a key the client
// chose is looked up: when the row there carries this operation's op id, an earlier
// attempt committed it, and the error says so (workloads.ReasonAlreadyApplied).
func (s *insertSession) Insert(ctx context.Context, key any, req workloads.Request) (string, error) {
	if err := workloads.Start(ctx); err != nil {
		return "", err
	}
	conn, err := s.acquire(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case s.shape.auto:
		res, err := conn.ExecContext(ctx, "INSERT INTO "+InsertTable+" (op_id, data) VALUES (?, 1)", req.OpID)
		if err != nil {
			return "", s.fail(err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return "", s.fail(err)
		}
		return strconv.FormatInt(id, 10), nil
	case s.shape.draw != "":
		var drawn string
		if err := conn.QueryRowContext(ctx, s.shape.draw).Scan(&drawn); err != nil {
			// Nothing was inserted yet: whatever happened, definitely not applied.
			err = s.fail(fmt.Errorf("draw a key: %w", err))
			return "", workloads.Definite(err, workloads.ReasonOf(err))
		}
		key = drawn
	}
	_, err = conn.ExecContext(ctx, "INSERT INTO "+InsertTable+" (id, op_id, data) VALUES (?, ?, 1)", key, req.OpID)
	if err == nil {
		return fmt.Sprint(key), nil
	}
	var me *mysql.MySQLError
	if s.shape.client && errors.As(err, &me) && me.Number == erDupEntry {
		var owner string
		if qerr := conn.QueryRowContext(ctx, "SELECT op_id FROM "+InsertTable+" WHERE id = ?", key).Scan(&owner); qerr != nil {
			if errors.Is(qerr, sql.ErrNoRows) {
				// The row that collided is gone: nothing proves whose it was.
				return "", s.fail(err)
			}
			return "", s.fail(qerr)
		}
		if owner == req.OpID {
			return "", workloads.Definite(err, workloads.ReasonAlreadyApplied)
		}
	}
	return "", s.fail(err)
}

// MeasureInsert reads the redo log written since PrepareInsert (InnoDB's log sequence
// numbers), the rows, the sequence's gaps and the table's index size as
// information_schema reports it after ANALYZE TABLE; InnoDB's primary key is the
// clustered index, so the size is the table's data and index length together, and
// then again after ALTER TABLE ... FORCE rebuilt it. No full-page image figure:
// InnoDB writes none to its redo log.
func (c *Client) MeasureInsert(ctx context.Context, plan insert.Plan) (insert.Measures, error) {
	var m insert.Measures
	if plan.WALStart != "" {
		start, err1 := strconv.ParseInt(plan.WALStart, 10, 64)
		end, err2 := strconv.ParseInt(c.lsn(ctx), 10, 64)
		if err1 == nil && err2 == nil {
			w := end - start
			m.WALBytes = &w
		}
	}
	if err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+InsertTable).Scan(&m.Rows); err != nil {
		return m, fmt.Errorf("mysql: count rows: %w", Classify(err))
	}
	if plan.Key.Sequence() {
		var gaps int64
		if err := c.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id) - MIN(id) + 1 - COUNT(*), 0) FROM "+InsertTable).Scan(&gaps); err != nil {
			return m, fmt.Errorf("mysql: sequence gaps: %w", Classify(err))
		}
		m.Gaps = &gaps
	}
	size := func() (*int64, error) {
		if err := c.Exec(ctx, "ANALYZE TABLE "+InsertTable); err != nil {
			return nil, err
		}
		var n int64
		err := c.db.QueryRowContext(ctx, "SELECT data_length + index_length FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?", InsertTable).Scan(&n)
		if err != nil {
			return nil, Classify(err)
		}
		return &n, nil
	}
	var err error
	if m.IndexBytes, err = size(); err != nil {
		return m, fmt.Errorf("mysql: index size: %w", err)
	}
	if err := c.Exec(ctx, "ALTER TABLE "+InsertTable+" FORCE"); err != nil {
		return m, fmt.Errorf("mysql: rebuild: %w", err)
	}
	if m.Reindexed, err = size(); err != nil {
		return m, fmt.Errorf("mysql: index size: %w", err)
	}
	return m, nil
}

// InsertedRows counts the insert table's rows by op id.
func (c *Client) InsertedRows(ctx context.Context) (map[string]int64, error) {
	rows, err := c.db.QueryContext(ctx, "SELECT op_id, COUNT(*) FROM "+InsertTable+" GROUP BY op_id")
	if err != nil {
		return nil, Classify(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var n int64
		if err := rows.Scan(&id, &n); err != nil {
			return nil, Classify(err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, Classify(err)
	}
	return out, nil
}
