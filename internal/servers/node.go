package servers

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
)

// Node places a launched server on a node of a topology with a network of its own
// (internal/netns): its processes run in the node's network namespace, it listens on
// the node's address at its server kind's usual port (every node has its own ports),
// and it lets in clients and peers from the node's subnet. A launcher's Options take
// one as Node; nil keeps the server on 127.0.0.1 of the caller's namespace, on a free
// port.
type Node struct {
	// Name is the node's name in the topology ("n1"), for descriptions.
	Name string
	// Netns is the path of the node's network namespace, /run/netns/NAME.
	Netns string
	// IP is the node's address in it.
	IP string
	// Subnet is the network of the node's peers and clients, in CIDR form
	// ("198.18.3.0/24"): PostgreSQL's pg_hba.conf lets it in.
	Subnet string
}

// Addr returns the node's address with port, host:port.
func (n *Node) Addr(port int) string { return net.JoinHostPort(n.IP, strconv.Itoa(port)) }

// Check refuses a Node that names no namespace or no address.
func (n *Node) Check() error {
	if n.Netns == "" || net.ParseIP(n.IP) == nil {
		return fmt.Errorf("node %s: want a namespace path and an IP address, got %q and %q", n.Name, n.Netns, n.IP)
	}
	if _, _, err := net.ParseCIDR(n.Subnet); err != nil {
		return fmt.Errorf("node %s: subnet %q: %w", n.Name, n.Subnet, err)
	}
	return nil
}

// ListenHost returns the address a server on node listens on: the node's, or 127.0.0.1
// when node is nil.
func ListenHost(node *Node) string {
	if node != nil {
		return node.IP
	}
	return "127.0.0.1"
}

// ListenPorts returns the host and the ports a server on node listens on: on a node,
// its address and nodePorts (every node has its own ports); when node is nil,
// 127.0.0.1 and a free port (FreePort) for each of nodePorts.
func ListenPorts(node *Node, nodePorts ...int) (string, []int, error) {
	if node != nil {
		return node.IP, nodePorts, nil
	}
	ports := make([]int, len(nodePorts))
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return "", nil, err
		}
		ports[i] = p
	}
	return "127.0.0.1", ports, nil
}

// MemberLogPath returns where member i of a cluster, named name, logs: in its directory
// dir as file when path is empty; else at path for the first member and path.NAME for
// the others.
func MemberLogPath(path string, i int, name, dir, file string) string {
	switch {
	case path == "":
		return filepath.Join(dir, file)
	case i > 0:
		return path + "." + name
	}
	return path
}
