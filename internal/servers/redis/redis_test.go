package redis_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// redisCLI runs redis-cli (shipped beside redis-server by Debian) against r with its
// password and returns its raw output, one reply element per line.
func redisCLI(t *testing.T, r *redis.Server, args ...string) string {
	t.Helper()
	return redisCLIAs(t, r, r.Password, args...)
}

// redisCLIAs is redisCLI with the given password, "" for none.
func redisCLIAs(t *testing.T, r *redis.Server, password string, args ...string) string {
	t.Helper()
	cli := filepath.Join(filepath.Dir(r.Binary), "redis-cli")
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("redis-cli not beside %s: %v", r.Binary, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(r.Port), "--raw"}, args...)...)
	cmd.Env = os.Environ()
	if password != "" {
		// REDISCLI_AUTH rather than -a: no warning about a password on the command line.
		cmd.Env = append(cmd.Env, "REDISCLI_AUTH="+password)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestStartRedisRequiresPassword checks that a launched Redis refuses clients without
// the launch's password, that its DSN carries the password, and that the password is
// not on the server's command line, where every local user could read it.
func TestStartRedisRequiresPassword(t *testing.T) {
	r := startRedis(t, redis.Options{})
	if len(r.Password) != 32 {
		t.Errorf("Password %q: want 32 hex digits", r.Password)
	}
	if want := "redis://:" + r.Password + "@" + r.Addr + "/0"; r.DSN != want {
		t.Errorf("DSN %s, want %s", r.DSN, want)
	}
	if got := redisCLIAs(t, r, "", "PING"); !strings.Contains(got, "NOAUTH") {
		t.Errorf("PING without a password: %q, want NOAUTH", got)
	}
	if got := redisCLIAs(t, r, "wrong", "PING"); !strings.Contains(got, "WRONGPASS") && !strings.Contains(got, "NOAUTH") {
		t.Errorf("PING with a wrong password: %q, want WRONGPASS", got)
	}
	if got := redisCLI(t, r, "PING"); got != "PONG" {
		t.Errorf("PING with the password: %q, want PONG", got)
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.Pid()), "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), r.Password) {
		t.Errorf("the password is on the command line: %q", b)
	}
}

func TestStartRedisPersistence(t *testing.T) {
	cases := []struct {
		persistence      string
		appendonly, sync string
	}{
		{"", "no", ""},
		{redis.NoPersistence, "no", ""},
		{redis.EverySec, "yes", "everysec"},
		{redis.Always, "yes", "always"},
	}
	for _, c := range cases {
		t.Run("persistence "+c.persistence, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := redis.Start(ctx, redis.Options{Persistence: c.persistence})
			servertest.SkipOrFail(t, err)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					_ = r.Stop()
				}
			}()
			if !strings.HasPrefix(r.Addr, "127.0.0.1:") || r.Port == 0 {
				t.Errorf("Addr %q, Port %d: want a loopback port", r.Addr, r.Port)
			}
			if got := redisCLI(t, r, "CONFIG", "GET", "appendonly"); got != "appendonly\n"+c.appendonly {
				t.Errorf("appendonly: %q, want %s", got, c.appendonly)
			}
			if c.sync != "" {
				if got := redisCLI(t, r, "CONFIG", "GET", "appendfsync"); got != "appendfsync\n"+c.sync {
					t.Errorf("appendfsync: %q, want %s", got, c.sync)
				}
			}
			if got := redisCLI(t, r, "CONFIG", "GET", "save"); got != "save" {
				t.Errorf("save: %q, want no snapshots", got)
			}
			if got := redisCLI(t, r, "SET", "k", "v"); got != "OK" {
				t.Errorf("SET: %q", got)
			}
			if c.appendonly == "yes" {
				aof, _ := filepath.Glob(filepath.Join(r.Dir, "appendonlydir", "*.aof"))
				if len(aof) == 0 {
					t.Errorf("no AOF files under %s", r.Dir)
				}
			}

			pid := r.Pid()
			stopped = true
			servertest.StopCleanly(t, r.Stop, r.Dir)
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("pid %d still exists after Stop: kill 0 = %v", pid, err)
			}
		})
	}
}

func TestStartRedisSettings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := redis.Start(ctx, redis.Options{Settings: map[string]string{"maxclients": "123"}})
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if got := redisCLI(t, r, "CONFIG", "GET", "maxclients"); got != "maxclients\n123" {
		t.Errorf("maxclients: %q, want 123", got)
	}
}

func TestStartRedisRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, opt := range []redis.Options{
		{Persistence: "sometimes"},
		{Settings: map[string]string{"port": "1"}},
		{Settings: map[string]string{"appendfsync": "no"}},
		{Settings: map[string]string{"bad name": "x"}},
		{Settings: map[string]string{"requirepass": ""}},
		{Settings: map[string]string{"user": "default on nopass ~* +@all"}},
	} {
		if r, err := redis.Start(ctx, opt); err == nil {
			r.Stop()
			t.Errorf("Start(%+v) started", opt)
		}
	}
}

func TestStartRedisNotInstalled(t *testing.T) {
	t.Setenv("INDOUBT_REDIS_SERVER", filepath.Join(t.TempDir(), "no-such-redis-server"))
	_, err := redis.Start(context.Background(), redis.Options{})
	if !errors.Is(err, servers.ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "redis-server") {
		t.Errorf("err %q does not name the package to install", err)
	}
}

func startRedis(t *testing.T, opt redis.Options) *redis.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := redis.Start(ctx, opt)
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop() })
	return r
}

// TestStartRedisFailedStartLeavesNothing checks that a start that fails in the server
// (a setting it refuses) or runs out of time leaves no process and nothing on disk,
// the password file included.
func TestStartRedisFailedStartLeavesNothing(t *testing.T) {
	if _, err := redis.Find(); err != nil {
		servertest.SkipOrFail(t, err)
		t.Fatal(err)
	}
	t.Run("setting the server refuses", func(t *testing.T) {
		dir := servertest.ReachableDir(t)
		_, err := redis.Start(context.Background(), redis.Options{Dir: dir,
			Settings: map[string]string{"maxclients": "many"}})
		if err == nil || !strings.Contains(err.Error(), "maxclients") {
			t.Errorf("got %v, want the server's complaint about maxclients", err)
		}
		servertest.NothingLeft(t, dir)
	})
	t.Run("cancelled during start", func(t *testing.T) {
		dir := servertest.ReachableDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		defer cancel()
		_, err := redis.Start(ctx, redis.Options{Dir: dir})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v, want a deadline error", err)
		}
		servertest.NothingLeft(t, dir)
	})
}
