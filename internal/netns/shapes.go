package netns

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"sync"
)

// Grudge says, for each node, the nodes whose packets it drops (Jepsen's grudge). A
// node it does not name drops nothing. The clients beside a node and the links it
// dials are dropped with it (Network.Apply).
type Grudge map[string][]string

// The partition shapes (partition:SHAPE), after Jepsen's nemesis/combined.clj.
const (
	// IsolatePrimary cuts the primary off from every other node, both ways.
	IsolatePrimary = "isolate-primary"
	// Isolate cuts one named node off (isolate:NODE).
	Isolate = "isolate"
	// Halves splits the nodes, shuffled, into two halves (the smaller first).
	Halves = "halves"
	// Majority puts the primary in a minority (with others drawn to fill it) and the
	// rest in a majority: Jepsen's Redis partition {n1 n2} | {n3 n4 n5}.
	Majority = "majority"
	// MajoritiesRing arranges the nodes in a shuffled ring: each sees itself and its
	// neighbours, a majority, and no two see the same majority. At least 4 nodes.
	MajoritiesRing = "majorities-ring"
	// Bridge splits the nodes, shuffled, into two halves and one node between them
	// that sees both. At least 3 nodes.
	Bridge = "bridge"
	// OneWay makes every other node drop what the primary (or one-way:NODE) sends;
	// it still hears them.
	OneWay = "one-way"
)

// Shapes lists the shapes, for messages.
var Shapes = []string{IsolatePrimary, Isolate + ":NODE", Halves, Majority, MajoritiesRing, Bridge, OneWay}

// MakeGrudge draws the grudge of shape over nodes. target is the node of isolate and
// of one-way:NODE; primary is the node that is primary now (isolate-primary, majority,
// one-way without a node). rng draws the shuffles: the same seed gives the same
// grudge. A shape that needs more nodes, or a node that is not one, is an error.
func MakeGrudge(shape, target string, nodes []string, primary string, rng *rand.Rand) (Grudge, error) {
	n := len(nodes)
	need := func(min int) error {
		if n < min {
			return fmt.Errorf("partition %s needs at least %d nodes; the topology has %d", shape, min, n)
		}
		return nil
	}
	isNode := func(s, what string) error {
		if !slices.Contains(nodes, s) {
			if s == "" {
				return fmt.Errorf("partition %s: no %s", shape, what)
			}
			return fmt.Errorf("partition %s: %s %q is not a node (the nodes are %v)", shape, what, s, nodes)
		}
		return nil
	}
	shuffled := slices.Clone(nodes)
	rng.Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	switch shape {
	case IsolatePrimary:
		if err := isNode(primary, "primary"); err != nil {
			return nil, err
		}
		return Complete([]string{primary}, without(nodes, primary)), nil
	case Isolate:
		if err := isNode(target, "node"); err != nil {
			return nil, err
		}
		if err := need(2); err != nil {
			return nil, err
		}
		return Complete([]string{target}, without(nodes, target)), nil
	case Halves:
		if err := need(2); err != nil {
			return nil, err
		}
		return Complete(shuffled[:n/2], shuffled[n/2:]), nil
	case Majority:
		if err := need(3); err != nil {
			return nil, err
		}
		if err := isNode(primary, "primary"); err != nil {
			return nil, err
		}
		rest := without(shuffled, primary)
		k := (n - 1) / 2 // the minority's size
		return Complete(append([]string{primary}, rest[:k-1]...), rest[k-1:]), nil
	case MajoritiesRing:
		if err := need(4); err != nil {
			return nil, err
		}
		// A majority of n, centred on each node: itself and w on each side.
		w := (n/2 + 1) / 2
		g := Grudge{}
		for i, a := range shuffled {
			for j, b := range shuffled {
				d := (j - i + n) % n
				if d > w && d < n-w {
					g[a] = append(g[a], b)
				}
			}
		}
		return g, nil
	case Bridge:
		if err := need(3); err != nil {
			return nil, err
		}
		// shuffled[h] is the bridge: in neither half, it sees both and both see it.
		h := (n - 1) / 2
		return Complete(shuffled[:h], shuffled[h+1:]), nil
	case OneWay:
		from := target
		if from == "" {
			from = primary
		}
		if err := isNode(from, "node"); err != nil {
			return nil, err
		}
		if err := need(2); err != nil {
			return nil, err
		}
		g := Grudge{}
		for _, b := range without(nodes, from) {
			g[b] = []string{from}
		}
		return g, nil
	}
	return nil, fmt.Errorf("unknown partition shape %q (want one of %v)", shape, Shapes)
}

// Complete is the grudge of a partition into components: every node drops every node
// of the other components.
func Complete(components ...[]string) Grudge {
	g := Grudge{}
	for i, c := range components {
		for j, d := range components {
			if i == j {
				continue
			}
			for _, a := range c {
				g[a] = append(g[a], d...)
			}
		}
	}
	for a := range g {
		sort.Strings(g[a])
	}
	return g
}

func without(xs []string, x string) []string {
	var out []string
	for _, y := range xs {
		if y != x {
			out = append(out, y)
		}
	}
	return out
}

// Receives reports whether node a receives what node b sends under g.
func (g Grudge) Receives(a, b string) bool { return a == b || !slices.Contains(g[a], b) }

// Reach is the ground truth of g over nodes: for each node, the nodes it receives from
// (itself included), sorted.
func (g Grudge) Reach(nodes []string) map[string][]string {
	out := map[string][]string{}
	for _, a := range nodes {
		out[a] = []string{}
		for _, b := range nodes {
			if g.Receives(a, b) {
				out[a] = append(out[a], b)
			}
		}
		sort.Strings(out[a])
	}
	return out
}

// Components returns the groups of nodes that can all talk to each other both ways
// under g, when g splits the nodes that way (a partition into components), else nil
// (a bridge, a ring, a one-way grudge).
func (g Grudge) Components(nodes []string) [][]string {
	var comps [][]string
	placed := map[string]bool{}
	for _, a := range nodes {
		if placed[a] {
			continue
		}
		var c []string
		for _, b := range nodes {
			if g.Receives(a, b) && g.Receives(b, a) {
				c = append(c, b)
			}
		}
		for _, b := range c {
			for _, d := range nodes {
				inC := slices.Contains(c, d)
				if inC != (g.Receives(b, d) && g.Receives(d, b)) {
					return nil
				}
			}
			placed[b] = true
		}
		comps = append(comps, c)
	}
	return comps
}

// link is a path between two nodes through the harness (a link proxy): what its
// address stands for in a grudge.
type link struct {
	ip       net.IP
	from, to string // from dials to through the link
}

// AddLink takes a new harness address for a path from node from to node to through
// the harness (a proxy that from dials in place of to): a grudge that cuts from and to
// apart cuts that address too, on both nodes.
func (nw *Network) AddLink(from, to string) (net.IP, error) {
	if nw.Node(from) == nil || nw.Node(to) == nil {
		return nil, fmt.Errorf("netns: link %s to %s: not nodes of the network", from, to)
	}
	ip, err := nw.NewAddress()
	if err != nil {
		return nil, err
	}
	nw.mu.Lock()
	nw.links = append(nw.links, link{ip: ip, from: from, to: to})
	nw.mu.Unlock()
	return ip, nil
}

// Drops returns the addresses node a drops under g: those of the nodes it has a
// grudge against, of the clients beside them, and of the links between it and them.
func (nw *Network) Drops(g Grudge, a string) []net.IP {
	var out []net.IP
	for _, b := range g[a] {
		if n := nw.Node(b); n != nil && b != a {
			out = append(out, n.IP, n.Client)
		}
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, l := range nw.links {
		if (l.to == a && !g.Receives(a, l.from)) || (l.from == a && !g.Receives(a, l.to)) {
			out = append(out, l.ip)
		}
	}
	return out
}

// Apply makes g the network's grudge on every node at once (nil heals them all) and
// returns when every node has it. A node that could not take it is named in the error;
// the others have it.
func (nw *Network) Apply(g Grudge) error {
	var wg sync.WaitGroup
	errs := make([]error, len(nw.Nodes))
	for i, n := range nw.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.SetGrudge(nw.Drops(g, n.Name))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ShapeRand is the random source the shapes of a run are drawn from, derived from the
// run's seed: a run on this machine and the Chaos Mesh objects made for the same
// schedule and seed draw the same grudges, partition after partition.
func ShapeRand(seed int64) *rand.Rand { return rand.New(rand.NewPCG(uint64(seed), 0x9a27_1710)) }
