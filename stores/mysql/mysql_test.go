package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/stores/mysql"
	"github.com/indoubt/indoubt/stores/storetest"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
)

var maria = servertest.New("mariadb", func(ctx context.Context) (*mariadb.Server, error) {
	return mariadb.Start(ctx, mariadb.Options{})
})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, maria)) }

func open(t *testing.T, mech mysql.Mechanism) *mysql.Client {
	t.Helper()
	srv := maria.Get(t)
	return storetest.Open(t, func(ctx context.Context) (*mysql.Client, error) {
		return mysql.Open(ctx, mysql.Config{DSN: srv.DSN, Mechanism: mech})
	})
}

func TestMySQLBudgetConformance(t *testing.T) {
	for _, mech := range []mysql.Mechanism{mysql.Autocommit, mysql.Transaction} {
		t.Run(string(mech), func(t *testing.T) {
			storetest.Budget(t, func(t *testing.T) budget.Store { return open(t, mech) })
		})
	}
}

func TestMySQLRegisterConformance(t *testing.T) {
	storetest.Register(t, func(t *testing.T) register.Store { return open(t, mysql.Autocommit).Register() })
}

func TestMySQLOpen(t *testing.T) {
	srv := maria.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := mysql.Open(ctx, mysql.Config{DSN: srv.DSN, Mechanism: "telepathy"}); err == nil || !strings.Contains(err.Error(), "telepathy") {
		t.Errorf("a bad mechanism: %v, want an error naming it", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = mysql.Open(ctx, mysql.Config{DSN: "mysql://indoubt:secret-pw@" + addr + "/indoubt"})
	if err == nil || !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "secret-pw") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a closed port: %v, want one line naming %s without the password", err, addr)
	}
	// The driver's own DSN form, with a parameter, reaches the same server.
	native := srv.User + ":" + srv.Password + "@tcp(" + srv.Addr + ")/" + srv.Database + "?timeout=5s"
	c, err := mysql.Open(ctx, mysql.Config{DSN: native})
	if err != nil {
		t.Fatalf("go-sql-driver DSN: %v", err)
	}
	c.Close()
	if _, err := mysql.Open(ctx, mysql.Config{DSN: srv.DSN + "?timeout=bogus"}); err == nil || strings.Contains(err.Error(), srv.Password) {
		t.Errorf("a bad parameter: %v, want an error without the password", err)
	}
}

// TestMySQLClassify provokes each error class on the real server and checks the
// contract.
func TestMySQLClassify(t *testing.T) {
	srv := maria.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg, err := mysql.ParseDSN(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Logger = log.New(io.Discard, "", 0)
	connector, err := driver.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { db.Close() })
	conn := func(t *testing.T) *sql.Conn {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for _, s := range []string{"DROP TABLE IF EXISTS cls", "CREATE TABLE cls (id INT PRIMARY KEY, v INT) ENGINE=InnoDB", "INSERT INTO cls VALUES (1, 0), (2, 0)"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name       string
		provoke    func(t *testing.T) error
		want       workloads.Class
		wantReason workloads.Reason
	}{
		{"syntax error is definite", func(t *testing.T) error {
			_, err := conn(t).ExecContext(ctx, "UPDATE cls SET")
			return err
		}, workloads.ClassDefinite, workloads.ServerCode("1064")},
		{"duplicate key is definite", func(t *testing.T) error {
			_, err := conn(t).ExecContext(ctx, "INSERT INTO cls VALUES (1, 1)")
			return err
		}, workloads.ClassDefinite, workloads.ServerCode("1062")},
		{"deadlock is a conflict", func(t *testing.T) error {
			a, b := conn(t), conn(t)
			ta, err := a.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer ta.Rollback()
			tb, err := b.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer tb.Rollback()
			if _, err := ta.ExecContext(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1"); err != nil {
				return err
			}
			if _, err := tb.ExecContext(ctx, "UPDATE cls SET v = v + 1 WHERE id = 2"); err != nil {
				return err
			}
			var wg sync.WaitGroup
			var errA, errB error
			wg.Add(2)
			go func() { defer wg.Done(); _, errA = ta.ExecContext(ctx, "UPDATE cls SET v = v + 1 WHERE id = 2") }()
			go func() { defer wg.Done(); _, errB = tb.ExecContext(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1") }()
			wg.Wait()
			if errA != nil {
				return errA
			}
			return errB
		}, workloads.ClassConflict, workloads.ReasonDeadlock},
		{"lock wait timeout is a conflict", func(t *testing.T) error {
			a, b := conn(t), conn(t)
			ta, err := a.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			defer ta.Rollback()
			if _, err := ta.ExecContext(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1"); err != nil {
				return err
			}
			if _, err := b.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 1"); err != nil {
				return err
			}
			_, err = b.ExecContext(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1")
			return err
		}, workloads.ClassConflict, workloads.ServerCode("1205")},
		{"timeout after the query was sent is unknown", func(t *testing.T) error {
			qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err := conn(t).ExecContext(qctx, "DO SLEEP(3)")
			return err
		}, workloads.ClassUnknown, workloads.ReasonTimeout},
		{"connection killed mid-statement is unknown", func(t *testing.T) error {
			c := conn(t)
			var id int64
			if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				return err
			}
			go func() {
				time.Sleep(300 * time.Millisecond)
				_, _ = db.ExecContext(ctx, "KILL CONNECTION ?", id)
			}()
			_, err := c.ExecContext(ctx, "UPDATE cls SET v = v + SLEEP(3) WHERE id = 2")
			return err
		}, workloads.ClassUnknown, ""},
		{"refused connection is definite", func(t *testing.T) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			addr := ln.Addr().String()
			ln.Close()
			c, err := mysql.Open(ctx, mysql.Config{DSN: "mysql://x:y@" + addr + "/x"})
			if err == nil {
				c.Close()
			}
			return err
		}, workloads.ClassDefinite, workloads.ReasonDial},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.provoke(t)
			if raw == nil {
				t.Fatal("no error")
			}
			got := mysql.Classify(raw)
			if !errors.Is(got, raw) {
				t.Errorf("Classify lost the cause: %v", got)
			}
			storetest.CheckClass(t, got, tc.want, tc.wantReason)
		})
	}
}

// An error during COMMIT is unknown: Galera answered it to a commit that took effect
// (docs/findings.md). It cannot be provoked on one server, so the error is built here as
// the driver returns it.
func TestMySQLClassifyErrorDuringCommit(t *testing.T) {
	err := &driver.MySQLError{Number: 1180, Message: "Error while appending streaming replication fragment(provider status: Not connected to Primary Component)"}
	storetest.CheckClass(t, mysql.Classify(err), workloads.ClassUnknown, workloads.ServerCode("1180"))
}

func TestMySQLIdempotentReplayAcrossSessions(t *testing.T) {
	c := open(t, mysql.Autocommit)
	ctx := context.Background()
	if err := c.Reset(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s1, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := c.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	req := workloads.Request{OpID: "w-1", Idempotent: true}
	first, err := s1.Decrement(ctx, req)
	if err != nil || !first.Applied || first.Replayed || first.Balance != 0 {
		t.Fatalf("first attempt = %+v, %v; want applied, balance 0", first, err)
	}
	again, err := s2.Decrement(ctx, req)
	if err != nil || !again.Applied || !again.Replayed || again.Balance != first.Balance {
		t.Fatalf("retry on another connection = %+v, %v; want the replayed original %+v", again, err, first)
	}
	if b, _ := c.Balance(ctx); b != 0 {
		t.Fatalf("balance = %d after one applied decrement of 1", b)
	}
}
