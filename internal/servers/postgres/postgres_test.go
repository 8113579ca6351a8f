package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

func startPostgres(t *testing.T, opt postgres.Options) *postgres.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := postgres.Start(ctx, opt)
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	return pg
}

func pgConnect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func pgSetting(t *testing.T, c *pgx.Conn, name string) string {
	t.Helper()
	var v string
	if err := c.QueryRow(context.Background(), "select current_setting($1)", name).Scan(&v); err != nil {
		t.Fatalf("setting %s: %v", name, err)
	}
	return v
}

func TestPostgres(t *testing.T) {
	pg := startPostgres(t, postgres.Options{})

	t.Run("addresses", func(t *testing.T) {
		if want := "127.0.0.1:" + strconv.Itoa(pg.Port); pg.Addr != want {
			t.Errorf("Addr %s, want %s", pg.Addr, want)
		}
		if len(pg.Password) != 32 {
			t.Errorf("Password %q: want 32 hex digits", pg.Password)
		}
		if want := fmt.Sprintf("postgres://indoubt:%s@127.0.0.1:%d/indoubt?sslmode=disable", pg.Password, pg.Port); pg.DSN != want {
			t.Errorf("DSN %s, want %s", pg.DSN, want)
		}
		if _, err := os.Stat(filepath.Join(pg.SocketDir, ".s.PGSQL."+strconv.Itoa(pg.Port))); err != nil {
			t.Errorf("unix socket: %v", err)
		}
		if _, err := os.Stat(filepath.Join(pg.BinDir, "postgres")); err != nil {
			t.Errorf("BinDir: %v", err)
		}
		if pg.Version == "" || !strings.HasPrefix(pg.DataDir, pg.Dir) {
			t.Errorf("Version %q, DataDir %s in Dir %s", pg.Version, pg.DataDir, pg.Dir)
		}
	})

	t.Run("serves queries as indoubt on indoubt", func(t *testing.T) {
		c := pgConnect(t, pg.DSN)
		var user, db, version string
		if err := c.QueryRow(context.Background(),
			"select current_user, current_database(), current_setting('server_version_num')").Scan(&user, &db, &version); err != nil {
			t.Fatal(err)
		}
		if user != "indoubt" || db != "indoubt" {
			t.Errorf("user %s, database %s, want indoubt, indoubt", user, db)
		}
		if !strings.HasPrefix(version, pg.Version) {
			t.Errorf("server_version_num %s, Version %s", version, pg.Version)
		}
	})

	t.Run("refuses clients without the password", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, c := range []struct{ name, dsn, password string }{
			{"no password", fmt.Sprintf("postgres://indoubt@%s/indoubt?sslmode=disable", pg.Addr), ""},
			{"wrong password", fmt.Sprintf("postgres://indoubt@%s/indoubt?sslmode=disable", pg.Addr), "wrong"},
			{"unix socket, no password", fmt.Sprintf("host=%s port=%d user=indoubt dbname=indoubt", pg.SocketDir, pg.Port), ""},
		} {
			name := c.name
			cfg, err := pgx.ParseConfig(c.dsn)
			if err != nil {
				t.Fatal(err)
			}
			// Set after parsing: not PGPASSWORD or ~/.pgpass of the machine running the test.
			cfg.Password = c.password
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err == nil {
				conn.Close(ctx)
				t.Errorf("%s: connected", name)
				continue
			}
			if !strings.Contains(err.Error(), "password") && !strings.Contains(err.Error(), "28P01") {
				t.Errorf("%s: %v, want a password error", name, err)
			}
		}
		b, err := os.ReadFile(filepath.Join(pg.DataDir, "pg_hba.conf"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") && f[len(f)-1] != "scram-sha-256" {
				t.Errorf("pg_hba.conf line %q: want scram-sha-256", l)
			}
		}
		if _, err := os.Stat(filepath.Join(pg.Dir, "pwfile")); !os.IsNotExist(err) {
			t.Errorf("pwfile: %v, want it removed after initdb", err)
		}
	})

	t.Run("durability at defaults, room for clients", func(t *testing.T) {
		c := pgConnect(t, pg.DSN)
		for name, want := range map[string]string{"fsync": "on", "synchronous_commit": "on", "max_connections": "200"} {
			if got := pgSetting(t, c, name); got != want {
				t.Errorf("%s = %s, want %s", name, got, want)
			}
		}
	})

	t.Run("80 clients at once", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 80)
		conns := make(chan *pgx.Conn, 80)
		for range 80 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				c, err := pgx.Connect(ctx, pg.DSN)
				if err != nil {
					errs <- err
					return
				}
				conns <- c
				var one int
				if err := c.QueryRow(ctx, "select 1").Scan(&one); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		close(conns)
		for c := range conns {
			_ = c.Close(context.Background())
		}
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("runs unprivileged in its own process group", func(t *testing.T) {
		fi, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pg.Pid())))
		if err != nil {
			t.Fatal(err)
		}
		uid := fi.Sys().(*syscall.Stat_t).Uid
		if os.Geteuid() == 0 && uid == 0 {
			t.Errorf("postgres runs as root")
		}
		if os.Geteuid() != 0 && uid != uint32(os.Geteuid()) {
			t.Errorf("postgres runs as uid %d, want the caller's %d", uid, os.Geteuid())
		}
		if pgid, _ := syscall.Getpgid(pg.Pid()); pgid != pg.Pid() {
			t.Errorf("process group %d, want its own %d", pgid, pg.Pid())
		}
	})

	t.Run("log", func(t *testing.T) {
		b, err := os.ReadFile(pg.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "ready to accept connections") {
			t.Errorf("log %s lacks the ready line:\n%s", pg.LogPath, b)
		}
	})

	t.Run("stop", func(t *testing.T) {
		pid := pg.Pid()
		var wg sync.WaitGroup
		errs := make([]error, 3)
		for i := range errs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = pg.Stop() }()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("stop %d: %v", i, err)
			}
		}
		if err := pg.Stop(); err != nil {
			t.Errorf("stop again: %v", err)
		}
		select {
		case <-pg.Exited():
		default:
			t.Errorf("Exited not closed")
		}
		if servertest.Alive(pid) {
			t.Errorf("postmaster %d alive after Stop", pid)
		}
		if !servertest.Eventually(func() bool { return len(servertest.GroupAlive(pid)) == 0 }) {
			t.Errorf("processes left in group %d: %v", pid, servertest.GroupAlive(pid))
		}
		if c, err := net.DialTimeout("tcp", pg.Addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections", pg.Addr)
		}
		if _, err := os.Stat(pg.Dir); !os.IsNotExist(err) {
			t.Errorf("dir %s: %v, want it removed", pg.Dir, err)
		}
	})
}

func TestPostgresTwoAtOnce(t *testing.T) {
	parent := servertest.ReachableDir(t)
	logPath := filepath.Join(parent, "kept.log")
	// Too long a path for a unix socket inside it: the socket goes elsewhere.
	long := filepath.Join(parent, strings.Repeat("d", 90))
	if err := os.Mkdir(long, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := []postgres.Options{
		{Dir: long, Settings: map[string]string{"max_connections": "64", "work_mem": "8MB"}},
		{Dir: parent, Keep: true, LogPath: logPath},
	}
	pgs := make([]*postgres.Server, len(opts))
	var wg sync.WaitGroup
	for i, opt := range opts {
		wg.Add(1)
		go func() { defer wg.Done(); pgs[i] = startPostgres(t, opt) }()
	}
	wg.Wait()
	if pgs[0] == nil || pgs[1] == nil {
		t.FailNow()
	}
	if pgs[0].Port == pgs[1].Port {
		t.Fatalf("both on port %d", pgs[0].Port)
	}
	c0, c1 := pgConnect(t, pgs[0].DSN), pgConnect(t, pgs[1].DSN)
	if got := pgSetting(t, c0, "max_connections"); got != "64" {
		t.Errorf("max_connections %s, want the setting 64", got)
	}
	if got := pgSetting(t, c0, "work_mem"); got != "8MB" {
		t.Errorf("work_mem %s, want 8MB", got)
	}
	if got := pgSetting(t, c1, "max_connections"); got != "200" {
		t.Errorf("max_connections %s, want the default 200", got)
	}
	// The two are distinct clusters.
	distinctClusters(t, c0, c1)

	sock := filepath.Join(pgs[0].SocketDir, ".s.PGSQL."+strconv.Itoa(pgs[0].Port))
	if _, err := os.Stat(sock); err != nil || strings.HasPrefix(sock, long) {
		t.Errorf("socket %s: %v; want it outside the long Dir", sock, err)
	}
	_ = c0.Close(context.Background())
	if err := pgs[0].Stop(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{pgs[0].Dir, pgs[0].SocketDir} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed", d, err)
		}
	}

	if pgs[1].LogPath != logPath || !strings.HasPrefix(pgs[1].Dir, parent) {
		t.Errorf("LogPath %s, Dir %s; want %s and a dir in %s", pgs[1].LogPath, pgs[1].Dir, logPath, parent)
	}
	_ = c1.Close(context.Background())
	if err := pgs[1].Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pgs[1].DataDir, "PG_VERSION")); err != nil {
		t.Errorf("Keep: data dir gone: %v", err)
	}
	if b, err := os.ReadFile(logPath); err != nil || !strings.Contains(string(b), "database system is shut down") {
		t.Errorf("log %s after stop: %v\n%s", logPath, err, b)
	}
}

func TestPostgresFailedStartLeavesNothing(t *testing.T) {
	if _, err := postgres.Find(); err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	t.Run("bad setting value", func(t *testing.T) {
		dir := servertest.ReachableDir(t)
		_, err := postgres.Start(context.Background(), postgres.Options{Dir: dir,
			Settings: map[string]string{"max_connections": "many"}})
		if err == nil || !strings.Contains(err.Error(), "max_connections") || strings.Contains(err.Error(), "\n") {
			t.Errorf("got %q, want one line quoting the server's complaint", err)
		}
		servertest.NothingLeft(t, dir)
	})
	t.Run("cancelled during initdb", func(t *testing.T) {
		dir := servertest.ReachableDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		_, err := postgres.Start(ctx, postgres.Options{Dir: dir})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, want a deadline error", err)
		}
		servertest.NothingLeft(t, dir)
	})
	t.Run("parent the server user cannot enter", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("only root runs servers as another user")
		}
		dir := t.TempDir() // its parent is 0700 root
		_, err := postgres.Start(context.Background(), postgres.Options{Dir: dir})
		if err == nil || !strings.Contains(err.Error(), "not reachable") {
			t.Errorf("got %v, want a not-reachable error", err)
		}
	})
}

func TestPostgresNotInstalled(t *testing.T) {
	t.Setenv("INDOUBT_PG_BIN", "/nonexistent")
	t.Setenv("PATH", t.TempDir())
	_, err := postgres.Start(context.Background(), postgres.Options{})
	if !errors.Is(err, servers.ErrNotInstalled) {
		t.Fatalf("got %v, want ErrNotInstalled", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "Debian package postgresql") {
		t.Errorf("message %q: want one line naming the package", msg)
	}
}

// TestPostgresDiesWithHarness runs Start in a child test process, kills that
// process with SIGKILL (no chance to Stop), and expects the server to die with it.
func TestPostgresDiesWithHarness(t *testing.T) {
	if dir := os.Getenv("INDOUBT_TEST_ORPHAN_DIR"); dir != "" {
		pg, err := postgres.Start(context.Background(), postgres.Options{Dir: dir})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(pg.Pid(), pg.Addr)
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	if _, err := postgres.Find(); err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	dir := servertest.ReachableDir(t)
	cmd, line := servertest.Rerun(t, "TestPostgresDiesWithHarness", "INDOUBT_TEST_ORPHAN_DIR="+dir)
	var pid int
	var addr string
	if _, err := fmt.Sscan(line, &pid, &addr); err != nil {
		t.Fatalf("child said %q", line)
	}
	defer func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }()
	if !servertest.Alive(pid) {
		t.Fatalf("postmaster %d not running", pid)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !servertest.Eventually(func() bool { return len(servertest.GroupAlive(pid)) == 0 }) {
		t.Errorf("server processes outlived the harness: %v", servertest.GroupAlive(pid))
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		// The freed port may already be another test binary's server: only a listener
		// of this server's group, or one naming its directory, is this server.
		_, p, _ := net.SplitHostPort(addr)
		port, _ := strconv.Atoi(p)
		ls := servertest.Listeners(port)
		if len(ls) == 0 {
			t.Errorf("%s still accepts connections, and no process was found listening there", addr)
		}
		for _, l := range ls {
			if l.Pgid == pid || strings.Contains(l.Cmdline, dir) {
				t.Errorf("%s still accepts connections: pid %d (%s) of the killed harness's server", addr, l.Pid, l.Cmdline)
			} else {
				t.Logf("%s was taken again after the server died, by pid %d (%s)", addr, l.Pid, l.Cmdline)
			}
		}
	}
}

// TestPostgresVersions starts each major version that PostgresBin finds here, and checks
// that the server that answers is that version and has what the version is chosen for.
func TestPostgresVersions(t *testing.T) {
	for _, v := range []string{"15", "18"} {
		t.Run(v, func(t *testing.T) {
			pg := startPostgres(t, postgres.Options{Dir: servertest.ReachableDir(t), Version: v})
			if pg.Version != v {
				t.Fatalf("Version = %q, want %q", pg.Version, v)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, pg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var num int
			if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int / 10000").Scan(&num); err != nil {
				t.Fatal(err)
			}
			if strconv.Itoa(num) != v {
				t.Errorf("server_version_num says %d, want %s", num, v)
			}
			// uuidv7() is what 18 is wanted for; 15 must not have it.
			_, err = conn.Exec(ctx, "SELECT uuidv7()")
			if (err == nil) != (v == "18") {
				t.Errorf("SELECT uuidv7() on %s: err = %v", v, err)
			}
		})
	}
}

func TestPostgresVersionRefused(t *testing.T) {
	for _, v := range []string{"fifteen", "99"} {
		_, err := postgres.Bin(v)
		if err == nil {
			t.Errorf("PostgresBin(%q) = nil error", v)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("PostgresBin(%q): %q is not one line", v, err)
		}
	}
	if _, err := postgres.Bin("99"); !errors.Is(err, servers.ErrNotInstalled) || !strings.Contains(err.Error(), "prepare-postgres18") {
		t.Errorf("PostgresBin(99) = %v, want ErrNotInstalled naming the prepare script", err)
	}
}

// TestShareInitdb: under ShareInitdb, servers start on copies of one template cluster,
// each a cluster of its own with the launch's own password (the other's is refused),
// in a template directory that nested releases keep and the last removes; a start
// after it runs initdb again and makes no template.
func TestShareInitdb(t *testing.T) {
	if _, err := postgres.Find(); err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	templates := func() []string {
		t.Helper()
		dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "indoubt-postgres-template-"+strconv.Itoa(os.Getpid())+"-*"))
		if err != nil {
			t.Fatal(err)
		}
		return dirs
	}
	release := postgres.ShareInitdb()
	released := false
	defer func() {
		if !released {
			_ = release()
		}
	}()
	a := startPostgres(t, postgres.Options{})
	b := startPostgres(t, postgres.Options{Settings: map[string]string{"work_mem": "8MB"}})
	if got := templates(); len(got) != 1 {
		t.Fatalf("template directories %v, want one", got)
	}
	if a.Password == b.Password {
		t.Fatalf("both servers have the password %s", a.Password)
	}
	ca, cb := pgConnect(t, a.DSN), pgConnect(t, b.DSN)
	for _, c := range []*pgx.Conn{ca, cb} {
		var user, db string
		if err := c.QueryRow(context.Background(), "select current_user, current_database()").Scan(&user, &db); err != nil || user != "indoubt" || db != "indoubt" {
			t.Errorf("user %q, database %q, %v: want indoubt on indoubt", user, db, err)
		}
	}
	if got := pgSetting(t, cb, "work_mem"); got != "8MB" {
		t.Errorf("work_mem %s on the copy, want its setting 8MB", got)
	}
	// Each copy is a cluster of its own.
	distinctClusters(t, ca, cb)
	// One server's password does not open the other.
	cfg, err := pgx.ParseConfig(fmt.Sprintf("postgres://indoubt@%s/indoubt?sslmode=disable", a.Addr))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Password = b.Password
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := pgx.ConnectConfig(ctx, cfg); err == nil {
		c.Close(ctx)
		t.Error("a copy accepted the other copy's password")
	} else if !strings.Contains(err.Error(), "password") && !strings.Contains(err.Error(), "28P01") {
		t.Errorf("the other copy's password: %v, want a password error", err)
	}

	inner := postgres.ShareInitdb()
	if err := inner(); err != nil {
		t.Fatal(err)
	}
	if got := templates(); len(got) != 1 {
		t.Fatalf("after a nested release: template directories %v, want the one still", got)
	}
	released = true
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if got := templates(); len(got) != 0 {
		t.Errorf("after the last release: template directories %v, want none", got)
	}
	if err := release(); err != nil {
		t.Errorf("a second call of the same release: %v", err)
	}
	c := startPostgres(t, postgres.Options{})
	pgConnect(t, c.DSN)
	if got := templates(); len(got) != 0 {
		t.Errorf("a start without ShareInitdb made template directories %v", got)
	}
}

// distinctClusters fails the test unless a table made through a is absent from b.
func distinctClusters(t *testing.T, a, b *pgx.Conn) {
	t.Helper()
	if _, err := a.Exec(context.Background(), "create table only_here (x int)"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := b.QueryRow(context.Background(), "select count(*) from pg_tables where tablename = 'only_here'").Scan(&n); err != nil || n != 0 {
		t.Errorf("a table of one cluster seen in the other: n=%d err=%v", n, err)
	}
}
