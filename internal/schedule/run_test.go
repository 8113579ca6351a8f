package schedule

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

var pg = servertest.Postgres(postgres.Options{})

func TestMain(m *testing.M) { os.Exit(servertest.Main(m, pg)) }

// eventLog collects a proxy's fault events; add is safe for the proxy's goroutines.
type eventLog struct {
	mu  sync.Mutex
	evs []toxics.Event
}

func (l *eventLog) add(e toxics.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, e)
	l.mu.Unlock()
}

func (l *eventLog) All() []toxics.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]toxics.Event(nil), l.evs...)
}

// startProxy starts a PostgreSQL proxy in front of srv, closed when the test ends.
func startProxy(t *testing.T, srv *postgres.Server, seed int64) (*faults.Proxy, *eventLog) {
	t.Helper()
	log := &eventLog{}
	px, err := faults.Start(faults.Options{Upstream: srv.Addr, Protocol: toxics.Postgres{}, Seed: seed, Events: log.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	return px, log
}

// dsnVia is the server's DSN with the proxy's address in place of the server's.
func dsnVia(t testing.TB, srv *postgres.Server, addr string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(cfg.User, cfg.Password), Host: addr,
		Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
	return u.String()
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// freshAccount creates a table of its own with one row of the given balance.
func freshAccount(t *testing.T, direct *pgx.Conn, balance int) string {
	t.Helper()
	name := fmt.Sprintf("account_%d", rand.Uint32())
	_, err := direct.Exec(context.Background(), fmt.Sprintf("create table %s (id int primary key, balance int not null); insert into %s values (1, %d)", name, name, balance))
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func balance(t *testing.T, direct *pgx.Conn, table string) int {
	t.Helper()
	var b int
	if err := direct.QueryRow(context.Background(), "select balance from "+table+" where id = 1").Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// ambiguous is pgx's rule: outcome unknown = not safe to retry and not an error the
// server reported.
func ambiguous(err error) bool {
	var pgErr *pgconn.PgError
	return err != nil && !pgconn.SafeToRetry(err) && !errors.As(err, &pgErr)
}

// TestScheduleRun: a schedule arms and disarms each fault at its window, reports each
// change, and the proxy does what each fault says in between. Each step waits for the
// report of the window it is about, and opens its connection before: one update on an
// open connection is all that must fit in a window, whatever the load.
func TestScheduleRun(t *testing.T) {
	srv := pg.Get(t)
	direct := connect(t, srv.DSN)
	table := freshAccount(t, direct, 1000)
	px, evs := startProxy(t, srv, 1)
	specs := []string{"commit-drop:1@600ms-1600ms", "partition@2200ms-2800ms", "latency:60ms@3200ms-"}
	sched, err := Parse(specs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var windows []Window
	reported := make(chan Window, 16)
	done := make(chan error, 1)
	go func() {
		done <- sched.Run(ctx, px, time.Now(), func(w Window) {
			mu.Lock()
			windows = append(windows, w)
			mu.Unlock()
			reported <- w
		})
	}()
	// until waits for the report that fault's window opened (or closed).
	until := func(fault string, open bool) {
		t.Helper()
		for {
			select {
			case w := <-reported:
				if w.Fault == fault && w.Open == open {
					return
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no report of %s open=%v", fault, open)
			}
		}
	}
	dsn := dsnVia(t, srv, px.Addr())
	open := func() *pgx.Conn {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		c, err := pgx.Connect(cctx, dsn)
		if err != nil {
			t.Fatalf("connect through the proxy: %v", err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	update := func(c *pgx.Conn) (time.Duration, error) {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		t0 := time.Now()
		_, err := c.Exec(cctx, "update "+table+" set balance = balance - 1 where id = 1")
		return time.Since(t0), err
	}

	if _, err := update(open()); err != nil {
		t.Fatalf("before the drop window: %v", err)
	}
	c := open()
	until(specs[0], true)
	if _, err := update(c); !ambiguous(err) {
		t.Fatalf("in the drop window: error %v, want a dropped commit", err)
	}
	until(specs[0], false)
	if _, err := update(open()); err != nil {
		t.Fatalf("after the drop window: %v", err)
	}
	c = open()
	until(specs[1], true)
	if _, err := update(c); err == nil {
		t.Fatalf("in the partition: no error")
	}
	until(specs[1], false)
	c = open()
	until(specs[2], true)
	took, err := update(c)
	if err != nil {
		t.Fatalf("under the latency: %v", err)
	}
	if took < 60*time.Millisecond {
		t.Errorf("with 60ms latency downstream the update took %v", took)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	var got []string
	for _, w := range windows {
		got = append(got, fmt.Sprintf("%s open=%v", w.Fault, w.Open))
	}
	mu.Unlock()
	var want []string
	for _, f := range specs {
		want = append(want, f+" open=true", f+" open=false")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("windows %q, want %q", got, want)
	}
	if n := len(evs.All()); n != 1 {
		t.Errorf("%d fault events, want the one drop", n)
	}
	if px.Faults().Drop.P() != 0 {
		t.Errorf("drop still armed after its window")
	}
	if b := balance(t, direct, table); b != 997 {
		t.Errorf("balance %d, want 997 (three updates, one dropped, one partitioned)", b)
	}
}
