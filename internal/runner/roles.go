package runner

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/indoubt/indoubt/internal/results"
	etcdserver "github.com/indoubt/indoubt/internal/servers/etcd"
	"github.com/indoubt/indoubt/internal/servers/patroni"
)

// Role reports of clusters launched on loopback. A cluster that elects its own leader
// (etcd's members, Patroni's nodes) is asked for its members' roles every rolePoll
// whether or not its nodes have a network of their own, and each change is recorded
// as a role report (results.RoleEvent) just as on a topology of its own
// (partitions.go): results.json's leaders, split_brain and the seconds without a
// leader come from them, and `indoubt check` reads them back from the history.

// roleSource asks the members of a cluster launched on loopback for their roles.
type roleSource struct {
	// nodes are the members' names, in order.
	nodes []string
	// poll asks each member for its role (results.RolePrimary ...) and its own word
	// for it; a member that does not answer is results.RoleDown.
	poll func(ctx context.Context) map[string][2]string
	// signal names what poll asks (results.Leaders's signal).
	signal string
	// writes, when set, asks each member's database whether it takes writes, on a
	// connection of the harness's own (Patroni's nodes); closeWrites closes those.
	writes      func(ctx context.Context) map[string][2]string
	closeWrites func()
}

// Signals the role reports name.
const (
	etcdSignal    = "etcd Status: a member leads when the leader its status names is itself"
	patroniSignal = "Patroni REST API /patroni: role master or primary"
	// writesSignal is the signal of the WriteRoleEvents.
	writesSignal = "SELECT pg_is_in_recovery() on the node's PostgreSQL: false (takes writes) is primary"
)

// stopWith returns stop followed by the closing of the writes connections.
func (s *roleSource) stopWith(stop func() error) func() error {
	if s.closeWrites == nil {
		return stop
	}
	return func() error {
		s.closeWrites()
		return stop()
	}
}

// onTopology gives a topology of its own the source's roles, signal and writes.
func (s *roleSource) onTopology(t *topology) {
	t.roles, t.signal, t.writes = s.poll, s.signal, s.writes
}

// roleTopology is the topology a nodeNemesis polls for a cluster on loopback: no
// network, so no partition or link (those make a run isolated), the roles only.
func (s *roleSource) roleTopology() *topology {
	t := &topology{nodes: s.nodes}
	s.onTopology(t)
	return t
}

// etcdRoles asks every member of c for its status at once: the leader is the member
// whose own ID is the leader its status names (each member's own account), a member
// that does not answer is down.
func etcdRoles(c *etcdserver.Cluster) *roleSource {
	s := &roleSource{signal: etcdSignal}
	for _, m := range c.Members {
		s.nodes = append(s.nodes, m.Name)
	}
	s.poll = func(ctx context.Context) map[string][2]string {
		leader, errs := c.Roles(ctx)
		out := map[string][2]string{}
		for i, m := range c.Members {
			switch {
			case errs[i] != nil:
				out[m.Name] = [2]string{results.RoleDown, ""}
			case leader[i]:
				out[m.Name] = [2]string{results.RolePrimary, "leader"}
			default:
				out[m.Name] = [2]string{results.RoleReplica, "follower"}
			}
		}
		return out
	}
	return s
}

// patroniRoles asks every node's Patroni (its REST API, /patroni) for its role: master
// or primary is the leader, a node whose Patroni does not answer is down. Beside it,
// each node's PostgreSQL is asked pg_is_in_recovery() on a connection of the
// harness's own (opened again after it broke): Patroni's word and what the database
// does differ while a leader cut off from the DCS demotes itself (its REST API still
// says master while its PostgreSQL stops and comes back in recovery).
func patroniRoles(c *patroni.Cluster) *roleSource {
	s := &roleSource{signal: patroniSignal}
	s.writes, s.closeWrites = patroniWrites(c)
	for _, m := range c.Members {
		s.nodes = append(s.nodes, m.Name)
	}
	s.poll = func(ctx context.Context) map[string][2]string {
		out := map[string][2]string{}
		for _, m := range c.Members {
			role, _, err := m.Role(ctx)
			switch {
			case err != nil:
				out[m.Name] = [2]string{results.RoleDown, ""}
			case role == "master" || role == "primary":
				out[m.Name] = [2]string{results.RolePrimary, role}
			default:
				out[m.Name] = [2]string{results.RoleReplica, role}
			}
		}
		return out
	}
	return s
}

// patroniWrites asks each node's PostgreSQL whether it is in recovery, each on one
// connection the harness keeps (a node that does not answer is down, and its
// connection is opened again at the next poll), asking the nodes at once.
func patroniWrites(c *patroni.Cluster) (func(ctx context.Context) map[string][2]string, func()) {
	var mu sync.Mutex
	conns := make([]*pgx.Conn, len(c.Members))
	ask := func(ctx context.Context, i int) (bool, error) {
		m := c.Members[i]
		if conns[i] == nil {
			cc, err := pgx.ParseConfig(c.DSN)
			if err != nil {
				return false, err
			}
			host, port, err := net.SplitHostPort(m.Addr)
			if err != nil {
				return false, err
			}
			p, err := strconv.ParseUint(port, 10, 16)
			if err != nil {
				return false, err
			}
			// This node alone, whatever it is.
			cc.Host, cc.Port, cc.Fallbacks, cc.ValidateConnect = host, uint16(p), nil, nil
			cc.ConnectTimeout = time.Second
			conn, err := pgx.ConnectConfig(ctx, cc)
			if err != nil {
				return false, err
			}
			conns[i] = conn
		}
		var rec bool
		if err := conns[i].QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&rec); err != nil {
			conns[i].Close(context.Background())
			conns[i] = nil
			return false, err
		}
		return rec, nil
	}
	poll := func(ctx context.Context) map[string][2]string {
		mu.Lock()
		defer mu.Unlock()
		out := make([][2]string, len(c.Members))
		var wg sync.WaitGroup
		for i := range c.Members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec, err := ask(ctx, i)
				switch {
				case err != nil:
					out[i] = [2]string{results.RoleDown, ""}
				case rec:
					out[i] = [2]string{results.RoleReplica, "in recovery"}
				default:
					out[i] = [2]string{results.RolePrimary, "not in recovery"}
				}
			}()
		}
		wg.Wait()
		m := map[string][2]string{}
		for i, mb := range c.Members {
			m[mb.Name] = out[i]
		}
		return m
	}
	closeAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for i, conn := range conns {
			if conn != nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				conn.Close(ctx)
				cancel()
				conns[i] = nil
			}
		}
	}
	return poll, closeAll
}
