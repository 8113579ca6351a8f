package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/pgtest"
	"github.com/indoubt/indoubt/internal/judge/judgetest"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
)

// launched is the server this test binary starts itself and names in INDOUBT_POSTGRES_DSN,
// as a user would name a server of their own.
var launched *postgres.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pg, err := postgres.Start(ctx, postgres.Options{})
	cancel()
	switch {
	case errors.Is(err, servers.ErrNotInstalled) && os.Getenv("CI") != "true":
		fmt.Fprintf(os.Stderr, "pgtest: %v; the tests that need it skip\n", err)
	case err != nil:
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		os.Exit(3)
	default:
		launched = pg
		os.Setenv(pgtest.EnvDSN, pg.DSN)
	}
	code := indoubttest.Main(m)
	if launched != nil {
		if err := launched.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop: %v\n", err)
		}
	}
	os.Exit(code)
}

// A test against the server INDOUBT_POSTGRES_DSN names: a database of its own there,
// reached through the proxy, faults that fire, a check that passes for code that
// reports an error after a cut as unknown, and nothing left behind: the database is
// dropped and no goroutine outlives the test.
func TestExistingServer(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	ignore := goleak.IgnoreCurrent()
	var db string
	t.Run("test", func(t *testing.T) {
		srv := pgtest.Postgres(t)
		db = srv.Database
		if srv.DirectAddr != launched.Addr {
			t.Fatalf("direct address %s, want the named server's %s", srv.DirectAddr, launched.Addr)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, srv.DirectDSN)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `CREATE TABLE c (n int); INSERT INTO c VALUES (0)`); err != nil {
			t.Fatal(err)
		}
		srv.Arm("commit-cut:0.5")
		rec := indoubttest.NewRecorder(t, srv)
		w := rec.Worker()
		for range 20 {
			op := w.Invoke("decrement", nil)
			px, err := pgx.Connect(ctx, srv.DSN)
			if err == nil {
				_, err = px.Exec(ctx, `UPDATE c SET n = n + 1`)
				px.Close(ctx)
			}
			op.Done(indoubttest.Applied(-1), err)
		}
		srv.Disarm()
		if len(srv.Events()) == 0 {
			t.Fatal("no fault fired at probability 0.5 over 20 commits")
		}
		var n int64
		if err := conn.QueryRow(ctx, `SELECT n FROM c`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rec.Read("read", indoubttest.Balance(1000-n))
		if res := indoubttest.Check(t, rec, indoubttest.Budget(1000)); res.Verdict != checker.Valid {
			t.Fatalf("verdict %v", res.Verdict)
		}
	})
	goleak.VerifyNone(t, ignore)
	conn, err := pgx.Connect(context.Background(), launched.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, db).Scan(&left); err != nil || left {
		t.Errorf("database %s still exists after the test (err %v)", db, err)
	}
}

// A PostgreSQL-only test binary links no MongoDB, CQL or SQLite package (issue 11): the
// helper and the PostgreSQL payments example with its tests.
func TestLinksNoOtherStore(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	for _, pkg := range []string{"github.com/indoubt/indoubt/indoubttest/pgtest", "github.com/indoubt/indoubt/examples/payments/pgpay"} {
		out, err := exec.Command("go", "list", "-deps", "-test", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps -test %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"go.mongodb.org/", "github.com/gocql/", "modernc.org/sqlite", "github.com/FerretDB/", "github.com/redis/"} {
				if strings.HasPrefix(dep, banned) {
					t.Errorf("%s links %s", pkg, dep)
				}
			}
		}
	}
}

// Transfers with a naive retry, checked with the bank model: the cut commits that the
// retry applied again show as balances no set of transfers explains, and the message
// names the transfers with the proxy's evidence.
func TestBankTransfersNaive(t *testing.T) {
	if launched == nil {
		t.Skip("PostgreSQL is not installed")
	}
	srv := pgtest.Postgres(t)
	ctx := context.Background()
	direct, err := pgx.Connect(ctx, srv.DirectDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	if _, err := direct.Exec(ctx, `CREATE TABLE acct (id text PRIMARY KEY, balance bigint); INSERT INTO acct VALUES ('a', 100), ('b', 0)`); err != nil {
		t.Fatal(err)
	}
	transfer := func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, srv.DSN)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE acct SET balance = balance - 1 WHERE id = 'a'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE acct SET balance = balance + 1 WHERE id = 'b'`)
			return err
		})
	}
	srv.Arm("commit-cut:0.3")
	c := &capture{TB: t}
	rec := indoubttest.NewRecorder(c, srv)
	w := rec.Worker()
	for range 20 {
		op := w.Invoke("transfer", checker.Transfer{From: "a", To: "b", Amount: 1})
		var err error
		for range 5 { // the naive retry
			if err = transfer(ctx); err == nil {
				break
			}
			op.Retried(err)
		}
		op.Done(nil, err)
	}
	srv.Disarm()
	final := checker.Balances{}
	rows, err := direct.Query(ctx, `SELECT id, balance FROM acct`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var b int64
		if err := rows.Scan(&id, &b); err != nil {
			t.Fatal(err)
		}
		final[id] = b
	}
	rec.Read("read", final)
	res := indoubttest.Check(c, rec, indoubttest.Bank(checker.BankParams{Accounts: checker.Balances{"a": 100, "b": 0}, Floor: -1000}))
	if res.Verdict != checker.Invalid {
		t.Fatalf("verdict %v, want invalid: %s", res.Verdict, res.Summary)
	}
	// Its run directory, judged again from its files alone, gives its results.json.
	judgetest.Recheck(t, res.RunDir)
	msg := strings.Join(c.msgs, "\n")
	if !strings.Contains(msg, "applied 7 more times than allowed") && !strings.Contains(msg, "more times than allowed") || !strings.Contains(msg, "the proxy: operation ") {
		t.Errorf("message lacks the cause:\n%s", msg)
	}
	t.Logf("failed as it should:\n%s", msg)
	forget(t, res.RunDir)
}

// capture keeps the failures reported to it instead of failing the test.
type capture struct {
	testing.TB
	msgs []string
}

func (c *capture) Errorf(format string, args ...any) {
	c.msgs = append(c.msgs, fmt.Sprintf(format, args...))
}
func (c *capture) Failed() bool { return len(c.msgs) > 0 }
