package powerfs_test

import (
	"context"
	"fmt"
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
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/redis/go-redis/v9"
)

// redisOn is a redis-server whose working directory is on a powerfs.
type redisOn struct {
	proc   *servers.Process
	client *redis.Client
}

// startRedis starts redis-server with its AOF in dir, fsynced as appendfsync says, and
// returns once it answers PING. It is killed when the test ends.
func startRedis(t *testing.T, dir, appendfsync string) *redisOn {
	t.Helper()
	bin, acct := serverOrSkip(t, redisserver.Find)
	if err := acct.Own(dir); err != nil {
		t.Fatal(err)
	}
	port, err := servers.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "redis.log") // off the mount: not under test
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--daemonize", "no", "--logfile", "", "--save", "",
		"--appendonly", "yes", "--appendfsync", appendfsync)
	// Not Dir: a child must not touch the mount before it execs (see the package doc).
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = []string{"HOME=/nonexistent", "LC_ALL=C"}
	proc, err := servers.StartProcess("redis-server", cmd, acct)
	if err != nil {
		t.Fatal(err)
	}
	r := &redisOn{proc: proc, client: redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1, DisableIdentity: true})}
	t.Cleanup(func() {
		r.client.Close()
		r.kill(t)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = servers.Poll(ctx, 20*time.Millisecond, proc.Exited(), func(ctx context.Context) error {
		return r.client.Ping(ctx).Err()
	})
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("redis-server on powerfs did not start: %v\n%s", err, b)
	}
	return r
}

// kill ends the server with SIGKILL, as a crash would: nothing is flushed.
func (r *redisOn) kill(t *testing.T) {
	t.Helper()
	if err := r.proc.Stop(syscall.SIGKILL, 5*time.Second); err != nil && !strings.Contains(err.Error(), "had exited") {
		t.Errorf("kill redis-server: %v", err)
	}
}

// setKeys sets key:i to i for i in [0, n), each acknowledged before the next.
func setKeys(t *testing.T, c *redis.Client, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if err := c.Set(ctx, fmt.Sprintf("key:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("set key:%d: %v", i, err)
		}
	}
}

// aofBytes sums the sizes of the append-only files under dir.
func aofBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && filepath.Ext(p) == ".aof" {
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// redisDir makes a durable directory for the server on the mount.
func redisDir(t *testing.T, mnt string) string {
	t.Helper()
	dir := filepath.Join(mnt, "redis")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	SyncDir(t, mnt)
	return dir
}

// With appendfsync always, every acknowledged write was fsynced before its reply: a
// power loss right after kill -9 loses none of them, once the directories Redis made at
// its first start are durable. Redis 7.0 does not fsync the parent of the appendonlydir
// it creates, so under the POSIX rule the first start's AOF directory is not durable
// until something fsyncs it; the test does, as a reboot after a clean shutdown would
// have. Under a journaling filesystem's rule the fsyncs of the AOF itself carry it.
func TestRedisAppendfsyncAlwaysSurvivesPowerLoss(t *testing.T) {
	for _, c := range []struct {
		name    string
		entries EntryDurability
	}{{"per-directory", PerDirectory}, {"ordered", Ordered}} {
		t.Run(c.name, func(t *testing.T) {
			f, mnt := MountT(t, &Options{Entries: c.entries})
			dir := redisDir(t, mnt)
			const n = 300
			r := startRedis(t, dir, "always")
			if c.entries == PerDirectory {
				t.Logf("after redis-server started, %d entry changes were not durable", f.Stats().PendingEntries)
				SyncDir(t, dir)
			}
			setKeys(t, r.client, n)
			r.kill(t)
			if err := f.PowerLoss(PowerLossOptions{}); err != nil {
				t.Fatal(err)
			}
			r = startRedis(t, dir, "always")
			ctx := context.Background()
			for i := range n {
				got, err := r.client.Get(ctx, fmt.Sprintf("key:%d", i)).Result()
				if err != nil || got != strconv.Itoa(i) {
					t.Fatalf("after power loss key:%d = %q, %v; want %d (all %d acknowledged)", i, got, err, i, n)
				}
			}
		})
	}
}

// With appendfsync no, Redis leaves the AOF to the kernel: a power loss right after
// kill -9 takes acknowledged writes with it, which a plain kill -9 would not.
func TestRedisAppendfsyncNoLosesWritesInPowerLoss(t *testing.T) {
	f, mnt := MountT(t, nil)
	dir := redisDir(t, mnt)
	const n = 300
	r := startRedis(t, dir, "no")
	setKeys(t, r.client, n)
	r.kill(t)
	before := aofBytes(t, dir)
	if s := f.Stats(); s.PendingBytes == 0 {
		t.Errorf("after %d unsynced writes nothing is pending: %+v", n, s)
	}
	if err := f.PowerLoss(PowerLossOptions{}); err != nil {
		t.Fatal(err)
	}
	after := aofBytes(t, dir)
	if after >= before {
		t.Errorf("AOF bytes before power loss %d, after %d: want fewer after", before, after)
	}
	r = startRedis(t, dir, "no")
	size, err := r.client.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if size >= n {
		t.Errorf("after power loss %d keys of %d acknowledged: want some lost", size, n)
	}
	t.Logf("appendfsync no: %d of %d acknowledged keys survived the power loss; AOF %d -> %d bytes", size, n, before, after)
}
