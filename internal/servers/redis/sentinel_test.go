package redis_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

func startReplicatedRedis(t *testing.T, ctx context.Context, parent string) *redis.Replicated {
	t.Helper()
	rr, err := redis.StartReplicated(ctx, redis.ReplicatedOptions{Redis: redis.Options{Dir: parent}})
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// failoverClient is go-redis's Sentinel client for the DSN of rr. go-redis logs each
// change of primary to stderr; the test says what it checks itself.
func failoverClient(t *testing.T, rr *redis.Replicated) *goredis.Client {
	t.Helper()
	goredis.SetLogger(quietLogger{})
	var addrs []string
	for _, s := range rr.Sentinels {
		addrs = append(addrs, s.Addr)
	}
	c := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: redis.MasterName,
		SentinelAddrs: addrs, SentinelPassword: rr.Password, Password: rr.Password})
	t.Cleanup(func() { c.Close() })
	return c
}

// A replicated Redis: the Sentinels promote the replica by themselves when the primary
// is killed, a client that follows them writes to the new primary, which holds what was
// replicated before; the old primary, started again, becomes a replica of the new one.
// Every directory is gone after Stop.
func TestReplicatedRedisFailoverAndRejoin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	parent := servertest.ReachableDir(t)
	rr := startReplicatedRedis(t, ctx, parent)
	defer rr.Stop()
	if got := rr.Primary(); got != rr.Nodes[0] {
		t.Fatalf("primary %s, want the first node %s", got.Addr, rr.Nodes[0].Addr)
	}
	if !strings.Contains(rr.DSN, "master_name="+redis.MasterName) || strings.Count(rr.DSN, "&addr=") != 2 {
		t.Errorf("DSN %q: want the master name and three Sentinels", rr.DSN)
	}
	dirs, _ := filepath.Glob(filepath.Join(parent, "indoubt-*"))
	if len(dirs) != 5 {
		t.Errorf("directories %v: want one per process (2 nodes, 3 Sentinels)", dirs)
	}
	c := failoverClient(t, rr)
	if err := c.Set(ctx, "k", "before", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// The write is on the replica before the primary dies (WAIT 1: one replica has it).
	if n, err := c.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT: %d, %v", n, err)
	}
	oldPid := rr.Pid()
	t0 := time.Now()
	if err := rr.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Sentinels promoted the replica %v after the kill", time.Since(t0).Round(time.Millisecond))
	if got := rr.Primary(); got != rr.Nodes[1] {
		t.Fatalf("primary after failover %s, want the replica %s", got.Addr, rr.Nodes[1].Addr)
	}
	if groupRunningPid(oldPid) {
		t.Errorf("old primary %d still runs", oldPid)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "before" {
		t.Errorf("GET on the new primary: %q, %v; want the replicated write", v, err)
	}
	if err := c.Set(ctx, "k", "after", 0).Err(); err != nil {
		t.Fatalf("write on the new primary: %v", err)
	}
	if err := rr.Failover(ctx); err == nil || !strings.Contains(err.Error(), "nothing to promote") {
		t.Errorf("second failover with the old primary down: %v, want refused", err)
	}
	if err := rr.Rejoin(ctx); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	if err := rr.WaitReplica(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("the Sentinels made the old primary a replica %v after it started", time.Since(t1).Round(time.Millisecond))
	if got := rr.Primary(); got != rr.Nodes[1] {
		// With down-after 1 s, a new primary starved of CPU for a second on a loaded
		// machine is failed over too: then to the old one, empty (persistence none).
		t.Logf("the Sentinels failed over again, to the rejoined %s", got.Addr)
	} else if v, err := c.Get(ctx, "k").Result(); err != nil || v != "after" {
		t.Errorf("GET after the rejoin: %q, %v; want what the new primary took", v, err)
	}
	if err := rr.Stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if dirs, _ := filepath.Glob(filepath.Join(parent, "indoubt-*")); len(dirs) != 0 {
		t.Errorf("left after Stop: %v", dirs)
	}
}

func groupRunningPid(pid int) bool { return len(servertest.GroupAlive(pid)) > 0 }

// A harness killed with SIGKILL takes the five processes of a replicated Redis with it,
// and leaves five directories that FindLeftovers lists and Remove removes.
func TestReplicatedRedisKilledHarnessLeftovers(t *testing.T) {
	if parent := os.Getenv("INDOUBT_TEST_SENTINEL_DIR"); parent != "" {
		rr, err := redis.StartReplicated(context.Background(), redis.ReplicatedOptions{Redis: redis.Options{Dir: parent}})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		var pids []string
		for _, r := range append(rr.Nodes[:], rr.Sentinels...) {
			pids = append(pids, fmt.Sprint(r.Pid()))
		}
		fmt.Println(strings.Join(pids, " "))
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	parent := servertest.ReachableDir(t)
	cmd, line := servertest.Rerun(t, "TestReplicatedRedisKilledHarnessLeftovers", "INDOUBT_TEST_SENTINEL_DIR="+parent)
	var pids [5]int
	if _, err := fmt.Sscan(line, &pids[0], &pids[1], &pids[2], &pids[3], &pids[4]); err != nil {
		if strings.Contains(line, "not installed") || strings.Contains(line, "not found") {
			servertest.SkipOrFail(t, &servers.NotInstalledError{Server: "redis", Program: "redis-server", Hint: line})
		}
		t.Fatalf("child said %q", line)
	}
	defer func() {
		for _, pid := range pids {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, pid := range pids {
		if !servertest.Eventually(func() bool { return !groupRunningPid(pid) }) {
			t.Errorf("server %d outlived the harness", pid)
		}
	}
	left, err := servers.FindLeftovers(parent)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, l := range left {
		name := filepath.Base(l.Dir)
		kinds[strings.TrimSuffix(name[:strings.LastIndex(name, "-")], fmt.Sprintf("-%d", cmd.Process.Pid))]++
		if l.Owner != cmd.Process.Pid {
			t.Errorf("leftover %+v: owner %d, want %d", l, l.Owner, cmd.Process.Pid)
		}
		if err := l.Remove(); err != nil {
			t.Error(err)
		}
	}
	want := map[string]int{"indoubt-redis": 1, "indoubt-redis-replica": 1, "indoubt-sentinel": 3}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("leftovers by kind %v, want %v", kinds, want)
	}
	if dirs, _ := filepath.Glob(filepath.Join(parent, "indoubt-*")); len(dirs) != 0 {
		t.Errorf("left after Remove: %v", dirs)
	}
}
