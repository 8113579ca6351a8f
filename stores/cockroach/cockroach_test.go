package cockroach_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
	"github.com/indoubt/indoubt/stores/cockroach"
	"github.com/indoubt/indoubt/stores/postgres"
	"github.com/indoubt/indoubt/workloads"
)

var pg = servertest.Postgres(pgserver.Options{})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, pg)) }

// The adapter refuses a server that is not CockroachDB rather than run without its
// restart counters.
func TestOpenRefusesPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := cockroach.Open(ctx, cockroach.Config{DSN: pg.Get(t).DSN})
	if err == nil {
		c.Close()
		t.Fatal("Open accepted PostgreSQL")
	}
	if !strings.Contains(err.Error(), "not CockroachDB") || !strings.Contains(err.Error(), "PostgreSQL") {
		t.Errorf("error %q does not say what the server is", err)
	}
}

// A server error with SQLSTATE 40003 (raised here by PostgreSQL on request, as
// CockroachDB raises it for an ambiguous result) is unknown, with the reason server-unknown:
// the evidence the counter workload needs.
func TestAmbiguousResultIsUnknown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := postgres.Open(ctx, postgres.Config{DSN: pg.Get(t).DSN})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Exec(ctx, `DO $$ BEGIN RAISE EXCEPTION 'result is ambiguous' USING ERRCODE = '40003'; END $$`)
	if workloads.Classify(err) != workloads.ClassUnknown || workloads.ReasonOf(err) != workloads.ReasonServerUnknown {
		t.Fatalf("40003: class %v reason %q (%v)", workloads.Classify(err), workloads.ReasonOf(err), err)
	}
}

// TestCockroach runs against a real CockroachDB when INDOUBT_COCKROACH_DSN points at
// one (compose/ starts a cluster). None can be launched on a machine without Docker, so
// it skips otherwise, under CI too: there is no binary to install.
func TestCockroach(t *testing.T) {
	dsn := os.Getenv("INDOUBT_COCKROACH_DSN")
	if dsn == "" {
		t.Skip("no CockroachDB: set INDOUBT_COCKROACH_DSN=postgresql://root@localhost:26257/defaultdb?sslmode=disable after `docker compose -f compose/cockroach.yml up -d`")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := cockroach.Open(ctx, cockroach.Config{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Log(c.Version())
	m, err := c.RestartCounters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["txn.restarts.writetooold"]; !ok {
		t.Errorf("restart counters %v lack txn.restarts.writetooold", m)
	}
	for _, iso := range postgres.Isolations {
		t.Run(string(iso), func(t *testing.T) {
			k, err := c.Counter(postgres.CounterConfig{Mechanism: postgres.ReadWrite, Isolation: iso})
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Reset(ctx); err != nil {
				t.Fatal(err)
			}
			s, err := k.Session(ctx)
			if errors.Is(err, postgres.ErrIsolation) {
				// REPEATABLE READ is upgraded to SERIALIZABLE unless the cluster enables it.
				t.Skipf("the cluster does not run %s: %v", iso, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			out, err := s.Increment(ctx, workloads.Request{})
			if err != nil || out.Wrote != 1 || out.Read == nil || *out.Read != 0 {
				t.Fatalf("increment: %+v %v", out, err)
			}
		})
	}
}
