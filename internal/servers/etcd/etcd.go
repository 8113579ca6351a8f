// Package etcd launches a throwaway etcd cluster for tests and runs (Start): three
// members by default, each an etcd process of its own with its data in a temporary
// directory, in its own process group, on free loopback ports or, given Nodes, on the
// address of a node of a topology with a network of its own (servers.Node), at etcd's
// usual ports there. The binaries are the ones scripts/prepare-etcd builds into the
// cache from the Go module proxy.
//
// The members accept any local client (no authentication, for start-up time), which
// can reach their throwaway data. Readiness and the leader are read over etcd's own
// HTTP/JSON gateway (/health, /v3/maintenance/status): the package links no etcd
// client.
//
// What it shares with the other launchers (the temporary directory's owner marker that
// a later launch and `indoubt clean` read, the process faults) is package servers'
// Instance, one per member.
package etcd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
)

// Version is the etcd release scripts/prepare-etcd builds by default.
const Version = "3.6.16"

// The ports of a member on a Node: each node has its own.
const (
	NodeClientPort = 2379
	NodePeerPort   = 2380
)

// Raft timings of a launched cluster: etcd's defaults (a heartbeat every 100 ms, an
// election after 1 s without one).
const (
	HeartbeatInterval = 100 * time.Millisecond
	ElectionTimeout   = time.Second
)

// How long a member may take to shut down (SIGTERM) before it is killed.
const stopGrace = 10 * time.Second

const prepareHint = "run scripts/prepare-etcd (builds etcd from the Go module proxy), or set INDOUBT_ETCD_BIN"

// Options configures Start. The zero value is ready to use.
type Options struct {
	// Members is the cluster's size; 0 means 3.
	Members int
	// Dir is the parent of the members' temporary directories; "" means os.TempDir().
	Dir string
	// Keep leaves the temporary directories in place after Stop, or a failed start.
	Keep bool
	// LogPath, if set, is the log of the first member; the others' are beside it with
	// ".n2", ".n3" ... added. "" means etcd.log in each member's directory.
	LogPath string
	// Log, if set, receives one line per startup step, for humans.
	Log io.Writer
	// Nodes, when set, places member i on Nodes[i] (one each; len(Nodes) == Members):
	// in the node's namespace, listening on its address at NodeClientPort and
	// NodePeerPort. nil: 127.0.0.1 of the caller's namespace, free ports.
	Nodes []*servers.Node
	// Bin is the directory of the etcd binary; "" means INDOUBT_ETCD_BIN, else the
	// cache's etcd-Version/bin.
	Bin string
}

// Cluster is a running etcd cluster. Its fields are read-only; Stop ends every member.
type Cluster struct {
	Members []*Member
	// Endpoints are the members' client addresses, host:port, in order.
	Endpoints []string
	Binary    string
	Version   string // "3.6.16", from etcd --version
	// Token is the cluster's --initial-cluster-token, random per launch.
	Token string

	mu sync.Mutex
	// leader is the index of the member last seen as leader, -1 before any.
	leader int
}

// Member is one etcd process of a Cluster.
type Member struct {
	Name      string // "n1", its --name
	Addr      string // its client address, host:port
	ClientURL string // http://Addr
	PeerURL   string // http://host:peer port
	Dir       string // its temporary directory: the working directory, data and log
	LogPath   string
	ID        string // the member id etcd gave it (decimal), once the cluster is up
	// Handle gives the member's Pid and Exited and the process faults. A Kill loses
	// what the member had not fsynced (etcd fsyncs its WAL before it acknowledges an
	// entry); Start starts it again on its data and ports, and it rejoins the cluster
	// on its own; Restart is a clean stop (SIGTERM) and a start.
	servers.Handle

	on         *servers.Node
	inst       servers.Instance
	bin        string
	args       []string
	cluster    *Cluster
	acct       servers.Account
	peerListen string
}

// Find returns the path of the etcd binary: in bin when it is set, else in
// INDOUBT_ETCD_BIN, else in the cache scripts/prepare-etcd fills (etcd-Version/bin,
// whole once its "complete" file exists). The error when it is missing satisfies
// errors.Is(err, servers.ErrNotInstalled).
func Find(bin string) (string, error) {
	if bin == "" {
		bin = os.Getenv("INDOUBT_ETCD_BIN")
	}
	if bin != "" {
		p := filepath.Join(bin, "etcd")
		if !servers.IsExecutable(p) {
			return "", &servers.NotInstalledError{Server: "etcd", Program: "etcd in " + bin, Hint: prepareHint}
		}
		return p, nil
	}
	cache, err := servers.CacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "etcd-"+Version)
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		return "", &servers.NotInstalledError{Server: "etcd", Program: "etcd " + Version + " in " + dir, Hint: prepareHint}
	}
	p := filepath.Join(dir, "bin", "etcd")
	if !servers.IsExecutable(p) {
		return "", &servers.NotInstalledError{Server: "etcd", Program: p, Hint: "the cache is damaged; remove " + dir + " and " + prepareHint}
	}
	return p, nil
}

// Start starts the members together (each waits for the others to form the cluster)
// and returns once every member reports itself healthy (/health: it knows a leader)
// and names the same leader. ctx bounds the startup only. On error nothing is left
// running and, unless opt.Keep, nothing is left on disk. A missing etcd gives an error
// matching servers.ErrNotInstalled.
func Start(ctx context.Context, opt Options) (*Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	n := opt.Members
	if n <= 0 {
		n = 3
	}
	if opt.Nodes != nil && len(opt.Nodes) != n {
		return nil, fmt.Errorf("etcd: %d nodes for %d members", len(opt.Nodes), n)
	}
	for _, nd := range opt.Nodes {
		if err := nd.Check(); err != nil {
			return nil, fmt.Errorf("etcd: %w", err)
		}
	}
	bin, err := Find(opt.Bin)
	if err != nil {
		return nil, err
	}
	acct, err := servers.ServerAccount()
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	if bin, err = reachableBin(bin, acct); err != nil {
		return nil, err
	}
	token, err := servers.NewPassword()
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	c := &Cluster{Binary: bin, Version: etcdVersion(ctx, bin), Token: "indoubt-" + token[:12], leader: -1}
	fail := func(err error) (*Cluster, error) {
		return nil, errors.Join(err, c.Stop())
	}
	// The ports first: every member's command line names every peer.
	var initial []string
	for i := range n {
		m := &Member{Name: "n" + strconv.Itoa(i+1), bin: bin, cluster: c, acct: acct,
			inst: servers.Instance{Name: "etcd", Keep: opt.Keep, StopSignal: syscall.SIGTERM, StopGrace: stopGrace}}
		m.Handle = m.inst.Handle()
		if opt.Nodes != nil {
			m.on = opt.Nodes[i]
		}
		host, ports, err := servers.ListenPorts(m.on, NodeClientPort, NodePeerPort)
		if err != nil {
			return fail(fmt.Errorf("etcd: %w", err))
		}
		m.Addr = net.JoinHostPort(host, strconv.Itoa(ports[0]))
		m.ClientURL = "http://" + m.Addr
		m.PeerURL = "http://" + net.JoinHostPort(host, strconv.Itoa(ports[1]))
		c.Members = append(c.Members, m)
		c.Endpoints = append(c.Endpoints, m.Addr)
		initial = append(initial, m.Name+"="+m.PeerURL)
	}
	say := c.Members[0].inst.Progress(opt.Log)
	t0 := time.Now()
	for i, m := range c.Members {
		dir, err := m.inst.MakeTempDir(opt.Dir, acct)
		if err != nil {
			return fail(err)
		}
		m.Dir = dir
		m.LogPath = servers.MemberLogPath(opt.LogPath, i, m.Name, dir, "etcd.log")
		if err := acct.Own(dir); err != nil {
			return fail(fmt.Errorf("etcd: %w", err))
		}
		if err := m.inst.OpenLog(m.LogPath); err != nil {
			return fail(err)
		}
		m.args = []string{
			"--name", m.Name,
			"--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", m.ClientURL,
			"--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL,
			"--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", c.Token,
			"--heartbeat-interval", strconv.FormatInt(HeartbeatInterval.Milliseconds(), 10),
			"--election-timeout", strconv.FormatInt(ElectionTimeout.Milliseconds(), 10),
			"--listen-metrics-urls", "",
			"--log-outputs", "stderr",
		}
		if err := m.launch(); err != nil {
			return fail(err)
		}
	}
	for _, m := range c.Members {
		if err := m.waitHealthy(ctx); err != nil {
			return fail(err)
		}
		m.inst.SetRelaunch(m.relaunch)
	}
	// Every member's id, and one leader named by all.
	err = servers.Poll(ctx, 50*time.Millisecond, nil, func(ctx context.Context) error {
		var leader string
		for _, m := range c.Members {
			st, err := m.Status(ctx)
			if err != nil {
				return err
			}
			m.ID = st.Header.MemberID
			if leader != "" && st.Leader != leader {
				return fmt.Errorf("members name leaders %s and %s", leader, st.Leader)
			}
			leader = st.Leader
		}
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("etcd: no leader named by every member: %w", err))
	}
	l := c.Leader()
	say("%d members ready in %v on %s, leader %s", n, time.Since(t0).Round(time.Millisecond), strings.Join(c.Endpoints, ","), l.Name)
	return c, nil
}

// launch starts the member's etcd process and records it in its directories' owner
// markers before it is ready, so that a harness killed meanwhile leaves a process the
// next launch or `indoubt clean` finds.
func (m *Member) launch() error {
	cmd := exec.Command(m.bin, m.args...)
	cmd.Dir = m.Dir
	cmd.Env = []string{"HOME=" + m.Dir, "LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	proc, _, err := m.inst.Launch(m.on, "etcd "+m.Name, cmd, m.acct)
	if err != nil {
		return err
	}
	m.inst.SetProcess(proc)
	return nil
}

// relaunch starts a killed or stopped member again on its data and ports: its data
// directory holds the cluster, so the initial-cluster flags are not read again.
func (m *Member) relaunch(ctx context.Context) error {
	logStart, _ := m.inst.Log().Seek(0, io.SeekEnd)
	if err := m.launch(); err != nil {
		return err
	}
	// Up once it serves its client port: it may need a majority to report healthy,
	// which a partition or another fault may deny it for a while.
	if err := servers.WaitTCP(ctx, m.Addr, m.inst.Process().Exited()); err != nil {
		_ = m.inst.Process().Stop(syscall.SIGKILL, time.Second)
		return fmt.Errorf("etcd %s: start again: %w: %s", m.Name, err, servers.LogTail(m.LogPath, logStart))
	}
	return nil
}

// waitHealthy waits until the member answers /health with health true.
func (m *Member) waitHealthy(ctx context.Context) error {
	err := servers.Poll(ctx, 50*time.Millisecond, m.inst.Process().Exited(), func(ctx context.Context) error {
		var h struct {
			Health string `json:"health"`
			Reason string `json:"reason"`
		}
		if err := m.call(ctx, http.MethodGet, "/health", nil, &h); err != nil {
			return err
		}
		if h.Health != "true" {
			return fmt.Errorf("not healthy: %s", h.Reason)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("etcd %s: %w: %s", m.Name, err, servers.LogTail(m.LogPath, 0))
	}
	return nil
}

// Status is what a member says of itself (/v3/maintenance/status). Ids are decimal
// strings, as the gateway writes uint64s.
type Status struct {
	Header struct {
		MemberID string `json:"member_id"`
		RaftTerm string `json:"raft_term"`
	} `json:"header"`
	Leader    string `json:"leader"`
	RaftIndex string `json:"raftIndex"`
	Version   string `json:"version"`
}

// Status asks the member for its status. A member that lost its leader still
// answers, naming the last one it knew, or "0".
func (m *Member) Status(ctx context.Context) (Status, error) {
	var st Status
	err := m.call(ctx, http.MethodPost, "/v3/maintenance/status", []byte("{}"), &st)
	return st, err
}

// IsLeader reports whether the member says it is the leader: its own id is the leader
// it names. During a partition an old leader may still say so for up to an election
// timeout (then it steps down: etcd's leaders check their quorum).
func (m *Member) IsLeader(ctx context.Context) (bool, error) {
	st, err := m.Status(ctx)
	if err != nil {
		return false, err
	}
	return st.Header.MemberID != "" && st.Header.MemberID == st.Leader, nil
}

// call makes one request of the member's HTTP gateway and decodes the JSON answer into
// out. The node's address is dialled from this namespace, as every launcher's probe.
func (m *Member) call(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, m.ClientURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && path != "/health" {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// probeClient makes the launcher's own requests: no keep-alive, so that no connection
// of the harness outlives a member, and no proxy from the environment.
var probeClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}}

// Leader returns the member the cluster names as leader now: the one named by most of
// the members that answer (each is asked at once, for at most a second: a paused
// member does not answer); when none names one (no quorum, every member down), the
// one last seen as leader, or the first member before any was seen.
func (c *Cluster) Leader() *Member {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sts := c.statuses(ctx)
	votes := map[string]int{}
	best := ""
	for _, st := range sts {
		if st == nil || st.Leader == "" || st.Leader == "0" {
			continue
		}
		votes[st.Leader]++
		if votes[st.Leader] > votes[best] {
			best = st.Leader
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range c.Members {
		if best != "" && o.ID == best {
			c.leader = i
		}
	}
	if c.leader < 0 {
		return c.Members[0]
	}
	return c.Members[c.leader]
}

// Roles asks every member at once whether it is the leader: true or false, and an
// error for a member that did not answer within ctx (down, paused, cut off).
func (c *Cluster) Roles(ctx context.Context) ([]bool, []error) {
	sts := c.statuses(ctx)
	leader := make([]bool, len(sts))
	errs := make([]error, len(sts))
	for i, st := range sts {
		if st == nil {
			errs[i] = fmt.Errorf("etcd %s: no answer", c.Members[i].Name)
			continue
		}
		leader[i] = st.Header.MemberID != "" && st.Header.MemberID == st.Leader
	}
	return leader, errs
}

// statuses asks every member for its status at once; nil for a member that did not
// answer.
func (c *Cluster) statuses(ctx context.Context) []*Status {
	out := make([]*Status, len(c.Members))
	var wg sync.WaitGroup
	for i, m := range c.Members {
		if m.inst.Process() == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if st, err := m.Status(ctx); err == nil {
				out[i] = &st
			}
		}()
	}
	wg.Wait()
	return out
}

// Member returns the member named name ("n2"), or nil.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// RSS returns the resident memory of the members' processes together, in bytes, and
// their peak resident memory together (the sum of each one's VmHWM): read from /proc.
func (c *Cluster) RSS() (now, peak int64, err error) {
	for _, m := range c.Members {
		p := m.inst.Process()
		if p == nil {
			continue
		}
		r, h, err := procMemory(p.Pid())
		if err != nil {
			return 0, 0, fmt.Errorf("etcd %s: %w", m.Name, err)
		}
		now, peak = now+r, peak+h
	}
	return now, peak, nil
}

// procMemory reads VmRSS and VmHWM of pid, in bytes.
func procMemory(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		for key, dst := range map[string]*int64{"VmRSS:": &rss, "VmHWM:": &hwm} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				f := strings.Fields(rest)
				if len(f) == 2 && f[1] == "kB" {
					kb, err := strconv.ParseInt(f[0], 10, 64)
					if err != nil {
						return 0, 0, err
					}
					*dst = kb << 10
				}
			}
		}
	}
	return rss, hwm, nil
}

// Stop stops every member (SIGTERM, SIGKILL after 10 s) and removes their directories
// unless Keep. It may be called more than once; every call returns the first's result.
func (c *Cluster) Stop() error {
	var errs []error
	for _, m := range c.Members {
		errs = append(errs, m.Stop())
	}
	return errors.Join(errs...)
}

// Stop stops the member and removes its directory unless Keep.
func (m *Member) Stop() error { return m.inst.Stop() }

// reachableBin returns bin when acct can reach it, else a copy that it can
// (servers.ReachableCopy): scripts/prepare-etcd builds into the caller's cache, which
// under root's home the unprivileged server account cannot enter.
func reachableBin(bin string, acct servers.Account) (string, error) {
	if acct.CheckReach(bin) == nil {
		return bin, nil
	}
	c, err := servers.ReachableCopy(bin, "etcd-"+Version, acct)
	if err != nil {
		return "", fmt.Errorf("etcd: %w", err)
	}
	return c, nil
}

// etcdVersion returns the version etcd --version reports ("etcd Version: 3.6.16"), or "".
func etcdVersion(ctx context.Context, bin string) string {
	for _, line := range strings.Split(servers.VersionOutput(ctx, bin), "\n") {
		if v, ok := strings.CutPrefix(line, "etcd Version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
