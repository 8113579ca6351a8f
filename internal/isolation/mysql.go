package isolation

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ReadUncommitted is MySQL's weakest level (PostgreSQL takes it as READ COMMITTED).
const ReadUncommitted Level = "read-uncommitted"

// MySQLLevels are MySQL's and MariaDB's levels (InnoDB), weakest first.
var MySQLLevels = []Level{ReadUncommitted, ReadCommitted, RepeatableRead, Serializable}

// mysqlHermitage is Hermitage's table for MySQL/InnoDB (mysql.md, MySQL 5.6): the
// levels at which each anomaly happens. Its "R/O" cells (PMP and G-single at
// REPEATABLE READ: prevented for a transaction that only reads, not when it writes)
// are prevented here, since this package's PMP and G-single interleavings are the
// read-only ones.
var mysqlHermitage = map[string][]Level{
	"G0":       nil,
	"G1a":      {ReadUncommitted},
	"G1b":      {ReadUncommitted},
	"G1c":      {ReadUncommitted},
	"OTV":      {ReadUncommitted},
	"PMP":      {ReadUncommitted, ReadCommitted},
	"P4":       {ReadUncommitted, ReadCommitted, RepeatableRead},
	"G-single": {ReadUncommitted, ReadCommitted},
	"G2-item":  {ReadUncommitted, ReadCommitted, RepeatableRead},
	"G2":       {ReadUncommitted, ReadCommitted, RepeatableRead},
}

// mysqlDialect is MySQL or MariaDB through go-sql-driver. A row's versions are a
// comma-separated list, extended with CONCAT in the same UPDATE that sets the value.
type mysqlDialect struct{ dsn string }

func (mysqlDialect) family() string { return "MySQL/InnoDB" }

func (m mysqlDialect) connect(ctx context.Context) (conn, error) {
	cfg, err := mysql.ParseDSN(m.dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql dsn: %w", err)
	}
	cfg.Logger = log.New(io.Discard, "", 0)
	// An UPDATE's affected rows count the rows it matched.
	cfg.ClientFoundRows = true
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	cn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	s := &mySession{db: db, c: cn}
	if err := cn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&s.cid); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// show is PostgreSQL's statement but for versions, which is a text of comma-separated
// values in MySQL's table, not an array.
func (mysqlDialect) show(st step) string {
	switch st.op {
	case opWrite:
		return fmt.Sprintf("UPDATE "+table+" SET value = %[1]d, versions = CONCAT(versions, ',%[1]d') WHERE id = %[2]d", st.value, st.key)
	case opInsert:
		return fmt.Sprintf("INSERT INTO "+table+" VALUES (%d, %[2]d, '%[2]d')", st.key, st.value)
	}
	return stepSQL(st)
}

func (mysqlDialect) state(err error) (string, string) {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		code := string(me.SQLState[:])
		if code == "\x00\x00\x00\x00\x00" {
			code = "HY000"
		}
		return code, fmt.Sprintf("%d %s", me.Number, me.Message)
	}
	return "", ""
}

func (mysqlDialect) hermitage(sc scenario) []Level { return mysqlHermitage[sc.name] }

// mySession is one connection of a scenario, on a pool of its own of one connection.
type mySession struct {
	db  *sql.DB
	c   *sql.Conn
	cid int64
	// lastView is when waiting last read INNODB_TRX.
	lastView time.Time
}

// trxViewIdle is how long InnoDB's view of transactions must go unread to be refreshed
// (0.1 s), with a margin.
const trxViewIdle = 150 * time.Millisecond

func (s *mySession) exec(ctx context.Context, q string) (sql.Result, error) {
	return s.c.ExecContext(ctx, q)
}

func (s *mySession) prepare(ctx context.Context) error {
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (id INT PRIMARY KEY, value INT NOT NULL, versions VARCHAR(1024) NOT NULL) ENGINE=InnoDB",
		"TRUNCATE TABLE " + table,
	} {
		if _, err := s.exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func (s *mySession) seed(ctx context.Context) error {
	_, err := s.exec(ctx, "INSERT INTO "+table+" (id, value, versions) VALUES (1, 10, '10'), (2, 20, '20')")
	return err
}

func (s *mySession) limit(ctx context.Context) error {
	_, err := s.exec(ctx, "SET SESSION innodb_lock_wait_timeout = 30, SESSION max_statement_time = 30")
	return err
}

func (s *mySession) begin(ctx context.Context, l Level) error {
	if _, err := s.exec(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL "+l.sql()); err != nil {
		return err
	}
	_, err := s.exec(ctx, "START TRANSACTION")
	return err
}

func (s *mySession) read(ctx context.Context, key int) ([]int, bool, error) {
	var raw string
	err := s.c.QueryRowContext(ctx, "SELECT versions FROM "+table+" WHERE id = "+strconv.Itoa(key)).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	vs, err := parseVersions(raw)
	return vs, err == nil, err
}

func (s *mySession) write(ctx context.Context, insert bool, key, value int) (string, int64, error) {
	q := fmt.Sprintf("UPDATE "+table+" SET value = %[1]d, versions = CONCAT(versions, ',%[1]d') WHERE id = %[2]d", value, key)
	verb := "UPDATE"
	if insert {
		q = fmt.Sprintf("INSERT INTO "+table+" (id, value, versions) VALUES (%d, %[2]d, '%[2]d')", key, value)
		verb = "INSERT"
	}
	res, err := s.exec(ctx, q)
	if err != nil {
		return "", 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return "", 0, err
	}
	return fmt.Sprintf("%s %d", verb, n), n, nil
}

func (s *mySession) predicate(ctx context.Context, where string) (map[int][]int, error) {
	rows, err := s.c.QueryContext(ctx, "SELECT id, versions FROM "+table+" WHERE "+where+" ORDER BY id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := map[int][]int{}
	for rows.Next() {
		var id int
		var raw string
		if err := rows.Scan(&id, &raw); err != nil {
			return nil, err
		}
		if got[id], err = parseVersions(raw); err != nil {
			return nil, err
		}
	}
	return got, rows.Err()
}

func parseVersions(raw string) ([]int, error) {
	var vs []int
	for _, f := range strings.Split(raw, ",") {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("versions %q: %w", raw, err)
		}
		vs = append(vs, v)
	}
	return vs, nil
}

func (s *mySession) end(ctx context.Context, commit bool) (string, error) {
	q := "ROLLBACK"
	if commit {
		q = "COMMIT"
	}
	if _, err := s.exec(ctx, q); err != nil {
		return "", err
	}
	return q, nil
}

func (s *mySession) id() int64 { return s.cid }

// waiting reads InnoDB's own view: the connection's transaction in state LOCK WAIT.
// InnoDB refreshes the information_schema view of transactions only when it was last
// read more than 0.1 s before (a view read every 20 ms stayed at a scenario already
// over): reads are spaced 150 ms apart.
func (s *mySession) waiting(ctx context.Context, id int64) (bool, error) {
	if wait := trxViewIdle - time.Since(s.lastView); wait > 0 {
		time.Sleep(wait)
	}
	defer func() { s.lastView = time.Now() }()
	var n int
	err := s.c.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = "+
		strconv.FormatInt(id, 10)+" AND trx_state = 'LOCK WAIT'").Scan(&n)
	return n > 0, err
}

func (s *mySession) cancel(admin conn) {
	if a, ok := admin.(*mySession); ok {
		_, _ = a.c.ExecContext(context.Background(), "KILL QUERY "+strconv.FormatInt(s.cid, 10))
	}
}

func (s *mySession) close() {
	_ = s.c.Close()
	_ = s.db.Close()
}
