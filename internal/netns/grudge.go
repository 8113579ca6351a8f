package netns

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

// grudgeTable is the ruleset every node starts with: an empty set of source addresses
// whose packets its input hook drops. A grudge changes the set's elements only, in one
// nft transaction, so a change is atomic on each node. As in Jepsen's net.clj, only
// what a node receives is dropped: a partition both ways is two grudges, one on each
// side, and a one-way partition one.
const grudgeTable = `table inet indoubt {
	set grudge {
		type ipv4_addr
	}
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr @grudge drop
	}
}
`

// nftables runs nft -f - with ruleset in the node's namespace.
func (n *Node) nftables(ruleset string) error {
	var out bytes.Buffer
	cmd := exec.Command(n.net.nft, "-f", "-")
	cmd.Stdin = strings.NewReader(ruleset)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := n.start(cmd); err != nil {
		return fmt.Errorf("netns: nft in %s: %w", n.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("netns: nft in %s: %v: %s", n.Name, err, strings.TrimSpace(out.String()))
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("netns: nft in %s: no answer in 30s", n.Name)
	}
	return nil
}

// SetGrudge makes the node drop every packet from the addresses in from, and from no
// other: nil heals it. It replaces the node's earlier grudge in one transaction.
func (n *Node) SetGrudge(from []net.IP) error {
	var b strings.Builder
	b.WriteString("flush set inet indoubt grudge\n")
	if len(from) > 0 {
		var ips []string
		for _, ip := range from {
			ips = append(ips, ip.String())
		}
		slices.Sort(ips)
		ips = slices.Compact(ips)
		fmt.Fprintf(&b, "add element inet indoubt grudge { %s }\n", strings.Join(ips, ", "))
	}
	return n.nftables(b.String())
}

// Grudge reads back the addresses the node drops, as nft lists them: what a test
// asserts against.
func (n *Node) Grudge() ([]string, error) {
	var out bytes.Buffer
	cmd := exec.Command(n.net.nft, "list", "set", "inet", "indoubt", "grudge")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := n.start(cmd); err != nil {
		return nil, fmt.Errorf("netns: nft in %s: %w", n.Name, err)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("netns: nft in %s: %v: %s", n.Name, err, strings.TrimSpace(out.String()))
	}
	s := out.String()
	i := strings.Index(s, "elements = {")
	if i < 0 {
		return nil, nil
	}
	s = s[i+len("elements = {"):]
	s, _, _ = strings.Cut(s, "}")
	var ips []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		ips = append(ips, f)
	}
	slices.Sort(ips)
	return ips, nil
}

// Redirect makes the connections the node's own processes open to address to
// (host:port) go to via instead, by destination NAT in its namespace's output hook:
// the processes keep the address they were told (a replica still names its primary,
// and a Sentinel that checks it finds it right), while the harness stands on the path
// (a link proxy listening at via). Connections made before the call are not moved,
// so it must come before the node's server dials to. It adds to the node's rules and
// goes with its namespace.
func (n *Node) Redirect(to, via string) error {
	host, port, err := net.SplitHostPort(to)
	if err != nil {
		return fmt.Errorf("netns: redirect %q: %w", to, err)
	}
	vhost, vport, err := net.SplitHostPort(via)
	if err != nil {
		return fmt.Errorf("netns: redirect to %q: %w", via, err)
	}
	tip, vip := net.ParseIP(host).To4(), net.ParseIP(vhost).To4()
	if tip == nil || vip == nil {
		return fmt.Errorf("netns: redirect %s to %s: IPv4 addresses only", to, via)
	}
	tp, err1 := strconv.Atoi(port)
	vp, err2 := strconv.Atoi(vport)
	if err1 != nil || err2 != nil || tp <= 0 || tp > 65535 || vp <= 0 || vp > 65535 {
		return fmt.Errorf("netns: redirect %s to %s: bad port", to, via)
	}
	return n.nftables(fmt.Sprintf(`table ip indoubt_link {
	chain output {
		type nat hook output priority -100; policy accept;
		ip daddr %s tcp dport %d dnat to %s:%d
	}
}
`, tip, tp, vip, vp))
}
