package cassandra_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/cassandra"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// needCassandra skips (or under CI=true fails) the test when the jars or java are missing.
func needCassandra(t *testing.T) {
	t.Helper()
	cache, err := servers.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	if _, err = cassandra.Find(cache, cassandra.Version); err == nil {
		return
	}
	servertest.SkipOrFail(t, err)
	t.Fatal(err)
}

func TestCassandraVersionMatchesPom(t *testing.T) {
	pom, err := os.ReadFile("pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`<cassandra.version>([^<]+)</cassandra.version>`).FindSubmatch(pom)
	if m == nil {
		t.Fatal("pom.xml has no cassandra.version property")
	}
	if got := string(m[1]); got != cassandra.Version {
		t.Errorf("pom resolves %s, Version is %s: scripts/prepare-cassandra and Start disagree", got, cassandra.Version)
	}
}

func TestCassandra(t *testing.T) {
	needCassandra(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	c, err := cassandra.Start(ctx, cassandra.Options{
		Dir:  t.TempDir(),
		Keep: true,
		// A value no default has, to prove the settings reach the node.
		Settings: map[string]string{"cas_contention_timeout": "777ms"},
		Log:      &progress,
	})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	rss, err := c.RSS()
	if err != nil {
		t.Error(err)
	}
	t.Logf("cassandra %s ready on %s after %v, RSS %d MiB", c.Version, c.Addr, c.Startup.Round(time.Millisecond), rss>>20)

	if c.Version != cassandra.Version {
		t.Errorf("Version = %q, want %q", c.Version, cassandra.Version)
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil || host != "127.0.0.1" || c.Port == 0 || c.StoragePort == 0 || c.Port == c.StoragePort {
		t.Errorf("Addr %q, Port %d, StoragePort %d: want distinct loopback ports", c.Addr, c.Port, c.StoragePort)
	}
	if err := cassandra.Probe(ctx, c.Addr); err != nil {
		t.Errorf("CQL OPTIONS on %s: %v", c.Addr, err)
	}
	if !strings.Contains(progress.String(), "ready on "+c.Addr) {
		t.Errorf("progress log %q does not report readiness", progress.String())
	}
	log, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cas_contention_timeout=777ms", "Cassandra version: " + c.Version, "Starting listening for CQL clients on /127.0.0.1:"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log %s lacks %q", c.LogPath, want)
		}
	}

	pid := c.Pid()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if conn, err := net.DialTimeout("tcp", c.Addr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", c.Addr)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "cassandra.yaml")); err != nil {
		t.Errorf("Keep: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestCassandraFailedStartLeavesNothing(t *testing.T) {
	needCassandra(t)
	dir := t.TempDir()
	began := time.Now()
	_, err := cassandra.Start(context.Background(), cassandra.Options{Dir: dir,
		Settings: map[string]string{"num_tokens": "many"}})
	if err == nil {
		t.Fatal("a node with num_tokens: many started")
	}
	if msg := err.Error(); !strings.Contains(msg, "num_tokens") || strings.Contains(msg, "\n") {
		t.Errorf("got %q, want one line quoting the node's complaint about num_tokens", msg)
	}
	if !errors.Is(err, servers.ErrExited) {
		t.Errorf("got %v, want ErrExited: the JVM died, it did not time out", err)
	}
	t.Logf("failed after %v: %v", time.Since(began).Round(time.Millisecond), err)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("left behind in %s: %v", dir, entries)
	}
}

func TestCassandraRefusesBadOptions(t *testing.T) {
	for name, settings := range map[string]map[string]string{
		"placement":      {"native_transport_port": "9042"},
		"not a key":      {"Bad Key": "1"},
		"multi-line":     {"cluster_name": "a\nstorage_port: 7000"},
		"seed placement": {"seed_provider": "[]"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := cassandra.Start(context.Background(), cassandra.Options{Dir: dir, Settings: settings})
			if err == nil || errors.Is(err, servers.ErrNotInstalled) {
				t.Fatalf("got %v, want the option refused before anything else", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("left behind: %v", entries)
			}
		})
	}
}

func TestCassandraNotInstalled(t *testing.T) {
	cache := t.TempDir()
	_, err := cassandra.Start(context.Background(), cassandra.Options{CacheDir: cache})
	if !errors.Is(err, servers.ErrNotInstalled) {
		t.Fatalf("got %v, want ErrNotInstalled", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "scripts/prepare-cassandra") {
		t.Errorf("message %q: want one line naming scripts/prepare-cassandra", msg)
	}
	// A half-written cache (no "complete" marker) is missing too.
	if err := os.MkdirAll(filepath.Join(cache, "cassandra-"+cassandra.Version, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := cassandra.Find(cache, cassandra.Version); !errors.Is(err, servers.ErrNotInstalled) {
		t.Errorf("incomplete cache: got %v, want ErrNotInstalled", err)
	}
	t.Setenv("INDOUBT_CACHE", cache)
	if d, err := servers.CacheDir(); err != nil || d != cache {
		t.Errorf("servers.CacheDir() = %q, %v; want INDOUBT_CACHE %q", d, err, cache)
	}

	// With the jars in place, a missing java is reported the same way.
	dir := filepath.Join(cache, "cassandra-"+cassandra.Version)
	for _, f := range []string{"complete", filepath.Join("lib", "cassandra-all-"+cassandra.Version+".jar")} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("INDOUBT_JAVA", "/nonexistent/java")
	_, err = cassandra.Start(context.Background(), cassandra.Options{})
	if !errors.Is(err, servers.ErrNotInstalled) || !strings.Contains(err.Error(), "java") {
		t.Errorf("java missing: got %v, want ErrNotInstalled naming java", err)
	}
}
