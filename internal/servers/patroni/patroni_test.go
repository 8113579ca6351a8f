package patroni_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/patroni"
	"github.com/indoubt/indoubt/internal/servers/servertest"
)

// Three Patroni nodes on loopback with an etcd DCS, synchronous mode on: one leader,
// a synchronous standby; the multi-host DSN with target_session_attrs=read-write
// reaches the leader whichever host it names first; Stop leaves nothing behind.
func TestClusterSynchronous(t *testing.T) {
	if err := patroni.Available(); err != nil {
		servertest.SkipOrFail(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	parent := servertest.ReachableDir(t)
	t0 := time.Now()
	c, err := patroni.Start(ctx, patroni.Options{Dir: parent, Synchronous: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	rss, err := c.RSS()
	if err != nil {
		t.Error(err)
	}
	leader := c.Leader()
	t.Logf("Patroni %s: 3 nodes and 3 etcd members ready in %v, %d MiB resident; leader %s", c.Version, time.Since(t0).Round(time.Millisecond), rss>>20, leader.Name)
	conn, err := pgx.Connect(ctx, c.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if got := conn.PgConn().Conn().RemoteAddr().String(); got != leader.Addr {
		t.Errorf("the read-write DSN reached %s, the leader is %s", got, leader.Addr)
	}
	var sync string
	if err := conn.QueryRow(ctx, "SHOW synchronous_standby_names").Scan(&sync); err != nil || sync == "" {
		t.Errorf("synchronous_standby_names %q, %v: want a standby named", sync, err)
	}
	for _, m := range c.Members {
		role, state, err := m.Role(ctx)
		t.Logf("%s: %s %s %v", m.Name, role, state, err)
		if err != nil || (m == leader) != (role == "master" || role == "primary") {
			t.Errorf("%s says %q (%v); the leader is %s", m.Name, role, err, leader.Name)
		}
	}
	conn.Close(ctx)
	if err := c.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	servertest.NothingLeft(t, parent)
}

// A harness killed with SIGKILL while its Patroni cluster runs takes every process
// with it, PostgreSQL's too (each node's PID namespace dies with its unshare), and
// leaves the six directories (three Patroni nodes, three etcd members) to
// FindLeftovers.
func TestClusterKilledHarnessLeftovers(t *testing.T) {
	if parent := os.Getenv("INDOUBT_TEST_PATRONI_DIR"); parent != "" {
		c, err := patroni.Start(context.Background(), patroni.Options{Dir: parent})
		if err != nil {
			fmt.Println("error", strings.ReplaceAll(err.Error(), "\n", " "))
			os.Exit(1)
		}
		fmt.Println(c.Members[0].Pid(), c.Members[1].Pid(), c.Members[2].Pid())
		time.Sleep(2 * time.Minute)
		os.Exit(1)
	}
	if err := patroni.Available(); err != nil {
		servertest.SkipOrFail(t, err)
	}
	parent := servertest.ReachableDir(t)
	cmd, line := servertest.Rerun(t, "TestClusterKilledHarnessLeftovers", "INDOUBT_TEST_PATRONI_DIR="+parent)
	var pids [3]int
	if _, err := fmt.Sscan(line, &pids[0], &pids[1], &pids[2]); err != nil {
		t.Fatalf("child said %q", line)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, pid := range pids {
		if !servertest.Eventually(func() bool { return !servertest.Alive(pid) }) {
			t.Errorf("node %d outlived the harness", pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	// The etcd members get their parent-death signal with the nodes; an etcd still
	// flushing its WAL may take a moment to end, so wait for each server to be gone
	// before calling one a leftover that still runs.
	var left []servers.Leftover
	servertest.Eventually(func() bool {
		l, err := servers.FindLeftovers(parent)
		if err != nil {
			t.Fatal(err)
		}
		left = l
		for _, x := range l {
			if x.Server != 0 {
				return false
			}
		}
		return true
	})
	if len(left) != 6 {
		t.Errorf("%d leftovers, want 6: %+v", len(left), left)
	}
	for _, l := range left {
		if l.Server != 0 {
			t.Errorf("leftover %s: server %d still runs", l.Dir, l.Server)
		}
		if err := l.Remove(); err != nil {
			t.Error(err)
		}
	}
	// No PostgreSQL or Patroni works in the directories any more.
	servertest.NothingLeft(t, parent)
}
