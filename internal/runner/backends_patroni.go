package runner

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/patroni"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
)

// TopologyPatroni is the --topology of a PostgreSQL cluster managed by Patroni: three
// PostgreSQL 15 nodes, each under a Patroni with a three-member etcd (one member per
// node) as its DCS, synchronous mode on with --replication sync. Failover is
// Patroni's: the harness promotes nothing. The clients reach the leader as a
// deployment's do, by a multi-host DSN with target_session_attrs=read-write (libpq's
// and pgx's way, no proxy to run or fault): a client tries the hosts in order and
// keeps the first that accepts writes, and after a failover its next connection finds
// the new leader.
const TopologyPatroni = "patroni"

func patroniOptions(cfg Config, dir string, nodes []*servers.Node) patroni.Options {
	return patroni.Options{Nodes: nodes, Synchronous: cfg.Replication == pgserver.ReplicationSync,
		LogPath: filepath.Join(dir, "patroni.log")}
}

func patroniDesc(c *patroni.Cluster, t0 time.Time) string {
	mode := "off"
	if c.Synchronous {
		mode = "on"
	}
	rss, _ := c.RSS()
	return fmt.Sprintf("PostgreSQL 15 on 3 nodes under Patroni %s (synchronous mode %s, leader %s at start) with etcd %s as DCS; clients by a multi-host DSN with target_session_attrs=read-write (ready in %.1fs, %d MiB resident)",
		c.Version, mode, c.Leader().Name, c.DCS.Version, time.Since(t0).Seconds(), rss>>20)
}

// launchPatroni launches the cluster on loopback.
func launchPatroni(ctx context.Context, cfg Config, dir string) (launched, error) {
	t0 := time.Now()
	c, err := patroni.Start(ctx, patroniOptions(cfg, dir, nil))
	if err != nil {
		return launched{}, err
	}
	roles := patroniRoles(c)
	return launched{dsn: c.DSN, desc: patroniDesc(c, t0), stop: roles.stopWith(c.Stop), ctl: patroniCtl(c), roles: roles}, nil
}

// launchPatroni launches one node (Patroni, PostgreSQL, an etcd member) on each node
// of the network. Every side's clients use the same multi-host DSN, dialled from
// their own address: a partition that cuts a node off cuts its clients off with it.
func (t *topology) launchPatroni(ctx context.Context, cfg Config, dir string) (launched, error) {
	t0 := time.Now()
	var nodes []*servers.Node
	for _, n := range t.net.Nodes {
		nodes = append(nodes, serverNode(t.net, n))
	}
	c, err := patroni.Start(ctx, patroniOptions(cfg, dir, nodes))
	if err != nil {
		return launched{}, err
	}
	t.admin = c.DSN
	t.addSides(func(int) string { return c.DSN })
	t.primary = func() string { return c.Leader().Name }
	roles := patroniRoles(c)
	roles.onTopology(t)
	return launched{dsn: c.DSN, desc: patroniDesc(c, t0) + ", one node on each of n1 to n3", stop: roles.stopWith(c.Stop), ctl: patroniCtl(c)}, nil
}

// patroniCtl aims kill, pause and restart at the node Patroni names leader when the
// fault fires: every process of the node (Patroni and its PostgreSQL) at once.
func patroniCtl(c *patroni.Cluster) *leaderCtl {
	return &leaderCtl{
		leader: func() processCtl { return c.Leader() },
		node: func(pid int) string {
			for _, m := range c.Members {
				if m.Pid() == pid {
					return m.Name
				}
			}
			return ""
		},
	}
}
