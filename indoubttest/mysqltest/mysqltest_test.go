package mysqltest_test

import (
	"context"
	"database/sql"
	"net"
	"os"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/mysqltest"
)

func TestMain(m *testing.M) { os.Exit(indoubttest.Main(m)) }

// dialer remembers the local address of the connection it dialed last: the test's
// one worker uses one connection at a time, so an attempt names it.
type dialer struct {
	mu   sync.Mutex
	last string
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.mu.Lock()
		d.last = c.LocalAddr().String()
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialer) addr() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

func open(t *testing.T, dsn string, d *dialer) *sql.DB {
	t.Helper()
	cfg, err := mysql.ParseDSN(mysqltest.DriverDSN(t, dsn))
	if err != nil {
		t.Fatal(err)
	}
	if d != nil {
		cfg.DialFunc = d.dial
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// An order service that retries its INSERT after any error applies an order twice when
// the proxy cut the reply of a commit that had changed its row; one that inserts under
// the order's own key with INSERT IGNORE applies it once. Each is held to exactly-once
// by the final counts read directly.
func TestMySQLRetries(t *testing.T) {
	for _, tc := range []struct {
		name, schema, insert string
		want                 checker.Verdict
	}{
		{"naive", "CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, k VARCHAR(64))", "INSERT INTO orders (k) VALUES (?)", checker.Invalid},
		{"keyed", "CREATE TABLE orders (k VARCHAR(64) PRIMARY KEY)", "INSERT IGNORE INTO orders (k) VALUES (?)", checker.Valid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mysqltest.MySQL(t, indoubttest.Seed(3))
			ctx := context.Background()
			direct := open(t, srv.DirectDSN, nil)
			if _, err := direct.ExecContext(ctx, tc.schema); err != nil {
				t.Fatal(err)
			}
			d := &dialer{}
			proxied := open(t, srv.DSN, d)
			rec := indoubttest.NewRecorder(t, srv)
			w := rec.Worker()
			srv.Arm("commit-cut:0.3")
			for range 30 {
				op := w.Invoke("apply", nil)
				for {
					// Pin the connection first: its address names the attempt.
					c, err := proxied.Conn(ctx)
					if err != nil {
						t.Fatal(err)
					}
					op.Conn(d.addr())
					_, err = c.ExecContext(ctx, tc.insert, op.ID())
					c.Close()
					if err == nil {
						op.Ok(nil)
						break
					}
					op.Retried(err)
				}
			}
			srv.Disarm()
			counts := checker.ExactlyOnceState{}
			rows, err := direct.QueryContext(ctx, "SELECT k, COUNT(*) FROM orders GROUP BY k")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var k string
				var n int64
				if err := rows.Scan(&k, &n); err != nil {
					t.Fatal(err)
				}
				counts[k] = n
			}
			rows.Close()
			rec.Read("read", counts)
			r := indoubttest.Evaluate(t, rec, indoubttest.ExactlyOnce())
			if r.Verdict != tc.want || r.Faults == 0 {
				t.Fatalf("verdict %v with %d faults, want %v: %s", r.Verdict, r.Faults, tc.want, r.Summary)
			}
		})
	}
}
