package etcd_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/etcd"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

func start(t *testing.T, ctx context.Context, parent string) *etcd.Cluster {
	t.Helper()
	t0 := time.Now()
	c, err := etcd.Start(ctx, etcd.Options{Dir: parent})
	servertest.SkipOrFail(t, err)
	if err != nil {
		t.Fatal(err)
	}
	rss, peak, err := c.RSS()
	if err != nil {
		t.Error(err)
	}
	t.Logf("etcd %s: 3 members ready in %v, %d MiB resident (peak %d MiB)", c.Version, time.Since(t0).Round(time.Millisecond), rss>>20, peak>>20)
	return c
}

// put writes key=value through member m's HTTP gateway and fails the test on error.
func put(t *testing.T, ctx context.Context, m *etcd.Member, key, value string) {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q,"value":%q}`, base64.StdEncoding.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString([]byte(value)))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.ClientURL+"/v3/kv/put", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("put on %s: %v", m.Name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("put on %s: %s", m.Name, resp.Status)
	}
}

// get reads key through member m (a linearizable read) and returns its value, "" when
// absent.
func get(t *testing.T, ctx context.Context, m *etcd.Member, key string) string {
	t.Helper()
	body := fmt.Sprintf(`{"key":%q}`, base64.StdEncoding.EncodeToString([]byte(key)))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.ClientURL+"/v3/kv/range", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("get on %s: %v", m.Name, err)
	}
	defer resp.Body.Close()
	var out struct {
		Kvs []struct{ Value string } `json:"kvs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("get on %s: %v", m.Name, err)
	}
	if len(out.Kvs) == 0 {
		return ""
	}
	v, _ := base64.StdEncoding.DecodeString(out.Kvs[0].Value)
	return string(v)
}

// Three members on loopback elect one leader that every member names; a killed leader
// is replaced by another member, which takes writes; the killed member, started again on
// its data, catches up and serves what was written while it was down. A paused member
// is no leader's concern once another is elected. Stop leaves nothing behind.
func TestClusterLeaderKilledAndRestarted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	parent := servertest.ReachableDir(t)
	c := start(t, ctx, parent)
	defer c.Stop()
	if len(c.Members) != 3 || len(c.Endpoints) != 3 {
		t.Fatalf("%d members, %d endpoints; want 3", len(c.Members), len(c.Endpoints))
	}
	old := c.Leader()
	leaders, errs := c.Roles(ctx)
	n := 0
	for i, l := range leaders {
		if errs[i] != nil {
			t.Errorf("member %s: %v", c.Members[i].Name, errs[i])
		}
		if l {
			n++
			if c.Members[i] != old {
				t.Errorf("member %s says it leads; Leader names %s", c.Members[i].Name, old.Name)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d members say they lead, want 1", n)
	}
	put(t, ctx, old, "before", "1")
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	var now *etcd.Member
	if !servertest.Eventually(func() bool { now = c.Leader(); return now != old }) {
		t.Fatalf("no new leader after %s was killed", old.Name)
	}
	put(t, ctx, now, "during", "2")
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if !servertest.Eventually(func() bool {
		ok, err := old.IsLeader(ctx)
		return err == nil && !ok && get(t, ctx, old, "during") == "2"
	}) {
		t.Errorf("%s started again did not catch up as a follower", old.Name)
	}
	if got := get(t, ctx, old, "before"); got != "1" {
		t.Errorf("before = %q on %s after its restart, want 1", got, old.Name)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	servertest.NothingLeft(t, parent)
}

// A harness killed with SIGKILL takes the three members with it, and leaves three
// directories that FindLeftovers lists and Remove removes.
func TestClusterKilledHarnessLeftovers(t *testing.T) {
	if parent := os.Getenv("INDOUBT_TEST_ETCD_DIR"); parent != "" {
		c, err := etcd.Start(context.Background(), etcd.Options{Dir: parent})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		var pids []string
		for _, m := range c.Members {
			pids = append(pids, fmt.Sprint(m.Pid()))
		}
		fmt.Println(strings.Join(pids, " "))
		time.Sleep(time.Minute)
		os.Exit(1)
	}
	if _, err := etcd.Find(""); err != nil {
		servertest.SkipOrFail(t, err)
	}
	parent := servertest.ReachableDir(t)
	cmd, line := servertest.Rerun(t, "TestClusterKilledHarnessLeftovers", "INDOUBT_TEST_ETCD_DIR="+parent)
	var pids [3]int
	if _, err := fmt.Sscan(line, &pids[0], &pids[1], &pids[2]); err != nil {
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
		if !servertest.Eventually(func() bool { return len(servertest.GroupAlive(pid)) == 0 }) {
			t.Errorf("member %d outlived the harness", pid)
		}
	}
	left, err := servers.FindLeftovers(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 3 {
		t.Errorf("%d leftovers, want 3: %+v", len(left), left)
	}
	for _, l := range left {
		if l.Owner != cmd.Process.Pid || !strings.HasPrefix(filepath.Base(l.Dir), fmt.Sprintf("indoubt-etcd-%d-", cmd.Process.Pid)) {
			t.Errorf("leftover %+v: want owner %d", l, cmd.Process.Pid)
		}
		if err := l.Remove(); err != nil {
			t.Error(err)
		}
	}
	servertest.NothingLeft(t, parent)
}

// A directory without etcd in it is "not installed", with the way to prepare it.
func TestFindMissing(t *testing.T) {
	_, err := etcd.Find(t.TempDir())
	if !errors.Is(err, servers.ErrNotInstalled) || !strings.Contains(err.Error(), "scripts/prepare-etcd") {
		t.Errorf("Find in an empty directory: %v; want ErrNotInstalled naming scripts/prepare-etcd", err)
	}
}
