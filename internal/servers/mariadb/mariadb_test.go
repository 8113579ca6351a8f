package mariadb_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// startMariaDB launches a server for one test, or skips (fails under CI=true) when
// MariaDB is not installed.
func startMariaDB(t *testing.T, opt mariadb.Options) *mariadb.Server {
	t.Helper()
	if opt.Dir == "" {
		opt.Dir = servertest.ReachableDir(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m, err := mariadb.Start(ctx, opt)
	if errors.Is(err, servers.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return m
}

// sql runs statements through Debian's mariadb client over TCP as the launch's user
// and returns the output, tab-separated without column names.
func sql(t *testing.T, m *mariadb.Server, password, stmts string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := exec.LookPath("mariadb")
	if err != nil {
		t.Skipf("no mariadb client: %v", err)
	}
	cmd := exec.CommandContext(ctx, cli, "--no-defaults", "-h", "127.0.0.1", "-P", strconv.Itoa(m.Port),
		"-u", m.User, "-N", "-B", m.Database, "-e", stmts)
	cmd.Env = append(os.Environ(), "MYSQL_PWD="+password)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestMariaDBStart checks that a launched server takes the launch's user and password
// on its port, refuses a wrong password, keeps a committed row through a kill and a
// clean restart, answers nothing while paused, and leaves no directory after Stop.
func TestMariaDBStart(t *testing.T) {
	m := startMariaDB(t, mariadb.Options{})
	if !strings.Contains(m.Version, "MariaDB") {
		t.Errorf("version %q", m.Version)
	}
	if want := "mysql://indoubt:" + m.Password + "@" + m.Addr + "/indoubt"; m.DSN != want {
		t.Errorf("DSN %q, want %q", m.DSN, want)
	}
	if out, err := sql(t, m, m.Password, "create table t (k int primary key, v int); insert into t values (1, 10); select v from t"); err != nil || out != "10" {
		t.Fatalf("sql: %q, %v", out, err)
	}
	if out, err := sql(t, m, "wrong", "select 1"); err == nil {
		t.Errorf("a wrong password was let in: %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port := m.Port
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Port != port {
		t.Errorf("port %d after Start, was %d", m.Port, port)
	}
	if out, err := sql(t, m, m.Password, "select v from t"); err != nil || out != "10" {
		t.Fatalf("after kill: %q, %v", out, err)
	}
	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = sql(t, m, m.Password, "select 1")
	}()
	select {
	case <-done:
		t.Errorf("a paused server answered")
	case <-time.After(time.Second):
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if out, err := sql(t, m, m.Password, "update t set v = 11; select v from t"); err != nil || out != "11" {
		t.Fatalf("after restart: %q, %v", out, err)
	}
	dir := m.Dir
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s left after Stop: %v", dir, err)
	}
}

// TestMariaDBSettings checks that a setting reaches the server and that one Start
// chooses is refused before anything starts.
func TestMariaDBSettings(t *testing.T) {
	if _, err := mariadb.Start(context.Background(), mariadb.Options{Settings: map[string]string{"port": "1"}}); err == nil || !strings.Contains(err.Error(), "chosen by") {
		t.Errorf("port setting: %v", err)
	}
	m := startMariaDB(t, mariadb.Options{Settings: map[string]string{"max_connections": "123"}})
	if out, err := sql(t, m, m.Password, "select @@max_connections"); err != nil || out != "123" {
		t.Errorf("max_connections: %q, %v", out, err)
	}
}

func TestMariaDBNotInstalled(t *testing.T) {
	t.Setenv("INDOUBT_MARIADB_BIN", t.TempDir())
	_, err := mariadb.Start(context.Background(), mariadb.Options{})
	if !errors.Is(err, servers.ErrNotInstalled) || !strings.Contains(err.Error(), "mariadb-server") {
		t.Fatalf("err = %v, want ErrNotInstalled naming the package", err)
	}
}

// TestMariaDBFailedStartLeavesNothing checks that a start the server refuses (an
// option it does not know) or that runs out of time leaves no process and nothing on
// disk, the password file included.
func TestMariaDBFailedStartLeavesNothing(t *testing.T) {
	if _, _, err := mariadb.Find(); err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	t.Run("option the server refuses", func(t *testing.T) {
		dir := servertest.ReachableDir(t)
		_, err := mariadb.Start(context.Background(), mariadb.Options{Dir: dir, Settings: map[string]string{"no-such-option": "1"}})
		if err == nil || !strings.Contains(err.Error(), "no-such-option") {
			t.Errorf("got %v, want the server's complaint about the option", err)
		}
		servertest.NothingLeft(t, dir)
	})
	t.Run("cancelled during start", func(t *testing.T) {
		dir := servertest.ReachableDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if _, err := mariadb.Start(ctx, mariadb.Options{Dir: dir}); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want a deadline error", err)
		}
		servertest.NothingLeft(t, dir)
	})
}
