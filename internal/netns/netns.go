// Package netns gives the nodes of a launched topology a network of their own, so that
// a partition can be made between them: each node is a network namespace with one
// address on a bridge that has no uplink, and the harness (the root namespace, where
// indoubt runs) reaches every node through one more veth on that bridge.
//
// Layout of one Network (198.18.N.0/24, a /24 of the benchmarking range 198.18.0.0/15
// that no address of this machine uses; N is chosen under a lock file so that two runs
// never share one):
//
//	root namespace   idbPID-K  198.18.N.1 (the harness: launches, probes, role
//	                            reports; never partitioned, like Jepsen's control node)
//	                           198.18.N.101... (the clients beside node 1, 2 ...)
//	                           198.18.N.200... (the link proxies, one each: Link)
//	hub namespace    br0, a bridge with a port for the root veth and one per node
//	node namespaces  eth0 198.18.N.11, .12 ... and lo; no default route
//
// No namespace has a route off its /24, and no interface of the bridge leads off the
// machine, so no packet of a node can leave it. The harness's clients of one side dial
// from that side's address (DialFrom), so a node's grudge, an nftables set of source
// addresses it drops (SetGrudge), partitions them with the node they stand beside.
//
// Everything a Network makes lives in its namespaces (the root veth is the peer of a
// port in the hub and goes with it), and each namespace is named for the process that
// made it, with that process's start time: indoubt-PID-START-K-NODE. Close deletes
// them; after a SIGKILL, FindLeftovers finds them for `indoubt clean` (and New removes
// them, as every launch removes what killed harnesses left).
//
// It needs root and Debian's nftables (nft); Available says in one line what is
// missing.
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace a Network makes, and linkPrefix the name
// of its root veth.
const (
	Prefix     = "indoubt-"
	linkPrefix = "idb"
)

// namedDir is where named network namespaces are bind-mounted (as ip netns does).
const namedDir = "/run/netns"

// lockPath serializes the choice of a subnet between processes.
const lockPath = "/run/lock/indoubt-netns.lock"

// Address plan inside the /24.
const (
	adminHost  = 1
	nodeBase   = 10  // node i (from 1) is .10+i
	clientBase = 100 // the clients beside node i are .100+i
	linkBase   = 200 // link addresses from .200
	maxNodes   = 50
)

// Available returns nil when this process can make a Network, else an error of one
// line saying what is missing: root (network namespaces and nftables need it) or the
// nft program (Debian package nftables; INDOUBT_NFT names another path).
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root: run indoubt as root, or drop --network isolated and the partitions between nodes")
	}
	if _, err := nftPath(); err != nil {
		return err
	}
	return nil
}

// nftPath finds nft: INDOUBT_NFT if set (and nothing else then), else PATH, else
// /usr/sbin/nft, which a sparse PATH may lack.
func nftPath() (string, error) {
	if p := os.Getenv("INDOUBT_NFT"); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("nft not found at INDOUBT_NFT=%s (install Debian package nftables, or fix INDOUBT_NFT)", p)
		}
		return p, nil
	}
	if p, err := exec.LookPath("nft"); err == nil {
		return p, nil
	}
	if fi, err := os.Stat("/usr/sbin/nft"); err == nil && !fi.IsDir() {
		return "/usr/sbin/nft", nil
	}
	return "", errors.New("nft not found: partitions between nodes are nftables rules (install Debian package nftables)")
}

// Network is the network of one topology: its nodes, the harness's addresses on it,
// and the namespaces that hold them. Its methods are safe for concurrent use.
type Network struct {
	// Subnet is the network's /24.
	Subnet *net.IPNet
	// Admin is the harness's own address: what launches, probes and the role reports
	// dial from. No grudge names it.
	Admin net.IP
	// Nodes are the nodes in the order New was given their names.
	Nodes []*Node

	id       string // indoubt-PID-START-K
	rootLink string
	nft      string
	hub      vnetns.NsHandle
	root     vnetns.NsHandle

	mu        sync.Mutex
	nextLink  int
	closed    bool
	closeErr  error
	relays    []*Relay
	links     []link
	hubHandle *netlink.Handle
}

// Node is one node of a Network: a namespace with one address.
type Node struct {
	// Name is the node's name in the topology, as New was given it ("n1").
	Name string
	// IP is the node's address: its servers listen there.
	IP net.IP
	// Client is the address the harness's clients beside this node dial from
	// (DialFrom): a grudge against the node is a grudge against them.
	Client net.IP

	nsName string
	ns     vnetns.NsHandle
	net    *Network
}

// Netns is the path of the node's namespace, /run/netns/NAME, which a process is put
// in by setns(2) on a file opened there (servers.Node).
func (n *Node) Netns() string { return filepath.Join(namedDir, n.nsName) }

// networks counts the Networks this process made: K in their names.
var networks atomic.Int64

// New makes a Network with one node per name (at most 50, each a short name of
// letters and digits). It first removes the namespaces that killed processes left
// (FindLeftovers). On error nothing it made is left.
func New(names []string) (*Network, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if len(names) == 0 || len(names) > maxNodes {
		return nil, fmt.Errorf("netns: %d nodes: want 1 to %d", len(names), maxNodes)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if !validName(n) || seen[n] || n == "hub" {
			return nil, fmt.Errorf("netns: node name %q: want a unique short name of letters and digits", n)
		}
		seen[n] = true
	}
	nft, _ := nftPath()
	if left, err := FindLeftovers(); err == nil {
		for _, l := range left {
			_ = l.Remove()
		}
	}
	start, err := processStart(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	k := networks.Add(1)
	nw := &Network{
		id:       fmt.Sprintf("%s%d-%d-%d", Prefix, os.Getpid(), start, k),
		rootLink: fmt.Sprintf("%s%d-%d", linkPrefix, os.Getpid(), k),
		nft:      nft,
		hub:      vnetns.None(),
		root:     vnetns.None(),
	}
	if len(nw.rootLink) > 15 {
		return nil, fmt.Errorf("netns: interface name %s is too long", nw.rootLink)
	}
	if err := nw.build(names); err != nil {
		return nil, errors.Join(err, nw.Close())
	}
	return nw, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 12 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// build makes the hub, the root veth with the harness's addresses (under the lock
// that picks the subnet), and the nodes.
func (nw *Network) build(names []string) error {
	var err error
	if nw.root, err = vnetns.GetFromPath("/proc/self/ns/net"); err != nil {
		return fmt.Errorf("netns: the root namespace: %w", err)
	}
	if nw.hub, err = newNamed(nw.id + "-hub"); err != nil {
		return err
	}
	if nw.hubHandle, err = netlink.NewHandleAt(nw.hub); err != nil {
		return fmt.Errorf("netns: netlink in the hub: %w", err)
	}
	hub := nw.hubHandle
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}}
	if err := hub.LinkAdd(br); err != nil {
		return fmt.Errorf("netns: bridge: %w", err)
	}
	if err := hub.LinkSetUp(br); err != nil {
		return fmt.Errorf("netns: bridge up: %w", err)
	}
	// The harness's end is made from the hub, its peer straight in the root namespace:
	// one call, so no half-made pair is ever left in the root namespace.
	if err := nw.addPort(hub, br, "root", nw.rootLink, nw.root); err != nil {
		return err
	}
	if err := nw.addressRoot(len(names)); err != nil {
		return err
	}
	for i, name := range names {
		n := &Node{Name: name, net: nw, nsName: nw.id + "-" + name, ns: vnetns.None()}
		n.IP = nw.host(nodeBase + i + 1)
		n.Client = nw.host(clientBase + i + 1)
		nw.Nodes = append(nw.Nodes, n)
		if err := nw.addNode(hub, br, n); err != nil {
			return err
		}
	}
	return nil
}

// host returns the address .h of the subnet.
func (nw *Network) host(h int) net.IP {
	ip := make(net.IP, 4)
	copy(ip, nw.Subnet.IP.To4())
	ip[3] = byte(h)
	return ip
}

// addPort adds a veth pair to the hub's bridge: port in the hub, peer (named peer)
// in namespace ns.
func (nw *Network) addPort(hub *netlink.Handle, br *netlink.Bridge, port, peer string, ns vnetns.NsHandle) error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: port, MasterIndex: br.Attrs().Index}, PeerName: peer, PeerNamespace: netlink.NsFd(int(ns))}
	if err := hub.LinkAdd(v); err != nil {
		return fmt.Errorf("netns: veth %s-%s: %w", port, peer, err)
	}
	if err := hub.LinkSetUp(v); err != nil {
		return fmt.Errorf("netns: veth %s up: %w", port, err)
	}
	return nil
}

// addressRoot picks a free /24 under the lock and gives the root veth the harness's
// addresses: the admin's and one client address per node. Holding the lock until
// the admin address is on the link is what keeps two runs off one subnet.
func (nw *Network) addressRoot(nodes int) error {
	unlock, err := lockFile(lockPath)
	if err != nil {
		return err
	}
	defer unlock()
	root, err := netlink.NewHandleAt(nw.root)
	if err != nil {
		return fmt.Errorf("netns: netlink in the root namespace: %w", err)
	}
	defer root.Close()
	used := map[byte]bool{}
	addrs, err := root.AddrList(nil, netlink.FAMILY_V4)
	if err != nil {
		return fmt.Errorf("netns: addresses: %w", err)
	}
	for _, a := range addrs {
		if ip := a.IP.To4(); ip != nil && ip[0] == 198 && ip[1] == 18 {
			used[ip[2]] = true
		}
	}
	routes, _ := root.RouteList(nil, netlink.FAMILY_V4)
	for _, r := range routes {
		if r.Dst != nil {
			if ip := r.Dst.IP.To4(); ip != nil && ip[0] == 198 && ip[1]&0xfe == 18 {
				// A route into the benchmarking range that is not ours: keep away from all of it.
				used[ip[2]] = true
			}
		}
	}
	n := -1
	for c := 0; c < 256; c++ {
		if !used[byte(c)] {
			n = c
			break
		}
	}
	if n < 0 {
		return errors.New("netns: every /24 of 198.18.0.0/16 is in use")
	}
	nw.Subnet = &net.IPNet{IP: net.IPv4(198, 18, byte(n), 0).To4(), Mask: net.CIDRMask(24, 32)}
	nw.Admin = nw.host(adminHost)
	link, err := root.LinkByName(nw.rootLink)
	if err != nil {
		return fmt.Errorf("netns: %s: %w", nw.rootLink, err)
	}
	hosts := []int{adminHost}
	for i := 1; i <= nodes; i++ {
		hosts = append(hosts, clientBase+i)
	}
	for _, h := range hosts {
		if err := root.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: nw.host(h), Mask: nw.Subnet.Mask}}); err != nil {
			return fmt.Errorf("netns: address %v on %s: %w", nw.host(h), nw.rootLink, err)
		}
	}
	if err := root.LinkSetUp(link); err != nil {
		return fmt.Errorf("netns: %s up: %w", nw.rootLink, err)
	}
	return nil
}

// addNode makes n's namespace, its port on the bridge, its address, and its empty
// grudge.
func (nw *Network) addNode(hub *netlink.Handle, br *netlink.Bridge, n *Node) error {
	var err error
	if n.ns, err = newNamed(n.nsName); err != nil {
		return err
	}
	if err := nw.addPort(hub, br, n.Name, "eth0", n.ns); err != nil {
		return err
	}
	h, err := netlink.NewHandleAt(n.ns)
	if err != nil {
		return fmt.Errorf("netns: netlink in %s: %w", n.Name, err)
	}
	defer h.Close()
	for _, name := range []string{"lo", "eth0"} {
		l, err := h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("netns: %s in %s: %w", name, n.Name, err)
		}
		if name == "eth0" {
			if err := h.AddrAdd(l, &netlink.Addr{IPNet: &net.IPNet{IP: n.IP, Mask: nw.Subnet.Mask}}); err != nil {
				return fmt.Errorf("netns: address of %s: %w", n.Name, err)
			}
		}
		if err := h.LinkSetUp(l); err != nil {
			return fmt.Errorf("netns: %s up in %s: %w", name, n.Name, err)
		}
	}
	return n.nftables(grudgeTable)
}

// newNamed makes a named network namespace, leaving the calling thread where it was.
func newNamed(name string) (vnetns.NsHandle, error) {
	var h vnetns.NsHandle
	err := onThreadIn(vnetns.None(), func() error {
		var err error
		h, err = vnetns.NewNamed(name)
		return err
	})
	if err != nil {
		return vnetns.None(), fmt.Errorf("netns: namespace %s: %w", name, err)
	}
	return h, nil
}

// onThreadIn runs f on a locked OS thread in namespace ns (None: the thread's own,
// for f that moves it), and puts the thread back where it was. A thread that cannot
// be put back stays locked, so Go ends it with the goroutine instead of reusing it.
func onThreadIn(ns vnetns.NsHandle, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if ns.IsOpen() {
			if err := vnetns.Set(ns); err != nil {
				errc <- err
				runtime.UnlockOSThread()
				return
			}
		}
		err = f()
		if vnetns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// Command starts cmd in n's namespace and returns once it started; the caller waits
// for it. Short programs (nft) are run this way; a server is put in the namespace by
// its launcher (servers.Node), which forks from a thread of its own.
func (n *Node) start(cmd *exec.Cmd) error {
	return onThreadIn(n.ns, cmd.Start)
}

// Close deletes the network: every node's namespace (with its grudge and its end of
// the veth) and the hub (with the bridge and the root veth), after closing the
// relays. The servers on the nodes must be stopped first. Close may be called more than
// once; every call returns the first one's result.
func (nw *Network) Close() error {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		return nw.closeErr
	}
	nw.closed = true
	var errs []error
	for _, r := range nw.relays {
		errs = append(errs, r.Close())
	}
	if nw.hubHandle != nil {
		nw.hubHandle.Close()
	}
	for _, n := range nw.Nodes {
		if n.ns.IsOpen() {
			n.ns.Close()
		}
		errs = append(errs, deleteNamed(n.nsName))
	}
	if nw.hub.IsOpen() {
		nw.hub.Close()
		errs = append(errs, deleteNamed(nw.id+"-hub"))
	}
	if nw.root.IsOpen() {
		nw.root.Close()
	}
	nw.closeErr = errors.Join(errs...)
	return nw.closeErr
}

// deleteNamed removes a named namespace; one that is not there is no error.
func deleteNamed(name string) error {
	if _, err := os.Lstat(filepath.Join(namedDir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := vnetns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: delete namespace %s: %w", name, err)
	}
	return nil
}

// Node returns the node named name, or nil.
func (nw *Network) Node(name string) *Node {
	for _, n := range nw.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// NewAddress adds another address of the harness to the network (for a link proxy:
// Link) and returns it.
func (nw *Network) NewAddress() (net.IP, error) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.closed {
		return nil, errors.New("netns: network closed")
	}
	if linkBase+nw.nextLink > 254 {
		return nil, errors.New("netns: no address left for another link")
	}
	ip := nw.host(linkBase + nw.nextLink)
	root, err := netlink.NewHandleAt(nw.root)
	if err != nil {
		return nil, fmt.Errorf("netns: netlink in the root namespace: %w", err)
	}
	defer root.Close()
	link, err := root.LinkByName(nw.rootLink)
	if err != nil {
		return nil, fmt.Errorf("netns: %s: %w", nw.rootLink, err)
	}
	if err := root.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: nw.Subnet.Mask}}); err != nil {
		return nil, fmt.Errorf("netns: address %v: %w", ip, err)
	}
	nw.nextLink++
	return ip, nil
}

// Names lists the names of the namespaces of the network, hub included: what Close
// deletes.
func (nw *Network) Names() []string {
	out := []string{nw.id + "-hub"}
	for _, n := range nw.Nodes {
		out = append(out, n.nsName)
	}
	return out
}

// RootLink is the name of the harness's veth in the root namespace.
func (nw *Network) RootLink() string { return nw.rootLink }

// lockFile takes an exclusive flock on path, creating it, and returns its release.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("netns: lock: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("netns: lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("netns: lock %s: %w", path, err)
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// processStart returns the start time of process pid (field 22 of /proc/PID/stat,
// clock ticks after boot): with the pid it names one process for good.
func processStart(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	if f[0] == "Z" || f[0] == "X" {
		return 0, syscall.ESRCH
	}
	return strconv.ParseUint(f[19], 10, 64)
}
