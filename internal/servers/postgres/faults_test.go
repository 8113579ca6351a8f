package postgres_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// TestPostgresProcessFaults kills, pauses and restarts a launched PostgreSQL: a committed
// row survives the kill (crash recovery) and the clean restart, the port and the
// password stay, and a paused server answers nothing until it is resumed.
func TestPostgresProcessFaults(t *testing.T) {
	pg := startPostgres(t, postgres.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := pgConnect(t, pg.DSN)
	if _, err := c.Exec(ctx, "create table t (v int); insert into t values (7)"); err != nil {
		t.Fatal(err)
	}
	port, pid := pg.Port, pg.Pid()
	t0 := time.Now()
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill took %v", time.Since(t0))
	t0 = time.Now()
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("postmaster %d still alive after Kill", pid)
	}
	if _, err := net.DialTimeout("tcp", pg.Addr, time.Second); err == nil {
		t.Error("the killed server's port still accepts connections")
	}
	if err := pg.Pause(); err == nil {
		t.Error("Pause of a killed server: no error")
	}
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("start after kill took %v", time.Since(t0))
	if pg.Port != port || pg.Pid() == pid {
		t.Errorf("after Start: port %d (was %d), pid %d (was %d)", pg.Port, port, pg.Pid(), pid)
	}
	var v int
	if err := pgConnect(t, pg.DSN).QueryRow(ctx, "select v from t").Scan(&v); err != nil || v != 7 {
		t.Fatalf("committed row after kill and start: %d, %v", v, err)
	}

	if err := pg.Pause(); err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithTimeout(ctx, 700*time.Millisecond)
	_, err := pgConnectCtx(qctx, pg.DSN)
	qcancel()
	if err == nil {
		t.Error("a paused server accepted a login")
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	pid = pg.Pid()
	if err := pg.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if pg.Pid() == pid || pg.Port != port {
		t.Errorf("after Restart: pid %d (was %d), port %d (was %d)", pg.Pid(), pid, pg.Port, port)
	}
	if err := pgConnect(t, pg.DSN).QueryRow(ctx, "select v from t").Scan(&v); err != nil || v != 7 {
		t.Fatalf("committed row after restart: %d, %v", v, err)
	}
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	// Stop of a killed server has nothing to stop and still removes the directory.
	if err := pg.Stop(); err != nil {
		t.Errorf("Stop after Kill: %v", err)
	}
}

func pgConnectCtx(ctx context.Context, dsn string) (any, error) {
	c, err := pgxConnect(ctx, dsn)
	if err == nil {
		_ = c.Close(context.Background())
	}
	return c, err
}

func pgxConnect(ctx context.Context, dsn string) (*pgx.Conn, error) { return pgx.Connect(ctx, dsn) }

// TestPostgresFaultsReachEveryBackend holds pause and kill to every process of the
// server, not only the postmaster: PostgreSQL's backends each run in a session of their
// own (setsid), so a signal to the postmaster's process group never reaches them. A
// paused server's backends are stopped and an open connection gets no answer; a killed
// server's backend busy in a long query is gone when Kill returns.
func TestPostgresFaultsReachEveryBackend(t *testing.T) {
	pg := startPostgres(t, postgres.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	idle, busy := pgConnect(t, pg.DSN), pgConnect(t, pg.DSN)
	var idlePid, busyPid int
	if err := idle.QueryRow(ctx, "select pg_backend_pid()").Scan(&idlePid); err != nil {
		t.Fatal(err)
	}
	if err := busy.QueryRow(ctx, "select pg_backend_pid()").Scan(&busyPid); err != nil {
		t.Fatal(err)
	}
	// A statement that computes until it is stopped and never waits on a latch, where
	// a backend would notice its postmaster's death by itself.
	busyErr := make(chan error, 1)
	go func() {
		_, err := busy.Exec(context.Background(), "do $$ begin loop end loop; end $$")
		busyErr <- err
	}()
	for state(t, busyPid) != 'R' && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}

	if err := pg.Pause(); err != nil {
		t.Fatal(err)
	}
	// A stop takes effect when the process next runs in user space: waited for, a
	// process the signal never reached stays R or S.
	for name, pid := range map[string]int{"postmaster": pg.Pid(), "idle backend": idlePid, "busy backend": busyPid} {
		s := state(t, pid)
		for deadline := time.Now().Add(5 * time.Second); s != 'T' && time.Now().Before(deadline); s = state(t, pid) {
			time.Sleep(10 * time.Millisecond)
		}
		if s != 'T' {
			t.Errorf("paused server: %s %d in state %c, want T (stopped)", name, pid, s)
		}
	}
	qctx, qcancel := context.WithTimeout(ctx, 700*time.Millisecond)
	var one int
	err := idle.QueryRow(qctx, "select 1").Scan(&one)
	qcancel()
	if err == nil {
		t.Error("a paused server answered a query on a connection open before the pause")
	}
	if err := pg.Resume(); err != nil {
		t.Fatal(err)
	}
	if s := state(t, busyPid); s == 'T' {
		t.Errorf("resumed server: busy backend %d still stopped", busyPid)
	}

	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	if s := state(t, busyPid); s != 0 && s != 'Z' {
		t.Errorf("killed server: busy backend %d in state %c when Kill returned, want gone", busyPid, s)
	}
	select {
	case err := <-busyErr:
		if err == nil {
			t.Error("the long query succeeded on a killed server")
		}
	case <-ctx.Done():
		t.Error("the long query got no error from a killed server")
	}
	if err := pg.Stop(); err != nil {
		t.Errorf("Stop after Kill: %v", err)
	}
	servertest.NothingLeft(t, pg.Dir)
}

// state returns the state letter of process pid from /proc/PID/stat (R running, S
// sleeping, T stopped, Z zombie), 0 when there is no such process.
func state(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return b[i+2]
}
