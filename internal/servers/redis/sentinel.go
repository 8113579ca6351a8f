package redis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/indoubt/indoubt/internal/servers"
)

// MasterName is the name under which the Sentinels of a Replicated monitor its
// primary: the master_name of its DSN.
const MasterName = "indoubt"

// Sentinel timings of a Replicated, small so that a failover takes seconds, not the
// 30 s of Redis's defaults.
const (
	// DefaultSentinelDownAfter is how long the primary must not answer before a
	// Sentinel thinks it down (sentinel down-after-milliseconds).
	DefaultSentinelDownAfter = time.Second
	// DefaultSentinelFailoverTimeout is Sentinel's failover-timeout: a failover that
	// stalls is retried after twice this, by another Sentinel if need be.
	DefaultSentinelFailoverTimeout = time.Second
)

// How long Failover waits for the Sentinels to promote the replica.
const sentinelPromoteWait = time.Minute

// ReplicatedOptions configures StartReplicated.
type ReplicatedOptions struct {
	// Redis configures both data nodes (Persistence and Settings apply to both; LogPath
	// is the primary's log, the replica's is beside it with ".replica" added and the
	// Sentinels' with ".sentinel1" to ".sentinel3").
	Redis Options
	// DownAfter and FailoverTimeout are the Sentinels' down-after-milliseconds and
	// failover-timeout; 0 means DefaultSentinelDownAfter, DefaultSentinelFailoverTimeout.
	DownAfter, FailoverTimeout time.Duration
	// Replicas is the number of replicas of the primary (0 means 1), Sentinels the
	// number of Sentinels (0 means 3), Quorum how many Sentinels must find the
	// primary down to start a failover (0 means a majority of them). Jepsen's layout
	// is 2 replicas and 5 Sentinels, quorum 3.
	Replicas, Sentinels, Quorum int
	// Nodes, when set, places the data nodes (the primary first, then each replica)
	// and SentinelNodes the Sentinels on nodes of a network of their own
	// (Options.Node), one each; a Sentinel may share a node with a data node. Both or
	// neither.
	Nodes, SentinelNodes []*servers.Node
}

// Replicated is a Redis primary, replicas of it (replicaof; one by default) and
// Sentinels (three by default) that monitor it under MasterName with a quorum of a
// majority, each launched like Start's server (one password for all, masterauth and
// Sentinel auth-pass included). Which data node is primary changes with failovers:
// Primary asks the Sentinels. Its fields are read-only; Stop ends every process.
//
// Replication is asynchronous, Redis's only mode: the primary acknowledges a write
// before the replica has it, so a failover can lose acknowledged writes.
type Replicated struct {
	// Nodes are the data nodes as launched: Nodes[0] was the first primary, the
	// others its replicas.
	Nodes     []*Server
	Sentinels []*Server
	Password  string
	// DSN names the Sentinels and the master name, as indoubt run --dsn takes it:
	// redis://:PASSWORD@SENTINEL1/0?master_name=indoubt&addr=SENTINEL2&addr=SENTINEL3.
	DSN string
	// DownAfter, FailoverTimeout and Quorum are the Sentinels' settings.
	DownAfter, FailoverTimeout time.Duration
	Quorum                     int

	mu      sync.Mutex
	primary int     // index in Nodes of the primary, as last seen
	killed  *Server // the node a Kill or a Failover left down
	paused  *Server // the node a Pause stopped
}

// StartReplicated starts a primary, its replicas and the Sentinels, and returns when
// every replica's link to the primary is up and every Sentinel knows every replica
// and every other Sentinel. On error nothing is left running.
func StartReplicated(ctx context.Context, opt ReplicatedOptions) (*Replicated, error) {
	replicas, sentinels := opt.Replicas, opt.Sentinels
	if replicas <= 0 {
		replicas = 1
	}
	if sentinels <= 0 {
		sentinels = 3
	}
	quorum := opt.Quorum
	if quorum <= 0 {
		quorum = sentinels/2 + 1
	}
	if quorum > sentinels {
		return nil, fmt.Errorf("redis: quorum %d of %d Sentinels", quorum, sentinels)
	}
	if (opt.Nodes == nil) != (opt.SentinelNodes == nil) ||
		opt.Nodes != nil && (len(opt.Nodes) != 1+replicas || len(opt.SentinelNodes) != sentinels) {
		return nil, fmt.Errorf("redis: %d data nodes and %d Sentinel nodes for a primary, %d replicas and %d Sentinels", len(opt.Nodes), len(opt.SentinelNodes), replicas, sentinels)
	}
	node := func(nodes []*servers.Node, i int) *servers.Node {
		if nodes == nil {
			return nil
		}
		return nodes[i]
	}
	rr := &Replicated{DownAfter: opt.DownAfter, FailoverTimeout: opt.FailoverTimeout, Quorum: quorum}
	if rr.DownAfter <= 0 {
		rr.DownAfter = DefaultSentinelDownAfter
	}
	if rr.FailoverTimeout <= 0 {
		rr.FailoverTimeout = DefaultSentinelFailoverTimeout
	}
	var err error
	if rr.Password, err = servers.NewPassword(); err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	fail := func(err error) (*Replicated, error) {
		_ = rr.Stop()
		return nil, err
	}
	// masterauth on both: either may be a replica after a failover. A full sync starts
	// at once, not after the 5 s Redis waits by default for more replicas to share it.
	auth := "masterauth " + rr.Password + "\nrepl-diskless-sync-delay 0\n"
	popt := opt.Redis
	popt.Node = node(opt.Nodes, 0)
	primary, err := startRedis(ctx, popt, redisNode{name: "redis", password: rr.Password, conf: auth})
	if err != nil {
		return fail(err)
	}
	rr.Nodes = append(rr.Nodes, primary)
	replicaOf := fmt.Sprintf("replicaof %s %d\n", primary.host(), primary.Port)
	for i := 1; i <= replicas; i++ {
		ropt := opt.Redis
		ropt.LogPath = suffixed(ropt.LogPath, ".replica")
		if i > 1 {
			ropt.LogPath += strconv.Itoa(i)
		}
		ropt.Node = node(opt.Nodes, i)
		r, err := startRedis(ctx, ropt, redisNode{name: "redis-replica", password: rr.Password, conf: auth + replicaOf})
		if err != nil {
			return fail(err)
		}
		rr.Nodes = append(rr.Nodes, r)
	}
	for _, r := range rr.Nodes[1:] {
		if err := waitLinked(ctx, r, rr.Password); err != nil {
			return fail(err)
		}
	}
	sconf := fmt.Sprintf("sentinel monitor %[1]s %[6]s %[2]d %[7]d\nsentinel auth-pass %[1]s %[3]s\n"+
		"sentinel down-after-milliseconds %[1]s %[4]d\nsentinel failover-timeout %[1]s %[5]d\n",
		MasterName, primary.Port, rr.Password, rr.DownAfter.Milliseconds(), rr.FailoverTimeout.Milliseconds(), primary.host(), quorum)
	for i := 1; i <= sentinels; i++ {
		sopt := Options{Dir: opt.Redis.Dir, Keep: opt.Redis.Keep, Log: opt.Redis.Log,
			LogPath: suffixed(opt.Redis.LogPath, ".sentinel"+strconv.Itoa(i)), Node: node(opt.SentinelNodes, i-1)}
		s, err := startRedis(ctx, sopt, redisNode{name: "sentinel", password: rr.Password, conf: sconf, sentinel: true})
		if err != nil {
			return fail(err)
		}
		rr.Sentinels = append(rr.Sentinels, s)
	}
	for _, s := range rr.Sentinels {
		if err := waitSentinelKnows(ctx, s, rr.Password, replicas, sentinels-1); err != nil {
			return fail(err)
		}
	}
	rr.DSN = rr.SentinelDSN(0)
	return rr, nil
}

// SentinelDSN is the DSN that names every Sentinel, starting with Sentinels[first]
// (a client asks them in that order): redis://:PASSWORD@SENTINEL/0?master_name=
// indoubt&addr=SENTINEL..., as indoubt run --dsn takes it. A client beside a node
// starts with the Sentinel on its node.
func (rr *Replicated) SentinelDSN(first int) string {
	n := len(rr.Sentinels)
	dsn := fmt.Sprintf("redis://:%s@%s/0?master_name=%s", rr.Password, rr.Sentinels[first%n].Addr, MasterName)
	for i := 1; i < n; i++ {
		dsn += "&addr=" + rr.Sentinels[(first+i)%n].Addr
	}
	return dsn
}

func suffixed(path, suffix string) string {
	if path == "" {
		return ""
	}
	return path + suffix
}

// waitLinked waits until replica's replication link to its primary is up.
func waitLinked(ctx context.Context, replica *Server, password string) error {
	err := servers.Poll(ctx, 50*time.Millisecond, replica.Exited(), func(ctx context.Context) error {
		return replicationHas(ctx, replica.Addr, password, "replication link not up yet", "master_link_status:up")
	})
	if err != nil {
		return fmt.Errorf("redis: replica %s: %w", replica.Addr, err)
	}
	return nil
}

// waitSentinelKnows waits until Sentinel s knows the replicas and the other
// Sentinels (from their hello messages, every 2 s): before that a failover could not
// be agreed on, or would leave a Sentinel behind that still names the old primary.
func waitSentinelKnows(ctx context.Context, s *Server, password string, replicas, others int) error {
	err := servers.Poll(ctx, 50*time.Millisecond, s.Exited(), func(ctx context.Context) error {
		reply, err := redisCall(ctx, s.Addr, password, "SENTINEL", "MASTER", MasterName)
		if err != nil {
			return err
		}
		// A flat list of field names and values.
		fields := map[string]string{}
		for i := 0; i+1 < len(reply); i += 2 {
			fields[reply[i]] = reply[i+1]
		}
		if fields["num-slaves"] != strconv.Itoa(replicas) || fields["num-other-sentinels"] != strconv.Itoa(others) {
			return fmt.Errorf("knows %s replicas and %s other Sentinels", fields["num-slaves"], fields["num-other-sentinels"])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sentinel %s: %w", s.Addr, err)
	}
	return nil
}

// masterAddr asks the Sentinels, in turn, where the primary is.
func (rr *Replicated) masterAddr(ctx context.Context) (string, error) {
	var errs []error
	for _, s := range rr.Sentinels {
		reply, err := redisCall(ctx, s.Addr, rr.Password, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MasterName)
		if err == nil && len(reply) != 2 {
			err = fmt.Errorf("get-master-addr-by-name: reply %q", reply)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("sentinel %s: %w", s.Addr, err))
			continue
		}
		return net.JoinHostPort(reply[0], reply[1]), nil
	}
	return "", errors.Join(errs...)
}

// Primary returns the data node the Sentinels name as primary now, or, when none
// answers, the one last seen as primary.
func (rr *Replicated) Primary() *Server {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	addr, err := rr.masterAddr(ctx)
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if err == nil {
		for i, n := range rr.Nodes {
			if n.Addr == addr {
				rr.primary = i
			}
		}
	}
	return rr.Nodes[rr.primary]
}

// Pid returns the process id of the primary's redis-server.
func (rr *Replicated) Pid() int { return rr.Primary().Pid() }

// Kill sends SIGKILL to the primary. Down longer than DownAfter, it is replaced by the
// replica; Start starts it again either way, and the Sentinels make it a replica then.
func (rr *Replicated) Kill() error { return rr.actOnPrimary(&rr.killed, (*Server).Kill) }

// Start starts again the node that Kill or Failover left down, on its port and data,
// with its configuration file as the Sentinels last rewrote it.
func (rr *Replicated) Start(ctx context.Context) error {
	return rr.actOnMarked(&rr.killed, "start: no node is down", func(n *Server) error { return n.Start(ctx) })
}

// Pause stops the primary (SIGSTOP) until Resume. Paused longer than DownAfter, it is
// replaced by the replica, and demoted by the Sentinels once it runs again.
func (rr *Replicated) Pause() error { return rr.actOnPrimary(&rr.paused, (*Server).Pause) }

// Resume continues the node that Pause stopped.
func (rr *Replicated) Resume() error {
	return rr.actOnMarked(&rr.paused, "resume: no node is paused", (*Server).Resume)
}

// actOnPrimary applies act to the primary and, when it succeeds, marks the primary in
// *mark: the node a later actOnMarked must reach, wherever the Sentinels moved the
// primary meanwhile.
func (rr *Replicated) actOnPrimary(mark **Server, act func(*Server) error) error {
	p := rr.Primary()
	if err := act(p); err != nil {
		return err
	}
	rr.mu.Lock()
	*mark = p
	rr.mu.Unlock()
	return nil
}

// actOnMarked applies act to the node in *mark and clears the mark when it succeeds;
// with no node marked it fails with "redis: "+none.
func (rr *Replicated) actOnMarked(mark **Server, none string, act func(*Server) error) error {
	rr.mu.Lock()
	n := *mark
	rr.mu.Unlock()
	if n == nil {
		return errors.New("redis: " + none)
	}
	if err := act(n); err != nil {
		return err
	}
	rr.mu.Lock()
	*mark = nil
	rr.mu.Unlock()
	return nil
}

// Restart shuts the primary down cleanly and starts it again.
func (rr *Replicated) Restart(ctx context.Context) error { return rr.Primary().Restart(ctx) }

// Failover kills the primary (SIGKILL) and returns once the Sentinels, on their own,
// have promoted a replica: they name it as the primary and it answers as one. The
// old primary stays down until Rejoin. It fails when every replica is down too, or
// the promotion takes longer than a minute.
func (rr *Replicated) Failover(ctx context.Context) error {
	old := rr.Primary()
	rr.mu.Lock()
	up := 0
	for _, n := range rr.Nodes {
		if n != old && rr.killed != n {
			up++
		}
	}
	rr.mu.Unlock()
	if up == 0 {
		return errors.New("redis: failover: the replica is down: nothing to promote")
	}
	if err := rr.Kill(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sentinelPromoteWait)
	defer cancel()
	err := servers.Poll(ctx, 20*time.Millisecond, nil, func(ctx context.Context) error {
		addr, err := rr.masterAddr(ctx)
		if err != nil {
			return err
		}
		if addr == old.Addr {
			return fmt.Errorf("the Sentinels still name %s", addr)
		}
		return replicationHas(ctx, addr, rr.Password, "named by the Sentinels, not yet a master", "role:master")
	})
	if err != nil {
		return fmt.Errorf("redis: failover: the Sentinels did not promote a replica of %s: %w", old.Addr, err)
	}
	rr.Primary()
	return nil
}

// Rejoin starts the old primary that Failover left down again, as it would come back
// in production: with its configuration file naming it a primary and, without
// persistence, no data. The Sentinels turn it into a replica of the new primary;
// Rejoin returns when it answers PING, before that. WaitReplica waits for the rest.
func (rr *Replicated) Rejoin(ctx context.Context) error { return rr.Start(ctx) }

// WaitReplica waits until every data node that is not the primary is a replica of it
// with its replication link up: after a Rejoin, once the Sentinels have demoted the old
// primary (they look every 10 s) and it has synced. The primary is asked for anew at
// each look: on a loaded machine the Sentinels may fail over again meanwhile.
func (rr *Replicated) WaitReplica(ctx context.Context) error {
	var p, other *Server
	err := servers.Poll(ctx, 50*time.Millisecond, nil, func(ctx context.Context) error {
		p = rr.Primary()
		for _, other = range rr.Nodes {
			if other == p {
				continue
			}
			if err := replicationHas(ctx, other.Addr, rr.Password, "not yet a linked replica of the primary",
				"role:slave", "master_host:"+p.host(), fmt.Sprintf("master_port:%d", p.Port), "master_link_status:up"); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis: %s as a replica of %s: %w", other.Addr, p.Addr, err)
	}
	return nil
}

// Role asks data node n for its role ("master" or "slave", from INFO replication):
// its own report, which during a partition may disagree with the Sentinels'.
func (rr *Replicated) Role(ctx context.Context, n *Server) (string, error) {
	reply, err := redisCall(ctx, n.Addr, rr.Password, "INFO", "replication")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.Join(reply, "\n"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return v, nil
		}
	}
	return "", errors.New("redis: no role in INFO replication")
}

// Stop stops the Sentinels first, so that they fail nothing over while the data nodes
// stop, then both data nodes, and removes every directory.
func (rr *Replicated) Stop() error {
	var errs []error
	for _, s := range rr.Sentinels {
		errs = append(errs, s.Stop())
	}
	for _, n := range rr.Nodes {
		if n != nil {
			errs = append(errs, n.Stop())
		}
	}
	return errors.Join(errs...)
}

// redisCall authenticates with password, sends one command and returns its reply,
// flattened: a simple or bulk string is one element, an array its strings in order (a
// nested array's inline). An error reply is an error.
func redisCall(ctx context.Context, addr, password string, args ...string) ([]string, error) {
	d := net.Dialer{Timeout: time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	var req strings.Builder
	for _, cmd := range [][]string{{"AUTH", password}, args} {
		fmt.Fprintf(&req, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := io.WriteString(c, req.String()); err != nil {
		return nil, err
	}
	br := bufio.NewReader(io.LimitReader(c, 1<<20))
	if _, err := readReply(br, nil, 0); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return readReply(br, nil, 0)
}

// replicationHas reads the replication section of addr's INFO and errs with notYet
// unless it holds every one of want: a condition to servers.Poll on.
func replicationHas(ctx context.Context, addr, password, notYet string, want ...string) error {
	reply, err := redisCall(ctx, addr, password, "INFO", "replication")
	if err != nil {
		return err
	}
	info := strings.Join(reply, "\n")
	for _, w := range want {
		if !strings.Contains(info, w) {
			return errors.New(notYet)
		}
	}
	return nil
}

// readReply reads one RESP2 reply and appends its strings to out.
func readReply(br *bufio.Reader, out []string, depth int) ([]string, error) {
	if depth > 8 {
		return nil, errors.New("reply nested too deep")
	}
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+', ':':
		return append(out, body), nil
	case '-':
		return nil, fmt.Errorf("reply %q", body)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n > 1<<20 {
			return nil, fmt.Errorf("bulk length %q", body)
		}
		if n < 0 {
			return append(out, ""), nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, fmt.Errorf("read reply: %w", err)
		}
		return append(out, string(b[:n])), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n > 1<<16 {
			return nil, fmt.Errorf("array length %q", body)
		}
		for i := 0; i < n; i++ {
			if out, err = readReply(br, out, depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("reply %q: unknown type", line)
}
