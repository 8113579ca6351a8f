package postgres_test

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers/postgres"
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
