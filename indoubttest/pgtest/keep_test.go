package pgtest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/indoubttest/pgtest"
)

// logs records what a test logs, and passes everything else on.
type logs struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (l *logs) Log(args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, fmt.Sprint(args...))
}

// With INDOUBT_KEEP_DB=1 the test's database outlives it, with its rows, and the log
// names it with the statement that removes it; the statement does.
func TestKeepDB(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	t.Setenv(pgtest.EnvKeep, "1")
	ctx := context.Background()
	l := &logs{TB: t}
	var name string
	t.Run("the test", func(st *testing.T) {
		l.TB = st
		srv := pgtest.Postgres(l)
		name = srv.Database
		c, err := pgx.Connect(ctx, srv.DirectDSN)
		if err != nil {
			st.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, `CREATE TABLE orders (id int); INSERT INTO orders VALUES (7)`); err != nil {
			st.Fatal(err)
		}
	})
	msg := strings.Join(l.msgs, "\n")
	drop := fmt.Sprintf(`remove it with: DROP DATABASE IF EXISTS "%s" WITH (FORCE)`, name)
	if !strings.Contains(msg, "kept database "+name) || !strings.Contains(msg, drop) {
		t.Fatalf("the log %q does not name the kept database and how to remove it", msg)
	}
	admin, err := pgx.Connect(ctx, launched.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	u := strings.Replace(launched.DSN, "/indoubt?", "/"+name+"?", 1)
	kept, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("the kept database: %v", err)
	}
	var id int
	err = kept.QueryRow(ctx, `SELECT id FROM orders`).Scan(&id)
	kept.Close(ctx)
	if err != nil || id != 7 {
		t.Errorf("the kept database's row: %d, %v", id, err)
	}
	if _, err := admin.Exec(ctx, drop[len("remove it with: "):]); err != nil {
		t.Fatalf("the statement the log gives: %v", err)
	}
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, name).Scan(&n); err != nil || n != 0 {
		t.Errorf("after the statement the log gives, %d databases named %s (%v)", n, name, err)
	}
}
