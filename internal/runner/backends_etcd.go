package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	etcdserver "github.com/indoubt/indoubt/internal/servers/etcd"
	"github.com/indoubt/indoubt/stores/etcd"
	"github.com/indoubt/indoubt/workloads"
)

// Etcd is etcd v3 through its official client (stores/etcd). Locally, a cluster of
// three members (--topology replicated) or one, built by scripts/prepare-etcd. The
// register's --mechanism is its reads: linearizable (etcd's default) or serializable
// (served by the member reached, from its own state).
const Etcd StoreName = "etcd"

// etcdMechanisms are the register's --mechanism values: its read modes.
var etcdMechanisms = map[workloads.Name][]string{workloads.Register: names(etcd.ReadModes)}

func etcdAvailable() error { _, err := etcdserver.Find(""); return err }

// etcdNoProxy is the error of a DSN given to the fault proxy: an etcd client speaks
// gRPC to every member it names, and the proxy fronts one server with a protocol it
// parses.
func etcdNoProxy(string) (string, error) {
	return "", fmt.Errorf("etcd: the fault proxy fronts one server and has no gRPC toxics: use process faults and partitions (--network isolated), with --proxy auto or off")
}

func etcdMembers(cfg Config) int {
	if cfg.Topology == TopologyReplicated {
		return 3
	}
	return 1
}

func launchEtcd(ctx context.Context, cfg Config, dir string) (launched, error) {
	t0 := time.Now()
	c, err := etcdserver.Start(ctx, etcdserver.Options{Members: etcdMembers(cfg), LogPath: filepath.Join(dir, "etcd.log")})
	if err != nil {
		return launched{}, err
	}
	dsn := etcd.DSN(c.Endpoints, "")
	return launched{dsn: dsn, desc: etcdDesc(c, t0), stop: c.Stop, ctl: etcdCtl(c), roles: etcdRoles(c)}, nil
}

// etcdDesc describes a launched cluster: its members, its leader, what it took.
func etcdDesc(c *etcdserver.Cluster, t0 time.Time) string {
	rss, _, _ := c.RSS()
	return fmt.Sprintf("etcd %s cluster of %d members (leader %s at start; ready in %.1fs, %d MiB resident)",
		c.Version, len(c.Members), c.Leader().Name, time.Since(t0).Seconds(), rss>>20)
}

// launchEtcd launches one member on each node of the network, and gives the clients
// beside each node a DSN naming that member alone (each worker talks to one member, as
// Jepsen's clients do); the harness's own reads name every member and are
// linearizable whatever the workers' reads.
func (t *topology) launchEtcd(ctx context.Context, cfg Config, dir string) (launched, error) {
	t0 := time.Now()
	var nodes []*servers.Node
	for _, n := range t.net.Nodes {
		nodes = append(nodes, serverNode(t.net, n))
	}
	c, err := etcdserver.Start(ctx, etcdserver.Options{Members: len(nodes), Nodes: nodes, LogPath: filepath.Join(dir, "etcd.log")})
	if err != nil {
		return launched{}, err
	}
	t.admin = etcd.DSN(c.Endpoints, etcd.Linearizable)
	t.addSides(func(i int) string { return etcd.DSN(c.Endpoints[i:i+1], "") })
	t.primary = func() string { return c.Leader().Name }
	etcdRoles(c).onTopology(t)
	return launched{dsn: t.admin, desc: etcdDesc(c, t0) + ", one on each of n1 to n" + fmt.Sprint(len(nodes)), stop: c.Stop, ctl: etcdCtl(c)}, nil
}

func openEtcd(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	ec, err := etcd.ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	if ec.Reads == "" {
		ec.Reads = etcd.Reads(cfg.Mechanism)
	}
	ec.Dial = cfg.dial
	c, err := etcd.Open(ctx, ec)
	if err != nil {
		return nil, nil, err
	}
	return bindClient(cfg, Etcd, c, c.Register(), c.Txns, func() { c.Close() })
}

// leaderCtl applies the process faults to the member that leads when the fault fires
// (an etcd member, a Patroni node; each a processCtl of its own):
// Pid resolves the leader and marks it the target, and the kill or pause that follows
// hits that member (the one whose pid the fault's event records), wherever the
// leadership moves next; the start or resume goes to the member hit.
type leaderCtl struct {
	// leader returns the member that leads now; node names the member whose process
	// is pid, "" for none.
	leader func() processCtl
	node   func(pid int) string

	mu sync.Mutex
	// target is the member the next kill or pause hits; hit the one it hit, until its
	// start or resume; started the member started or resumed last, whose pid the next
	// Pid reports (the event of the start).
	target, hit, started processCtl
}

// etcdCtl is the leaderCtl of an etcd cluster.
func etcdCtl(c *etcdserver.Cluster) *leaderCtl {
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

// Pid returns the pid of the member a fault acts on now: the one hit, while it is down
// or paused; the one just started again, for the event of its start; else the leader,
// which becomes the target.
func (e *leaderCtl) Pid() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.hit != nil:
		return e.hit.Pid()
	case e.started != nil:
		m := e.started
		e.started = nil
		return m.Pid()
	}
	e.target = e.leader()
	return e.target.Pid()
}

// Node names the member whose process is pid, "" when none is.
func (e *leaderCtl) Node(pid int) string { return e.node(pid) }

func (e *leaderCtl) act(act func(processCtl) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.target
	if m == nil {
		m = e.leader()
	}
	if err := act(m); err != nil {
		return err
	}
	e.hit, e.target = m, nil
	return nil
}

func (e *leaderCtl) undo(act func(processCtl) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hit == nil {
		return errors.New("no member is down or paused")
	}
	if err := act(e.hit); err != nil {
		return err
	}
	e.started, e.hit = e.hit, nil
	return nil
}

func (e *leaderCtl) Kill() error   { return e.act(processCtl.Kill) }
func (e *leaderCtl) Pause() error  { return e.act(processCtl.Pause) }
func (e *leaderCtl) Resume() error { return e.undo(processCtl.Resume) }
func (e *leaderCtl) Start(ctx context.Context) error {
	return e.undo(func(m processCtl) error { return m.Start(ctx) })
}

// Restart restarts the target (the leader when Pid was called) cleanly.
func (e *leaderCtl) Restart(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.target
	if m == nil {
		m = e.leader()
	}
	e.target = nil
	err := m.Restart(ctx)
	e.started = m
	return err
}
