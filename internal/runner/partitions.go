package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"math/rand/v2"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/outages"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/cassandra"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

// Partitions between nodes (faults' partition:SHAPE@START-END), after Jepsen's
// nemesis. With --network isolated, or whenever such a fault is asked for, every
// server of the topology runs on a node of its own: a network namespace with one
// address on a bridge that leads nowhere (internal/netns). The workers are spread
// over the nodes, round robin, and each dials from the address of the clients that
// stand beside its node, so a grudge against a node is one against its clients too;
// the harness's own reads (set-up, final reads, the role reports) come from an
// address no grudge names, as Jepsen's control node.
//
// A partition is applied on every node at its START (each node's nftables set of the
// sources it drops) and healed at its END; each change is a nemesis event with the
// ground truth, who drops whose packets and who reaches whom (outages.Partitions).
// The data nodes' own reports of their role are polled and recorded on every change
// (results.RoleEvent): two nodes reporting primary at once are a split brain, and the
// clients' side joins each acknowledgement to the primary it could reach.
//
// Lost writes are the checker's: a partition is a data-losing fault of the timeline
// it attributes them from. When the harness fails the topology over inside a
// partition (failover@T: the primary killed, the standby promoted, as an orchestrator
// that fences the old primary does), the failover is the later fault and takes them;
// when the system fails over on its own (Redis's Sentinels), the partition does.
//
// Links (a standard toxic with link=replication) put toxiproxy on the standby's path
// to the primary: the standby streams through a proxy that listens on an address of
// its own, whose upstream dials from that address too, so a grudge between the two
// nodes cuts the link as well.

// NetworkIsolated is the --network that puts every node of a topology in a network
// namespace of its own.
const NetworkIsolated = "isolated"

// isolated reports whether the run's servers each get a network of their own.
func (c Config) isolated() bool {
	return c.Network == NetworkIsolated || len(c.Faults.BetweenNodes()) > 0
}

// checkNetwork refuses, before anything launches, a network or a fault between nodes
// that this run cannot have: the error names the flag or the fault.
func checkNetwork(c Config) error {
	switch c.Network {
	case "", NetworkIsolated:
	default:
		return couldNotRun("--network %q: want isolated (each node in a network namespace of its own), or leave it out", c.Network)
	}
	if !c.isolated() {
		return nil
	}
	what := "--network isolated"
	if between := c.Faults.BetweenNodes(); len(between) > 0 {
		what = fmt.Sprintf("fault %q", between[0].Spec)
	}
	switch {
	case c.DSN != "":
		return couldNotRun("%s: the nodes are servers indoubt launches, each in a network namespace of its own; drop --dsn", what)
	case c.Store != Postgres && c.Store != Redis && c.Store != CQL && c.Store != Etcd && !(c.Store == MySQL && c.Topology == TopologyReplicated):
		return couldNotRun("%s: this build puts PostgreSQL, Redis, Cassandra and etcd topologies, and a Galera cluster (--store mysql --topology replicated), on nodes of their own, not %s", what, c.Store)
	case c.galera():
		// A proxy beside each node, whose upstream dials from that node's clients'
		// address (galera_proxy.go): partitions cut it as they cut the clients.
	case c.Proxy == "on" || len(c.Faults) > len(c.Faults.Processes())+len(c.Faults.BetweenNodes()):
		return couldNotRun("%s: the fault proxy would dial the servers from the harness's own address, which no partition cuts; use partitions, links and process faults, with --proxy auto or off", what)
	}
	for _, f := range c.Faults.BetweenNodes() {
		switch {
		case f.Shape != "" && c.Topology != TopologyReplicated && c.Topology != TopologyPatroni:
			return couldNotRun("fault %q: a partition between nodes needs several nodes: add --topology replicated", f.Spec)
		case f.Link != "" && c.Topology != TopologyReplicated:
			return couldNotRun("fault %q: link=replication is the path from n2 to n1 (a standby's, a replica's, a Cassandra node's internode connections) of --topology replicated", f.Spec)
		}
	}
	if err := netns.Available(); err != nil {
		return couldNotRun("%s: %v", what, err)
	}
	return nil
}

// topology is a launched topology on a network of its own.
type topology struct {
	net *netns.Network
	// nodes are the node names, in order; sides[i] the clients beside nodes[i].
	nodes []string
	sides []side
	// admin is the DSN of the harness's own reads (set-up, final reads).
	admin string
	// primary names the node that is primary now, by the topology's own account.
	primary func() string
	// roles asks each data node for its role (results.RolePrimary ...) and its own
	// word for it.
	roles func(ctx context.Context) map[string][2]string
	// signal names what roles asks (results.Leaders's signal); writes, when set, asks
	// each node's database whether it takes writes, recorded beside (roles.go).
	signal string
	writes func(ctx context.Context) map[string][2]string
	// link is the proxy on the replication path, when a link fault asks for one.
	link *faults.Proxy
	// linkEnds are the nodes the link joins: the standby and the primary.
	linkEnds [2]string
	// settle, when set, waits after the last heal until the topology serves again
	// (a Galera node back in the primary component), before the final reads.
	settle func(ctx context.Context) error
}

// side is the clients beside one node: the DSN they use and the address they dial from.
type side struct {
	node string
	dsn  string
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// serverNode is a netns node as a launcher takes it.
func serverNode(nw *netns.Network, n *netns.Node) *servers.Node {
	return &servers.Node{Name: n.Name, Netns: n.Netns(), IP: n.IP.String(), Subnet: nw.Subnet.String()}
}

// launchIsolated launches the topology of cfg on a network of its own. The returned
// server's stop stops the servers, then deletes the network.
func launchIsolated(ctx context.Context, cfg Config, dir string) (launched, error) {
	b, _ := lookupBackend(cfg.Store)
	top := cfg.Topology
	if top == "" {
		top = TopologySingle
	}
	iso, ok := b.isolated[top]
	if !ok {
		return launched{}, fmt.Errorf("%s: no %s topology on nodes of their own", cfg.Store, top)
	}
	nw, err := netns.New(iso.nodes)
	if err != nil {
		return launched{}, err
	}
	topo := &topology{net: nw, nodes: append([]string(nil), iso.nodes...)}
	l, err := iso.launch(topo, ctx, cfg, dir)
	if err != nil {
		if topo.link != nil {
			topo.link.Close()
		}
		return launched{}, errors.Join(err, nw.Close())
	}
	stop := l.stop
	l.stop = func() error {
		err := stop()
		if topo.link != nil {
			err = errors.Join(err, topo.link.Close())
		}
		return errors.Join(err, nw.Close())
	}
	l.topo = topo
	l.desc += fmt.Sprintf(", each node in a network namespace of its own on %s", nw.Subnet)
	return l, nil
}

// addSides makes one side per node, each with dsnFor its node's index.
func (t *topology) addSides(dsnFor func(i int) string) {
	for i, n := range t.net.Nodes {
		t.sides = append(t.sides, side{node: n.Name, dsn: dsnFor(i), dial: netns.DialFrom(n.Client)})
	}
}

func (t *topology) launchPostgres(ctx context.Context, cfg Config, dir string) (launched, error) {
	nw := t.net
	n1, n2 := nw.Nodes[0], nw.Nodes[1]
	opt := pgserver.ReplicatedOptions{
		Postgres:    pgserver.Options{LogPath: filepath.Join(dir, "postgres.log"), Version: cfg.PGVersion, Node: serverNode(nw, n1)},
		Replication: cfg.Replication, StandbyNode: serverNode(nw, n2),
	}
	if hasLink(cfg.Faults) {
		via, err := t.startLink(n2, n1, net.JoinHostPort(n1.IP.String(), strconv.Itoa(pgserver.NodePort)))
		if err != nil {
			return launched{}, err
		}
		opt.PrimaryVia = via
	}
	rp, err := pgserver.StartReplicated(ctx, opt)
	if err != nil {
		return launched{}, err
	}
	t.admin = rp.DSN
	t.addSides(func(int) string { return rp.DSN })
	t.primary = func() string {
		if rp.Promoted {
			return n2.Name
		}
		return n1.Name
	}
	t.roles = func(ctx context.Context) map[string][2]string {
		out := map[string][2]string{}
		for _, s := range []struct {
			node string
			srv  *pgserver.Server
		}{{n1.Name, rp.Primary}, {n2.Name, rp.Standby}} {
			r, err := s.srv.Role(ctx)
			switch {
			case err != nil:
				out[s.node] = [2]string{results.RoleDown, ""}
			case r == "primary":
				out[s.node] = [2]string{results.RolePrimary, r}
			default:
				out[s.node] = [2]string{results.RoleReplica, r}
			}
		}
		return out
	}
	desc := fmt.Sprintf("PostgreSQL %s primary on n1 (%s) with a %s streaming standby on n2 (%s)", rp.Primary.Version, rp.Primary.Addr, rp.Replication, rp.Standby.Addr)
	if opt.PrimaryVia != "" {
		desc += " through a link proxy at " + opt.PrimaryVia
	}
	return launched{dsn: rp.DSN, desc: desc, stop: rp.Stop, ctl: replicatedCtl{rp}}, nil
}

func (t *topology) launchPostgresSingle(ctx context.Context, cfg Config, dir string) (launched, error) {
	n1 := t.net.Nodes[0]
	pg, err := pgserver.Start(ctx, pgserver.Options{LogPath: filepath.Join(dir, "postgres.log"),
		Settings: cfg.pgDurability(), Version: cfg.PGVersion, Node: serverNode(t.net, n1)})
	if err != nil {
		return launched{}, err
	}
	t.admin = pg.DSN
	t.addSides(func(int) string { return pg.DSN })
	t.primary = func() string { return n1.Name }
	t.roles = func(ctx context.Context) map[string][2]string {
		if _, err := pg.Role(ctx); err != nil {
			return map[string][2]string{n1.Name: {results.RoleDown, ""}}
		}
		return map[string][2]string{n1.Name: {results.RolePrimary, "primary"}}
	}
	return launched{dsn: pg.DSN, desc: "PostgreSQL " + pg.Version + " on n1 (" + pg.Addr + ")" + cfg.durabilityDesc(), stop: pg.Stop, ctl: pg}, nil
}

func (t *topology) launchRedis(ctx context.Context, cfg Config, dir string) (launched, error) {
	nw := t.net
	var data, sent []*servers.Node
	for i, n := range nw.Nodes {
		if i < 3 {
			data = append(data, serverNode(nw, n))
		}
		sent = append(sent, serverNode(nw, n))
	}
	linkDesc := ""
	if hasLink(cfg.Faults) {
		// The replica on n2 replicates from n1 through the link proxy: its dial of
		// n1 is redirected there, so that it (and the Sentinel beside it, which
		// checks its primary's address) still names n1.
		via, err := t.redirectLink(redisserver.NodePort)
		if err != nil {
			return launched{}, err
		}
		linkDesc = ", n2's connections to n1 through a link proxy at " + via
	}
	rr, err := redisserver.StartReplicated(ctx, redisserver.ReplicatedOptions{
		Redis:    redisserver.Options{Persistence: cfg.Persistence, LogPath: filepath.Join(dir, "redis.log")},
		Replicas: 2, Sentinels: 5, Nodes: data, SentinelNodes: sent,
	})
	if err != nil {
		return launched{}, err
	}
	t.admin = rr.DSN
	// The clients beside a node ask its Sentinel first: on the minority side of a
	// partition, that one still names the old primary.
	t.addSides(rr.SentinelDSN)
	byAddr := map[string]string{}
	for i, s := range rr.Nodes {
		byAddr[s.Addr] = nw.Nodes[i].Name
	}
	t.primary = func() string { return byAddr[rr.Primary().Addr] }
	t.roles = func(ctx context.Context) map[string][2]string {
		out := map[string][2]string{}
		for i, s := range rr.Nodes {
			r, err := rr.Role(ctx, s)
			switch {
			case err != nil:
				out[nw.Nodes[i].Name] = [2]string{results.RoleDown, ""}
			case r == "master":
				out[nw.Nodes[i].Name] = [2]string{results.RolePrimary, r}
			default:
				out[nw.Nodes[i].Name] = [2]string{results.RoleReplica, r}
			}
		}
		return out
	}
	p := rr.Nodes[0]
	desc := fmt.Sprintf("Redis %s primary on n1 (%s) with replicas on n2 and n3 (persistence %s, asynchronous) and 5 Sentinels on n1 to n5 (quorum %d, down after %v, failover timeout %v)%s",
		p.Version, p.Addr, p.Persistence, rr.Quorum, rr.DownAfter, rr.FailoverTimeout, linkDesc)
	return launched{dsn: rr.DSN, desc: desc, stop: rr.Stop, ctl: rr}, nil
}

func (t *topology) launchRedisSingle(ctx context.Context, cfg Config, dir string) (launched, error) {
	n1 := t.net.Nodes[0]
	r, err := redisserver.Start(ctx, redisserver.Options{Persistence: cfg.Persistence, LogPath: filepath.Join(dir, "redis.log"), Node: serverNode(t.net, n1)})
	if err != nil {
		return launched{}, err
	}
	t.admin = r.DSN
	t.addSides(func(int) string { return r.DSN })
	t.primary = func() string { return n1.Name }
	t.roles = func(context.Context) map[string][2]string {
		return map[string][2]string{n1.Name: {results.RolePrimary, "master"}}
	}
	return launched{dsn: r.DSN, desc: fmt.Sprintf("Redis %s on n1 (%s), persistence %s", r.Version, r.Addr, r.Persistence), stop: r.Stop, ctl: r}, nil
}

// hasLink reports whether the schedule puts a toxic on a link.
func hasLink(s schedule.Schedule) bool {
	for _, f := range s {
		if f.Link != "" {
			return true
		}
	}
	return false
}

// redirectLink puts a link proxy on n2's path to port on n1: the link started, and
// n2's own dials of n1's address redirected to it in n2's namespace, so that n2 (and
// whatever checks the address it was told) still names n1. It returns the link's
// address.
func (t *topology) redirectLink(port int) (string, error) {
	n1, n2 := t.net.Nodes[0], t.net.Nodes[1]
	target := net.JoinHostPort(n1.IP.String(), strconv.Itoa(port))
	via, err := t.startLink(n2, n1, target)
	if err != nil {
		return "", err
	}
	if err := n2.Redirect(target, via); err != nil {
		return "", err
	}
	return via, nil
}

// startLink starts the link proxy from node from to the server at to on node toNode:
// toxiproxy listening on a harness address of the link's own, its upstream a relay
// that dials from that same address. It returns the address from dials instead of to.
func (t *topology) startLink(from, toNode *netns.Node, to string) (string, error) {
	ip, err := t.net.AddLink(from.Name, toNode.Name)
	if err != nil {
		return "", err
	}
	relay, err := t.net.Relay(ip, to)
	if err != nil {
		return "", err
	}
	px, err := faults.Start(faults.Options{Upstream: relay.Addr(), Listen: net.JoinHostPort(ip.String(), "0"), Name: "link", AllowRemote: true})
	if err != nil {
		return "", err
	}
	t.link, t.linkEnds = px, [2]string{from.Name, toNode.Name}
	return px.Addr(), nil
}

// sidedWorkload is a workload whose workers are spread over the sides, round robin:
// worker i dials as the clients beside node i mod len(sides). Everything else (set-up,
// final reads, the model) is the admin's, which no grudge cuts.
type sidedWorkload struct {
	workloads.Workload
	sides []workloads.Workload
}

func (s sidedWorkload) Worker(ctx context.Context, id int) (workloads.Worker, error) {
	return s.sides[id%len(s.sides)].Worker(ctx, id)
}

// openWorkload binds the workload: to dsn, or on a topology with a network of its own
// once for the admin and once per side.
func openWorkload(ctx context.Context, cfg Config, b backend, dsn string, topo *topology) (workloads.Workload, func(), error) {
	if topo == nil {
		return b.open(ctx, cfg, dsn)
	}
	if cfg.Store == CQL {
		cfg.ring = &cqlRing{}
	}
	admin := cfg
	admin.dial = netns.DialFrom(topo.net.Admin)
	wl, closeAdmin, err := b.open(ctx, admin, topo.admin)
	if err != nil {
		return nil, nil, err
	}
	closers := []func(){closeAdmin}
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	sided := sidedWorkload{Workload: wl}
	for _, s := range topo.sides {
		c := cfg
		c.dial = s.dial
		w, cl, err := b.open(ctx, c, s.dsn)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("clients beside %s: %w", s.node, err)
		}
		closers = append(closers, cl)
		if tw, ok := w.(*txn.Workload); ok {
			if aw, ok := wl.(*txn.Workload); ok {
				// One generator for every side: values unique across the run.
				tw.ShareGenerator(aw)
			}
		}
		sided.sides = append(sided.sides, w)
	}
	return sided, closeAll, nil
}

// nodeNemesis applies the partitions and link toxics of the schedule to a topology's
// network at their windows, and records the nodes' role reports, each as nemesis
// events.
type nodeNemesis struct {
	cfg   Config
	topo  *topology
	sched schedule.Schedule
	rng   *rand.Rand

	run    *run
	record func(histories.Op)
	cancel context.CancelFunc
	done   chan struct{}

	// applied is the partition in force (its index in sched), -1 for none.
	mu      sync.Mutex
	applied int
}

// rolePoll is how often the data nodes are asked for their role.
const rolePoll = 100 * time.Millisecond

func newNodeNemesis(cfg Config, topo *topology) *nodeNemesis {
	// A stream of the run's seed of its own: the same seed draws the same shapes.
	return &nodeNemesis{cfg: cfg, topo: topo, sched: cfg.Faults.BetweenNodes(), applied: -1,
		rng: netns.ShapeRand(cfg.Seed)}
}

func (n *nodeNemesis) begin(r *run, record func(histories.Op)) {
	ctx, cancel := context.WithCancel(context.Background())
	n.run, n.record, n.cancel, n.done = r, record, cancel, make(chan struct{})
	acts := n.sched.Actions(nil)
	// The first roles before the first operation: a split brain is read from changes.
	last := map[string]string{}
	n.pollRoles(ctx, last)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		t := time.NewTicker(rolePoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			n.pollRoles(ctx, last)
		}
	}()
	go func() {
		defer wg.Done()
		for _, a := range acts {
			if !sleep(ctx, time.Until(r.start.Add(a.At))) {
				return
			}
			n.apply(a.I, a.Open)
		}
	}()
	go func() { wg.Wait(); close(n.done) }()
}

// end heals what is still applied and stops the role reports; the workers have stopped.
func (n *nodeNemesis) end() {
	if n.cancel == nil {
		return
	}
	n.cancel()
	<-n.done
	n.cancel = nil
	n.mu.Lock()
	i := n.applied
	n.mu.Unlock()
	if i >= 0 {
		n.apply(i, false)
	}
	for i, f := range n.sched {
		if f.Link != "" && n.topo.link != nil {
			// Removing a toxic that is not there is no harm; the error says so only.
			_ = n.topo.link.RemoveToxic(linkToxicName(i, f))
		}
	}
	if n.topo.settle != nil {
		if err := n.topo.settle(context.Background()); err != nil {
			n.cfg.progressf("after the heal: %v", err)
		}
	}
	// A last look after the heal: the roles the final reads meet.
	n.pollRoles(context.Background(), nil)
}

// pollRoles records each node whose role differs from last (nil: every node), and
// updates last; then, where the topology has them, the roles by writes taken.
func (n *nodeNemesis) pollRoles(ctx context.Context, last map[string]string) {
	n.pollSignal(ctx, last, "", n.topo.roles, results.RoleEvent, n.topo.signal)
	n.pollSignal(ctx, last, "writes:", n.topo.writes, results.WriteRoleEvent, writesSignal)
}

// pollSignal asks roles and records each node's report (as function f) whose role
// differs from last[key+node], updating it.
func (n *nodeNemesis) pollSignal(ctx context.Context, last map[string]string, key string, roles func(context.Context) map[string][2]string, f, signal string) {
	if roles == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	got := roles(rctx)
	if ctx.Err() != nil {
		return
	}
	at := n.run.now()
	for _, node := range n.topo.nodes {
		r, ok := got[node]
		if !ok || last != nil && last[key+node] == r[0] {
			continue
		}
		if last != nil {
			last[key+node] = r[0]
		}
		v := rundir.RoleReport{Node: node, Role: r[0], Reported: r[1], Signal: signal}
		n.record(histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: f, Value: histories.Value(v)})
	}
}

func linkToxicName(i int, f schedule.Fault) string {
	return fmt.Sprintf("link_%d_%s", i, f.Toxic.Type)
}

// apply opens or closes fault i of the schedule and records it.
func (n *nodeNemesis) apply(i int, open bool) {
	f := n.sched[i]
	if f.Link != "" {
		n.applyLink(i, f, open)
		return
	}
	nw := n.topo.net
	v := rundir.PartitionStep{Fault: f.Spec, Shape: f.Shape}
	var g netns.Grudge
	if open {
		primary := n.topo.primary()
		var err error
		g, err = netns.MakeGrudge(f.Shape, f.Target, n.topo.nodes, primary, n.rng)
		if err != nil {
			// Refused before the run where the topology allows it: a shape that needs
			// a primary the topology cannot name now.
			v.Error = err.Error()
			n.cfg.progressf("fault %s: %v", f.Spec, err)
			return
		}
		v.Primary = primary
		v.Reach = g.Reach(n.topo.nodes)
		v.Components = g.Components(n.topo.nodes)
		nodes, clients := map[string]string{}, map[string]string{}
		for _, nd := range nw.Nodes {
			nodes[nd.Name], clients[nd.Name] = nd.IP.String(), nd.Client.String()
		}
		v.Nodes, v.Clients = nodes, clients
	}
	if g == nil {
		g = netns.Grudge{}
	}
	v.Grudge = g
	// The window recorded is one in which the grudge certainly held: a partition at the
	// time it was in force on every node, its heal at the time the lifting began.
	at := n.run.now()
	err := nw.Apply(g)
	if err != nil {
		v.Error = err.Error()
	}
	if open {
		at = n.run.now()
	}
	action := outages.HealAction
	if open {
		action = outages.PartitionAction
	}
	n.mu.Lock()
	if open {
		n.applied = i
	} else {
		n.applied = -1
	}
	n.mu.Unlock()
	n.record(histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: action, Value: histories.Value(v)})
	msg := fmt.Sprintf("fault %s: %s at %.2fs", f.Spec, action, time.Duration(at).Seconds())
	if open {
		b, _ := json.Marshal(g.Reach(n.topo.nodes))
		msg += fmt.Sprintf(" (primary %v), each node receives from %s", v.Primary, b)
	}
	if err != nil {
		msg += ": " + err.Error()
	}
	n.cfg.progressf("%s", msg)
}

// applyLink adds or removes a link toxic, recorded as a window of the fault.
//
// The window recorded is one in which the toxic certainly acted: its start at the time
// AddToxic returned (bytes read after it go through the toxic), its stop at the time
// the removal began. Removing a latency toxic releases what it holds at once, so a
// commit acknowledged as the removal runs may have waited less than the latency; it
// falls after the stop.
func (n *nodeNemesis) applyLink(i int, f schedule.Fault, open bool) {
	px := n.topo.link
	at := n.run.now()
	var err error
	switch {
	case px == nil:
		err = errors.New("no link proxy in this topology")
	case open:
		t := *f.Toxic
		t.Name = linkToxicName(i, f)
		err = px.AddToxic(t)
	default:
		err = px.RemoveToxic(linkToxicName(i, f))
	}
	fn := "stop"
	if open {
		fn = "start"
	}
	v := rundir.LinkStep{Fault: f.Spec, Link: f.Link, Between: n.topo.linkEnds}
	if err != nil {
		v.Error = err.Error()
	}
	if open {
		at = n.run.now()
	}
	n.record(histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: fn, Value: histories.Value(v)})
	n.cfg.progressf("fault %s: link %s %s at %.2fs", f.Spec, f.Link, fn, time.Duration(at).Seconds())
}

// account adds the partitions and split brains, read from the history as `indoubt
// check` reads them, and prints a line for each.
func (n *nodeNemesis) account(res *results.Results) {
	for _, p := range res.Partitions {
		n.cfg.progressf("%s", p)
	}
	for _, s := range res.SplitBrain {
		n.cfg.progressf("%s", s)
	}
}

// launchCassandra launches a Cassandra ring of one node per node of the network (three
// with --topology replicated), n1 its seed, every keyspace the workload makes of
// replication factor 3 (or the ring's size): the LWTs of the workloads run Paxos over
// a quorum of the replicas. A ring has no primary: isolate-primary isolates n1, and
// the nodes report no role (no split brain can be read).
func (t *topology) launchCassandra(ctx context.Context, cfg Config, dir string) (launched, error) {
	nw := t.net
	seed := nw.Nodes[0].IP.String()
	linkDesc := ""
	if hasLink(cfg.Faults) {
		// n2's internode connections to n1 (gossip, and the messages n2 sends it)
		// go through the link proxy, redirected in n2's namespace: n2 still names
		// n1, and what n1 sends n2 goes on n1's own connections, not through it.
		via, err := t.redirectLink(cassandra.NodeStoragePort)
		if err != nil {
			return launched{}, err
		}
		linkDesc = "; n2's internode connections to n1 through a link proxy at " + via
	}
	var nodes []*cassandra.Server
	stopAll := func() error {
		var errs []error
		for i := len(nodes) - 1; i >= 0; i-- {
			errs = append(errs, nodes[i].Stop())
		}
		return errors.Join(errs...)
	}
	start := func(i int) (*cassandra.Server, error) {
		n := nw.Nodes[i]
		opt := cassandra.Options{LogPath: filepath.Join(dir, "cassandra-"+n.Name+".log"), CommitLogSync: cfg.CommitLogSync,
			Node: serverNode(nw, n), Token: ringToken(i, len(nw.Nodes))}
		if i > 0 {
			opt.Seeds = []string{seed}
		}
		return cassandra.Start(ctx, opt)
	}
	first, err := start(0)
	if err != nil {
		return launched{}, err
	}
	nodes = append(nodes, first)
	// The others join the seed together: none bootstraps, the ring starts empty.
	rest := make([]*cassandra.Server, len(nw.Nodes)-1)
	errs := make([]error, len(rest))
	var wg sync.WaitGroup
	for i := range rest {
		wg.Add(1)
		go func() { defer wg.Done(); rest[i], errs[i] = start(i + 1) }()
	}
	wg.Wait()
	for i := range rest {
		if rest[i] != nil {
			nodes = append(nodes, rest[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return launched{}, errors.Join(err, stopAll())
	}
	if err := waitRing(ctx, nodes, netns.DialFrom(nw.Admin)); err != nil {
		return launched{}, errors.Join(err, stopAll())
	}
	rf := len(nodes)
	q := url.Values{"replication": {fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", rf)}, "timeout": {"10s"}}
	dsn := func(n *cassandra.Server) string { return "cql://" + n.Addr + "/indoubt?" + q.Encode() }
	t.admin = dsn(nodes[0])
	// The clients beside a node use it as their coordinator.
	t.addSides(func(i int) string { return dsn(nodes[i]) })
	t.primary = func() string { return nw.Nodes[0].Name }
	var rss int64
	for _, n := range nodes {
		b, err := n.RSS()
		if err != nil {
			return launched{}, errors.Join(err, stopAll())
		}
		rss += b
	}
	desc := fmt.Sprintf("Apache Cassandra %s ring of %d nodes on n1 to n%d (replication factor %d, seed n1; %d MiB resident at start%s)", first.Version, len(nodes), len(nodes), rf, rss>>20, linkDesc)
	return launched{dsn: t.admin, desc: desc, stop: stopAll, ctl: first}, nil
}

// waitRing waits until a write at consistency ALL, coordinated by each node in turn,
// succeeds on a keyspace replicated to every node: every node knows every other up
// (gossip has converged) and has the schema. At most three minutes (three JVMs
// starting together on a loaded machine pause for tens of seconds), each attempt at
// most 15 s (gocql would wait a minute for the schema to agree).
func waitRing(ctx context.Context, nodes []*cassandra.Server, dial func(context.Context, string, string) (net.Conn, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	rf := len(nodes)
	for i, n := range nodes {
		err := servers.Poll(ctx, 250*time.Millisecond, n.Exited(), func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			cl := gocql.NewCluster(n.Addr)
			cl.ProtoVersion, cl.DisableInitialHostLookup, cl.Dialer = 4, true, dialFunc(dial)
			cl.Timeout, cl.ConnectTimeout = 5*time.Second, 2*time.Second
			cl.MaxWaitSchemaAgreement = 10 * time.Second
			cl.Logger = log.New(io.Discard, "", 0)
			s, err := cl.CreateSession()
			if err != nil {
				return err
			}
			defer s.Close()
			for _, stmt := range []string{
				fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS indoubt_ring WITH replication = {'class': 'SimpleStrategy', 'replication_factor': %d}", rf),
				"CREATE TABLE IF NOT EXISTS indoubt_ring.probe (k int PRIMARY KEY, v int)",
			} {
				if err := s.Query(stmt).WithContext(ctx).Exec(); err != nil {
					return err
				}
			}
			return s.Query("INSERT INTO indoubt_ring.probe (k, v) VALUES (?, 1)", i).Consistency(gocql.All).WithContext(ctx).Exec()
		})
		if err != nil {
			return fmt.Errorf("cassandra ring: node %s: %w", n.Addr, err)
		}
	}
	return nil
}

// ringToken is the token of node i of a ring of n: the Murmur3 range cut in n equal
// arcs, so that with replication factor n every node holds every row all the same.
func ringToken(i, n int) string {
	arc := new(big.Int).Div(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(int64(n)))
	t := new(big.Int).Mul(arc, big.NewInt(int64(i)))
	return t.Add(t, new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 63))).String()
}

// dialFunc is a dial function as gocql's Dialer.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

func (f dialFunc) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}
