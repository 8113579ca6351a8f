package runner

import (
	"fmt"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/workloads"
)

// galera reports whether the run is on a Galera cluster (--store mysql --topology
// replicated), whose nodes each have a network of their own.
func (c Config) galera() bool { return c.Store == MySQL && c.Topology == TopologyReplicated }

// checkGalera refuses what a Galera cluster cannot run: the insert workload, whose
// clients beside each node would draw the same client-side keys (each node's clients
// have a workload of their own) and whose MariaDB sequences are a node's own.
func checkGalera(c Config) error {
	if c.Workload == workloads.Insert {
		return refuse("Workload", "insert on a Galera cluster: each node's clients would choose the same keys; run it on one MariaDB (leave {Topology} out)")
	}
	return nil
}

// proxySides puts a commit-aware proxy in front of each node of a topology, for the
// clients beside that node: the proxy listens on loopback, and its upstream is a relay
// that dials the node from the address of the clients beside it (netns.Relay), so a
// grudge against the node cuts the proxy's connections as it cuts the clients'. Each
// proxy reads its own connections' replies (a commit's proof, the OK packet's affected
// rows, is per node) and follows the one schedule; the clients of side i dial proxy i.
// The harness's own reads (set-up, final reads) go to the nodes directly.
func (n *nemesis) proxySides(cfg Config, b backend, topo *topology, match func(string) bool) error {
	for i := range topo.sides {
		s := &topo.sides[i]
		node := topo.net.Node(s.node)
		if node == nil {
			return fmt.Errorf("proxy beside %s: no such node", s.node)
		}
		upstream, err := b.addr(s.dsn)
		if err != nil {
			return err
		}
		relay, err := topo.net.Relay(node.Client, upstream)
		if err != nil {
			return fmt.Errorf("proxy beside %s: %w", s.node, err)
		}
		px, err := faults.Start(faults.Options{Upstream: relay.Addr(), Protocol: b.protocol, Seed: cfg.Seed + int64(i),
			Events: n.onEvent, Match: match, Name: "indoubt-" + s.node})
		if err != nil {
			return fmt.Errorf("proxy beside %s: %w", s.node, err)
		}
		n.pxs = append(n.pxs, px)
		dsn, err := b.rewrite(s.dsn, px.Addr())
		if err != nil {
			return err
		}
		// The clients reach the proxy on loopback; the relay behind it dials from
		// their address on the network.
		s.dsn, s.dial = dsn, nil
		cfg.progressf("fault proxy beside %s: %s -> %s from %s, schedule: %v", s.node, px.Addr(), upstream, node.Client, specs(cfg.Faults))
	}
	return nil
}
