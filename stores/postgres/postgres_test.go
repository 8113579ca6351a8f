package postgres_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/stores/postgres"
	"github.com/indoubt/indoubt/stores/storetest"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
)

var pg = servertest.Postgres(pgserver.Options{})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, pg)) }

func open(t *testing.T, mech postgres.Mechanism) *postgres.Client {
	t.Helper()
	srv := pg.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := postgres.Open(ctx, postgres.Config{DSN: srv.DSN, Mechanism: mech})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestBudgetConformance(t *testing.T) {
	for _, mech := range []postgres.Mechanism{postgres.Autocommit, postgres.Transaction} {
		t.Run(string(mech), func(t *testing.T) {
			storetest.Budget(t, func(t *testing.T) budget.Store { return open(t, mech) })
		})
	}
}

func TestOpenRejectsUnknownMechanism(t *testing.T) {
	_, err := postgres.Open(context.Background(), postgres.Config{DSN: "postgres://x@127.0.0.1:1/x", Mechanism: "telepathy"})
	if err == nil || !strings.Contains(err.Error(), "telepathy") {
		t.Fatalf("Open with a bad mechanism: err = %v, want one naming it", err)
	}
}

func TestOpenUnreachableIsDefinite(t *testing.T) {
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = postgres.Open(ctx, postgres.Config{DSN: "postgres://indoubt@127.0.0.1:" + strconv.Itoa(port) + "/indoubt?connect_timeout=2"})
	if err == nil {
		t.Fatal("Open of a closed port succeeded")
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
}

// TestClassify provokes each error class on the real server and checks the contract.
func TestClassify(t *testing.T) {
	srv := pg.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	connect := func(t *testing.T) *pgx.Conn {
		c, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	setup := connect(t)
	if _, err := setup.Exec(ctx, `DROP TABLE IF EXISTS cls; CREATE TABLE cls (id int PRIMARY KEY, v int); INSERT INTO cls VALUES (1, 0), (2, 0)`); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name       string
		provoke    func(t *testing.T) error
		want       workloads.Class
		wantReason workloads.Reason
	}{
		{"syntax error is definite", func(t *testing.T) error {
			_, err := connect(t).Exec(ctx, "UPDATE cls SET")
			return err
		}, workloads.ClassDefinite, workloads.ServerCode("42601")},
		{"unique violation is definite", func(t *testing.T) error {
			_, err := connect(t).Exec(ctx, "INSERT INTO cls VALUES (1, 1)")
			return err
		}, workloads.ClassDefinite, workloads.ServerCode("23505")},
		{"serialization failure is a conflict", func(t *testing.T) error {
			a, b := connect(t), connect(t)
			ta, err := a.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
			if err != nil {
				return err
			}
			defer ta.Rollback(ctx)
			tb, err := b.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
			if err != nil {
				return err
			}
			defer tb.Rollback(ctx)
			var v int
			ta.QueryRow(ctx, "SELECT v FROM cls WHERE id = 1").Scan(&v)
			tb.QueryRow(ctx, "SELECT v FROM cls WHERE id = 1").Scan(&v)
			if _, err := ta.Exec(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1"); err != nil {
				return err
			}
			if err := ta.Commit(ctx); err != nil {
				return err
			}
			_, err = tb.Exec(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1")
			return err
		}, workloads.ClassConflict, workloads.ReasonSerialization},
		{"deadlock is a conflict", func(t *testing.T) error {
			a, b := connect(t), connect(t)
			ta, _ := a.Begin(ctx)
			defer ta.Rollback(ctx)
			tb, _ := b.Begin(ctx)
			defer tb.Rollback(ctx)
			if _, err := ta.Exec(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1"); err != nil {
				return err
			}
			if _, err := tb.Exec(ctx, "UPDATE cls SET v = v + 1 WHERE id = 2"); err != nil {
				return err
			}
			var wg sync.WaitGroup
			var errA, errB error
			wg.Add(2)
			go func() { defer wg.Done(); _, errA = ta.Exec(ctx, "UPDATE cls SET v = v + 1 WHERE id = 2") }()
			go func() { defer wg.Done(); _, errB = tb.Exec(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1") }()
			wg.Wait()
			if errA != nil {
				return errA
			}
			return errB
		}, workloads.ClassConflict, workloads.ReasonDeadlock},
		{"timeout after the query was sent is unknown", func(t *testing.T) error {
			c := connect(t)
			qctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err := c.Exec(qctx, "SELECT pg_sleep(5)")
			return err
		}, workloads.ClassUnknown, workloads.ReasonTimeout},
		{"connection killed mid-statement is unknown", func(t *testing.T) error {
			c := connect(t)
			pid := c.PgConn().PID()
			go func() {
				time.Sleep(300 * time.Millisecond)
				k, err := pgx.Connect(ctx, srv.DSN)
				if err == nil {
					k.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
					k.Close(ctx)
				}
			}()
			// The server answers a terminated backend with 57P01 before closing; what
			// the client reports depends on timing, so accept either the server's
			// error (definite: it answered before applying) or a lost connection.
			_, err := c.Exec(ctx, "UPDATE cls SET v = v + 1 WHERE id = 1 AND pg_sleep(3) IS NOT NULL")
			return err
		}, 0, ""},
		{"closed connection before sending is definite", func(t *testing.T) error {
			c := connect(t)
			c.Close(ctx)
			_, err := c.Exec(ctx, "SELECT 1")
			return err
		}, workloads.ClassDefinite, ""},
		{"refused connection is definite", func(t *testing.T) error {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return err
			}
			addr := ln.Addr().String()
			ln.Close()
			_, err = pgx.Connect(ctx, "postgres://indoubt@"+addr+"/indoubt")
			return err
		}, workloads.ClassDefinite, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.provoke(t)
			if raw == nil {
				t.Fatal("the server returned no error")
			}
			got := postgres.Classify(raw)
			if !errors.Is(got, raw) && got.Error() != raw.Error() {
				t.Errorf("Classify lost the cause: %v", got)
			}
			class := workloads.Classify(got)
			if tc.want == 0 {
				if class != workloads.ClassUnknown && !(class == workloads.ClassDefinite && workloads.ReasonOf(got) == workloads.ServerCode("57P01")) {
					t.Errorf("class = %v (%v), want unknown, or definite 57P01", class, raw)
				}
				return
			}
			if class != tc.want {
				t.Errorf("class = %v, want %v (error: %v)", class, tc.want, raw)
			}
			if tc.wantReason != "" && workloads.ReasonOf(got) != tc.wantReason {
				t.Errorf("reason = %q, want %q", workloads.ReasonOf(got), tc.wantReason)
			}
		})
	}
}

func TestIdempotentReplayAcrossSessions(t *testing.T) {
	c := open(t, postgres.Autocommit)
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
	if err != nil || !first.Applied || first.Replayed {
		t.Fatalf("first attempt = %+v, %v; want applied", first, err)
	}
	again, err := s2.Decrement(ctx, req)
	if err != nil || !again.Applied || !again.Replayed || again.Balance != first.Balance {
		t.Fatalf("retry on another connection = %+v, %v; want the replayed original %+v", again, err, first)
	}
	if b, _ := c.Balance(ctx); b != 0 {
		t.Fatalf("balance = %d after one applied decrement of 1", b)
	}
}

func TestRegisterConformance(t *testing.T) {
	storetest.Register(t, func(t *testing.T) register.Store { return open(t, postgres.Autocommit).Register() })
}
