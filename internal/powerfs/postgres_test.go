package powerfs_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/indoubt/indoubt/internal/powerfs"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/jackc/pgx/v5"
)

// pgOn runs PostgreSQL programs as the server account, logging off the mount.
type pgOn struct {
	bin, data, sock string
	acct            servers.Account
	logPath         string
	proc            *servers.Process
	port            int
}

func newPG(t *testing.T, dir string) *pgOn {
	t.Helper()
	bin, acct := serverOrSkip(t, postgres.Find)
	// A unix socket path is short; the socket is not under test, so it lives off the mount.
	sock, err := os.MkdirTemp("/tmp", "powerfs-pgsock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sock) })
	if err := os.Chmod(sock, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := acct.Own(dir, sock); err != nil {
		t.Fatal(err)
	}
	p := &pgOn{bin: bin, data: filepath.Join(dir, "data"), sock: sock, acct: acct,
		logPath: filepath.Join(t.TempDir(), "postgres.log")}
	t.Cleanup(func() { p.kill(t) })
	return p
}

func (p *pgOn) command(t *testing.T, prog string, args ...string) *exec.Cmd {
	t.Helper()
	log, err := os.OpenFile(p.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	cmd := exec.Command(filepath.Join(p.bin, prog), args...)
	cmd.Dir = p.sock
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = []string{"HOME=" + p.sock, "LC_ALL=C", "PATH=/usr/bin:/bin"}
	return cmd
}

func (p *pgOn) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func (p *pgOn) initdb(t *testing.T) {
	t.Helper()
	// With its default sync: initdb fsyncs what it wrote, so the cluster is durable.
	proc, err := servers.StartProcess("initdb", p.command(t, "initdb", "-D", p.data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"), p.acct)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := proc.Wait(ctx); err != nil {
		t.Fatalf("initdb on powerfs: %v\n%s", err, p.logTail())
	}
}

func (p *pgOn) start(t *testing.T) *pgx.Conn {
	t.Helper()
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	proc, err := servers.StartProcess("postgres", p.command(t, "postgres", "-D", p.data,
		"-p", strconv.Itoa(port), "-c", "listen_addresses=",
		"-c", "unix_socket_directories="+p.sock), p.acct)
	if err != nil {
		t.Fatal(err)
	}
	p.proc, p.port = proc, port
	// Trust authentication, so no TCP: only the socket in a directory no other user can enter.
	dsn := "host=" + p.sock + " port=" + strconv.Itoa(port) + " user=postgres dbname=postgres"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var conn *pgx.Conn
	err = servers.Poll(ctx, 50*time.Millisecond, proc.Exited(), func(ctx context.Context) error {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		if err := c.Ping(ctx); err != nil {
			c.Close(ctx)
			return err
		}
		conn = c
		return nil
	})
	if err != nil {
		t.Fatalf("postgres on powerfs did not start: %v\n%s", err, p.logTail())
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// kill ends the postmaster and its backends with SIGKILL, as a crash would.
func (p *pgOn) kill(t *testing.T) {
	t.Helper()
	if p.proc == nil {
		return
	}
	if err := p.proc.Stop(syscall.SIGKILL, 5*time.Second); err != nil && !strings.Contains(err.Error(), "had exited") {
		t.Errorf("kill postgres: %v", err)
	}
	p.proc = nil
}

// PostgreSQL with its default settings (fsync on, synchronous_commit on) loses no
// committed transaction in a power loss.
func TestPostgresDefaultsSurvivePowerLoss(t *testing.T) {
	f, mnt := MountT(t, nil)
	dir := filepath.Join(mnt, "pg")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	SyncDir(t, mnt)
	p := newPG(t, dir)
	// initdb fsyncs everything inside the data directory but not the directory's own
	// entry in its parent: under the POSIX rule a cluster whose directory initdb created
	// vanishes whole in a power loss. The data directory is made here, durably, as an
	// installer would.
	if err := os.Mkdir(p.data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := p.acct.Own(p.data); err != nil {
		t.Fatal(err)
	}
	SyncDir(t, dir)
	p.initdb(t)
	conn := p.start(t)
	ctx := context.Background()
	const n = 50
	if _, err := conn.Exec(ctx, "CREATE TABLE t (k int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := conn.Exec(ctx, "INSERT INTO t VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	p.kill(t)
	pending := f.Stats()
	if err := f.PowerLoss(PowerLossOptions{}); err != nil {
		t.Fatal(err)
	}
	conn = p.start(t)
	var count int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&count); err != nil {
		t.Fatalf("after power loss: %v\n%s", err, p.logTail())
	}
	if count != n {
		t.Errorf("after power loss %d rows, want the %d committed", count, n)
	}
	t.Logf("discarded by the power loss: %d bytes in %d files, %d entry changes", pending.PendingBytes, pending.PendingFiles, pending.PendingEntries)
}
