package servers_test

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
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// redisCLI runs redis-cli (shipped beside redis-server by Debian) against r and returns
// its raw output, one reply element per line.
func redisCLI(t *testing.T, r *servers.Redis, args ...string) string {
	t.Helper()
	cli := filepath.Join(filepath.Dir(r.Binary), "redis-cli")
	if _, err := os.Stat(cli); err != nil {
		t.Skipf("redis-cli not beside %s: %v", r.Binary, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(r.Port), "--raw"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestStartRedisPersistence(t *testing.T) {
	cases := []struct {
		persistence      string
		appendonly, sync string
	}{
		{"", "no", ""},
		{servers.RedisNoPersistence, "no", ""},
		{servers.RedisEverySec, "yes", "everysec"},
		{servers.RedisAlways, "yes", "always"},
	}
	for _, c := range cases {
		t.Run("persistence "+c.persistence, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r, err := servers.StartRedis(ctx, servers.RedisOptions{Persistence: c.persistence})
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
			if err := r.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
			stopped = true
			if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
				t.Errorf("pid %d still exists after Stop: kill 0 = %v", pid, err)
			}
			if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
				t.Errorf("temp dir %s left behind: %v", r.Dir, err)
			}
			if err := r.Stop(); err != nil {
				t.Errorf("second Stop: %v", err)
			}
		})
	}
}

func TestStartRedisSettings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := servers.StartRedis(ctx, servers.RedisOptions{Settings: map[string]string{"maxclients": "123"}})
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
	for _, opt := range []servers.RedisOptions{
		{Persistence: "sometimes"},
		{Settings: map[string]string{"port": "1"}},
		{Settings: map[string]string{"appendfsync": "no"}},
		{Settings: map[string]string{"bad name": "x"}},
	} {
		if r, err := servers.StartRedis(ctx, opt); err == nil {
			r.Stop()
			t.Errorf("StartRedis(%+v) started", opt)
		}
	}
}

func TestStartRedisNotInstalled(t *testing.T) {
	t.Setenv("INDOUBT_REDIS_SERVER", filepath.Join(t.TempDir(), "no-such-redis-server"))
	_, err := servers.StartRedis(context.Background(), servers.RedisOptions{})
	if !errors.Is(err, servers.ErrNotInstalled) {
		t.Fatalf("err = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "redis-server") {
		t.Errorf("err %q does not name the package to install", err)
	}
}
