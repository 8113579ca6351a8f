// Package patroni launches a throwaway PostgreSQL cluster managed by Patroni (Debian's
// package patroni, 3.0): three nodes by default, each a Patroni process that runs its
// own PostgreSQL 15, with an etcd cluster (package etcd) as the DCS. Patroni
// bootstraps the first leader, clones the replicas with pg_basebackup and fails over
// on its own: the harness never promotes anything. Synchronous mode, when asked for,
// is Patroni's synchronous_mode: a commit on the leader waits for one synchronous
// standby, and only that standby may be promoted.
//
// Each node runs in a PID namespace of its own, inside a user namespace that maps the
// server account to itself (unshare --user --pid --kill-child --mount-proc), with
// Patroni as the namespace's first process: when the node's unshare dies (a SIGKILL of
// the harness reaches it through its parent-death signal), its child Patroni is
// killed, and with it every process of the namespace, PostgreSQL's included. Without
// that, a PostgreSQL started by a killed Patroni would outlive it, orphaned.
//
// The nodes accept clients of the launch's superuser password only (scram-sha-256),
// from loopback or the nodes' subnet. Readiness and roles are read from Patroni's REST
// API (/cluster, /patroni): the package links no database client.
package patroni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/etcd"
	"github.com/indoubt/indoubt/internal/servers/postgres"
)

// The ports of a node on a servers.Node: PostgreSQL's and Patroni's REST API.
const (
	NodePort    = postgres.NodePort
	NodeAPIPort = 8008
)

// Patroni's timings here: the leader key's TTL, one HA loop a second, and the DCS
// retry timeout (loop_wait + 2 retry_timeout within the TTL, as Patroni requires), a
// third of Patroni's defaults so that a failover takes seconds. A leader that cannot reach the DCS demotes itself
// after RetryTimeout; the others elect a new one once the TTL has run out.
const (
	TTL          = 10 * time.Second
	LoopWait     = time.Second
	RetryTimeout = 3 * time.Second
)

const stopGrace = 5 * time.Second

const installHint = "install Debian package patroni (set create_main_cluster = false in /etc/postgresql-common/createcluster.conf first)"

// Options configures Start.
type Options struct {
	// Nodes places node i (a Patroni, its PostgreSQL and an etcd member) on Nodes[i];
	// nil puts three nodes on loopback, free ports.
	Nodes []*servers.Node
	// Synchronous turns Patroni's synchronous_mode on.
	Synchronous bool
	// Dir is the parent of the temporary directories; "" means os.TempDir().
	Dir string
	// Keep leaves the directories after Stop.
	Keep bool
	// LogPath, if set, is where node n1's Patroni log goes (n2's with ".n2" added ...);
	// the etcd members' logs are beside it with ".etcd" (etcd.Options.LogPath).
	LogPath string
	// Log, if set, receives one line per startup step.
	Log io.Writer
	// PGVersion is the PostgreSQL to run, as postgres.Bin takes it; "" means 15.
	PGVersion string
}

// Cluster is a running Patroni cluster and its DCS.
type Cluster struct {
	Members []*Member
	DCS     *etcd.Cluster
	// Password is the superuser's (postgres) password.
	Password string
	// DSN names every node, as a deployment's client does: postgres://postgres:PW@
	// HOST1:PORT1,HOST2:PORT2,HOST3:PORT3/postgres?target_session_attrs=read-write.
	// A client tries the hosts in order and keeps the first that takes writes.
	DSN         string
	Synchronous bool
	Version     string // Patroni's, from patroni --version
	Scope       string

	mu     sync.Mutex
	leader int
}

// Member is one node: a Patroni process and the PostgreSQL it runs.
type Member struct {
	Name    string // "n1", Patroni's name
	Addr    string // PostgreSQL's host:port
	API     string // Patroni's REST API, host:port
	Dir     string
	LogPath string
	// Handle gives the node's Pid (its unshare's, the leader of its process tree),
	// Exited and the process faults, which act on the node's every process (Patroni and
	// PostgreSQL) at once. Restart kills the node (its unshare ignores SIGTERM) and
	// starts it again; Start starts a killed node again: Patroni finds its data and
	// rejoins.
	servers.Handle

	on   *servers.Node
	inst servers.Instance
	args []string
	acct servers.Account
}

// Find returns the patroni program, or an error matching servers.ErrNotInstalled.
func Find() (string, error) {
	for _, p := range []string{os.Getenv("INDOUBT_PATRONI"), "/usr/bin/patroni"} {
		if p != "" && servers.IsExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("patroni"); err == nil {
		return p, nil
	}
	return "", &servers.NotInstalledError{Server: "patroni", Program: "patroni", Hint: installHint}
}

// Available says why no Patroni cluster can be launched here, or nil.
func Available() error {
	if _, err := Find(); err != nil {
		return err
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return &servers.NotInstalledError{Server: "patroni", Program: "unshare", Hint: "install Debian package util-linux"}
	}
	if _, err := etcd.Find(""); err != nil {
		return err
	}
	_, err := postgres.Bin("15")
	return err
}

// Start launches the etcd cluster, then the three Patroni nodes together, and returns
// once one leader and two replicas run (in synchronous mode, one of them the
// synchronous standby) by Patroni's own account. ctx bounds the start. On error
// nothing is left running.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	patroni, _ := Find()
	unshare, _ := exec.LookPath("unshare")
	version := opt.PGVersion
	if version == "" {
		version = "15"
	}
	bin, err := postgres.Bin(version)
	if err != nil {
		return nil, err
	}
	n := 3
	if opt.Nodes != nil && len(opt.Nodes) != n {
		return nil, fmt.Errorf("patroni: %d nodes, want 3", len(opt.Nodes))
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("patroni: %w", err)
	}
	c := &Cluster{Synchronous: opt.Synchronous, leader: -1}
	fail := func(err error) (*Cluster, error) { return nil, errors.Join(err, c.Stop()) }
	etcdLog := ""
	if opt.LogPath != "" {
		etcdLog = opt.LogPath + ".etcd"
	}
	if c.DCS, err = etcd.Start(ctx, etcd.Options{Members: n, Nodes: opt.Nodes, Dir: opt.Dir, Keep: opt.Keep, LogPath: etcdLog, Log: opt.Log}); err != nil {
		return nil, err
	}
	var pw [3]string
	for i := range pw {
		if pw[i], err = servers.NewPassword(); err != nil {
			return fail(fmt.Errorf("patroni: %w", err))
		}
	}
	c.Password = pw[0]
	c.Scope = "indoubt-" + pw[2][:8]
	c.Version = patroniVersion(ctx, patroni)
	subnet := "127.0.0.1/32"
	if opt.Nodes != nil {
		subnet = opt.Nodes[0].Subnet
	}
	var hosts []string
	for i := range n {
		m := &Member{Name: "n" + strconv.Itoa(i+1), acct: acct,
			inst: servers.Instance{Name: "patroni", Keep: opt.Keep, StopSignal: syscall.SIGKILL, StopGrace: stopGrace}}
		m.Handle = m.inst.Handle()
		if opt.Nodes != nil {
			m.on = opt.Nodes[i]
		}
		host, ports, err := servers.ListenPorts(m.on, NodePort, NodeAPIPort)
		if err != nil {
			return fail(fmt.Errorf("patroni: %w", err))
		}
		port, api := ports[0], ports[1]
		m.Addr = net.JoinHostPort(host, strconv.Itoa(port))
		m.API = net.JoinHostPort(host, strconv.Itoa(api))
		hosts = append(hosts, m.Addr)
		c.Members = append(c.Members, m)
		dir, err := m.inst.MakeTempDir(opt.Dir, acct)
		if err != nil {
			return fail(err)
		}
		m.Dir = dir
		m.LogPath = servers.MemberLogPath(opt.LogPath, i, m.Name, dir, "patroni.log")
		conf := config(c, m, host, port, api, subnet, bin, pw, opt.Synchronous)
		path := filepath.Join(dir, "patroni.yml")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return fail(fmt.Errorf("patroni: %w", err))
		}
		if err := acct.Own(dir, path); err != nil {
			return fail(fmt.Errorf("patroni: %w", err))
		}
		if err := m.inst.OpenLog(m.LogPath); err != nil {
			return fail(err)
		}
		// Patroni first in a PID namespace of its own (see the package comment), as
		// the server account mapped to itself.
		m.args = []string{unshare, "--user", "--map-user=" + strconv.Itoa(int(acct.UID)), "--map-group=" + strconv.Itoa(int(acct.GID)),
			"--pid", "--kill-child", "--mount-proc", patroni, path}
		if err := m.launch(); err != nil {
			return fail(err)
		}
		m.inst.SetRelaunch(func(ctx context.Context) error { return m.launch() })
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", c.Password), Host: strings.Join(hosts, ","), Path: "/postgres",
		RawQuery: "target_session_attrs=read-write&sslmode=disable&connect_timeout=2"}
	c.DSN = u.String()
	say := c.Members[0].inst.Progress(opt.Log)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := servers.Poll(ctx, 200*time.Millisecond, nil, c.ready); err != nil {
		return fail(fmt.Errorf("patroni: cluster not ready: %w: %s", err, lastLines(servers.LogTail(c.Members[0].LogPath, 0), 8)))
	}
	say("3 nodes ready in %v (leader %s, synchronous mode %v)", time.Since(t0).Round(time.Millisecond), c.Leader().Name, opt.Synchronous)
	return c, nil
}

// config writes node m's patroni.yml.
func config(c *Cluster, m *Member, host string, port, api int, subnet, bin string, pw [3]string, sync bool) string {
	dcs := c.DCS.Endpoints
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return fmt.Sprintf(`scope: %[1]s
namespace: /indoubt/
name: %[2]s
log:
  level: INFO
restapi:
  listen: %[3]s
  connect_address: %[3]s
etcd3:
  hosts: %[4]s
bootstrap:
  dcs:
    ttl: %[5]d
    loop_wait: %[6]d
    retry_timeout: %[7]d
    maximum_lag_on_failover: 1048576
    synchronous_mode: %[8]v
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 100
        wal_keep_size: 128MB
  initdb:
  - encoding: UTF8
  - locale: C
  pg_hba:
  - local all all trust
  - host replication replicator %[9]s scram-sha-256
  - host all all %[9]s scram-sha-256
  - host replication replicator 127.0.0.1/32 scram-sha-256
  - host all all 127.0.0.1/32 scram-sha-256
postgresql:
  listen: %[10]s
  connect_address: %[10]s
  data_dir: %[11]s
  bin_dir: %[12]s
  pgpass: %[13]s
  authentication:
    superuser: {username: postgres, password: %[14]s}
    replication: {username: replicator, password: %[15]s}
    rewind: {username: postgres, password: %[14]s}
  parameters:
    unix_socket_directories: %[16]s
`, c.Scope, m.Name, net.JoinHostPort(hostOf(m.API), strconv.Itoa(api)), q(strings.Join(dcs, ",")),
		int(TTL.Seconds()), int(LoopWait.Seconds()), int(RetryTimeout.Seconds()), sync, subnet,
		net.JoinHostPort(host, strconv.Itoa(port)), q(filepath.Join(m.Dir, "data")), q(bin), q(filepath.Join(m.Dir, "pgpass")),
		q(pw[0]), q(pw[1]), q(m.Dir))
}

func hostOf(addr string) string { h, _, _ := net.SplitHostPort(addr); return h }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// launch starts the node's unshare (and through it Patroni) and records it in the
// owner marker before the cluster is ready.
func (m *Member) launch() error {
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Dir = m.Dir
	cmd.Env = []string{"HOME=" + m.Dir, "LC_ALL=C.UTF-8", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	proc, _, err := m.inst.Launch(m.on, "patroni "+m.Name, cmd, m.acct)
	if err != nil {
		return err
	}
	m.inst.SetProcess(proc)
	return nil
}

// memberState is one member in Patroni's /cluster.
type memberState struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	State string `json:"state"`
}

// clusterState asks member m for Patroni's view of the cluster.
func (m *Member) clusterState(ctx context.Context) ([]memberState, error) {
	var out struct {
		Members []memberState `json:"members"`
	}
	err := m.get(ctx, "/cluster", &out)
	return out.Members, err
}

// Role asks member m's Patroni for its own role: "primary" (or "master", as Patroni
// 3.0 says it), "replica", ... and its PostgreSQL's state.
func (m *Member) Role(ctx context.Context) (role, state string, err error) {
	var out struct {
		Role  string `json:"role"`
		State string `json:"state"`
	}
	err = m.get(ctx, "/patroni", &out)
	return out.Role, out.State, err
}

func (m *Member) get(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.API+path, nil)
	if err != nil {
		return err
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// /patroni answers 503 on a node whose PostgreSQL is not running, with the JSON.
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}

var apiClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

// ready is nil once a member's /cluster shows a leader and every member running or
// streaming, and in synchronous mode a synchronous standby.
func (c *Cluster) ready(ctx context.Context) error {
	for _, m := range c.Members {
		select {
		case <-m.inst.Process().Exited():
			return fmt.Errorf("patroni %s exited: %s", m.Name, lastLines(servers.LogTail(m.LogPath, 0), 5))
		default:
		}
	}
	ms, err := c.Members[0].clusterState(ctx)
	if err != nil {
		return err
	}
	leaders, running, syncs := 0, 0, 0
	for _, s := range ms {
		if s.Role == "leader" {
			leaders++
		}
		if s.Role == "sync_standby" {
			syncs++
		}
		if s.State == "running" || s.State == "streaming" {
			running++
		}
	}
	if leaders != 1 || running != len(c.Members) || c.Synchronous && syncs != 1 {
		return fmt.Errorf("cluster %+v", ms)
	}
	return nil
}

// Leader returns the member Patroni names leader (in /cluster, asked of each member in
// turn), or the one last seen so.
func (c *Cluster) Leader() *Member {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, m := range c.Members {
		ms, err := m.clusterState(ctx)
		if err != nil {
			continue
		}
		for _, s := range ms {
			if s.Role != "leader" {
				continue
			}
			for i, o := range c.Members {
				if o.Name == s.Name {
					c.mu.Lock()
					c.leader = i
					c.mu.Unlock()
					return o
				}
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader < 0 {
		return c.Members[0]
	}
	return c.Members[c.leader]
}

// RSS returns the resident memory of every process of the nodes (Patroni, PostgreSQL)
// and of the DCS together, in bytes.
func (c *Cluster) RSS() (int64, error) {
	var total int64
	for _, m := range c.Members {
		p := m.inst.Process()
		if p == nil {
			continue
		}
		b, err := treeRSS(p.Pid())
		if err != nil {
			return 0, err
		}
		total += b
	}
	dcs, _, err := c.DCS.RSS()
	return total + dcs, err
}

// treeRSS sums VmRSS of pid and its descendants, from /proc's parent links.
func treeRSS(pid int) (int64, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	parent := map[int]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 {
			parent[p], _ = strconv.Atoi(f[1])
		}
	}
	var total int64
	for p := range parent {
		for q := p; q > 1; q = parent[q] {
			if q == pid {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", p))
				for _, line := range strings.Split(string(b), "\n") {
					if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
						if f := strings.Fields(rest); len(f) == 2 {
							kb, _ := strconv.ParseInt(f[0], 10, 64)
							total += kb << 10
						}
					}
				}
				break
			}
		}
	}
	return total, nil
}

// Stop kills the Patroni nodes (SIGKILL to each unshare: it ignores SIGTERM, and its
// death kills its namespace, Patroni and PostgreSQL with it: the data is thrown away,
// or kept as a crash left it with Keep), then stops the DCS, and removes every
// directory unless Keep.
func (c *Cluster) Stop() error {
	var errs []error
	var wg sync.WaitGroup
	errc := make([]error, len(c.Members))
	for i, m := range c.Members {
		wg.Add(1)
		go func() { defer wg.Done(); errc[i] = m.stop() }()
	}
	wg.Wait()
	errs = append(errs, errc...)
	if c.DCS != nil {
		errs = append(errs, c.DCS.Stop())
	}
	return errors.Join(errs...)
}

// stop kills the node: the whole tree goes, a PID namespace dies with its first process.
func (m *Member) stop() error { return m.inst.Stop() }

func patroniVersion(ctx context.Context, bin string) string {
	f := strings.Fields(servers.VersionOutput(ctx, bin))
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}
