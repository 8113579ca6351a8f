package isolation

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// postgresDialect is PostgreSQL through pgx.
type postgresDialect struct{ dsn string }

func (postgresDialect) family() string { return "PostgreSQL" }

func (p postgresDialect) connect(ctx context.Context) (conn, error) {
	c, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		return nil, err
	}
	return &pgSession{c: c}, nil
}

func (postgresDialect) show(st step) string { return stepSQL(st) }

func (postgresDialect) state(err error) (string, string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.Message
	}
	return "", ""
}

func (postgresDialect) hermitage(sc scenario) []Level { return sc.hermitage }

// pgSession is one pgx connection of a scenario.
type pgSession struct{ c *pgx.Conn }

func (s *pgSession) prepare(ctx context.Context) error {
	for _, q := range []string{
		"CREATE TABLE IF NOT EXISTS " + table + " (id int PRIMARY KEY, value int NOT NULL, versions int[] NOT NULL)",
		"TRUNCATE " + table,
	} {
		if _, err := s.c.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func (s *pgSession) seed(ctx context.Context) error {
	_, err := s.c.Exec(ctx, "INSERT INTO "+table+" (id, value, versions) VALUES (1, 10, ARRAY[10]), (2, 20, ARRAY[20])")
	return err
}

func (s *pgSession) limit(ctx context.Context) error {
	_, err := s.c.Exec(ctx, "SET statement_timeout = '30s'")
	return err
}

func (s *pgSession) begin(ctx context.Context, l Level) error {
	_, err := s.c.Exec(ctx, "BEGIN ISOLATION LEVEL "+l.sql())
	return err
}

func (s *pgSession) read(ctx context.Context, key int) ([]int, bool, error) {
	var vs []int
	err := s.c.QueryRow(ctx, "SELECT versions FROM "+table+" WHERE id = $1", key).Scan(&vs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	return vs, err == nil, err
}

func (s *pgSession) write(ctx context.Context, insert bool, key, value int) (string, int64, error) {
	q := "UPDATE " + table + " SET value = $2::int, versions = versions || $2::int WHERE id = $1"
	if insert {
		q = "INSERT INTO " + table + " (id, value, versions) VALUES ($1, $2, ARRAY[$2::int])"
	}
	tag, err := s.c.Exec(ctx, q, key, value)
	if err != nil {
		return "", 0, err
	}
	return tag.String(), tag.RowsAffected(), nil
}

func (s *pgSession) predicate(ctx context.Context, where string) (map[int][]int, error) {
	rows, err := s.c.Query(ctx, "SELECT id, versions FROM "+table+" WHERE "+where+" ORDER BY id")
	if err != nil {
		return nil, err
	}
	got := map[int][]int{}
	for rows.Next() {
		var id int
		var vs []int
		if err := rows.Scan(&id, &vs); err != nil {
			rows.Close()
			return nil, err
		}
		got[id] = vs
	}
	return got, rows.Err()
}

func (s *pgSession) end(ctx context.Context, commit bool) (string, error) {
	q := "ROLLBACK"
	if commit {
		q = "COMMIT"
	}
	tag, err := s.c.Exec(ctx, q)
	return tag.String(), err
}

func (s *pgSession) id() int64 { return int64(s.c.PgConn().PID()) }

func (s *pgSession) waiting(ctx context.Context, id int64) (bool, error) {
	var blocked bool
	err := s.c.QueryRow(ctx, "SELECT cardinality(pg_blocking_pids($1)) > 0", int(id)).Scan(&blocked)
	return blocked, err
}

func (s *pgSession) cancel(conn) { _ = s.c.PgConn().CancelRequest(context.Background()) }

func (s *pgSession) close() { s.c.Close(context.Background()) }
