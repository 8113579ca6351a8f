package runner

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/indoubt/indoubt/internal/netns"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/mariadb"
)

// launchGalera starts a Galera cluster of MariaDB nodes, one on each node of the
// topology's network: n1 bootstraps the cluster, the others join it one after the other
// (each receives n1's state by rsync), and the launch returns once every node reports
// the cluster whole and itself synced. The clients beside a node use that node: Galera
// is multi-primary, every node of the primary component takes writes. No node reports a
// role (two nodes that each take writes are Galera's design, not a split brain); the
// primary named to partition shapes is n1.
func (t *topology) launchGalera(ctx context.Context, cfg Config, dir string) (launched, error) {
	nw := t.net
	var peers []string
	for _, n := range nw.Nodes {
		peers = append(peers, n.IP.String())
	}
	var nodes []*mariadb.Server
	stopAll := func() error {
		var errs []error
		for i := len(nodes) - 1; i >= 0; i-- {
			errs = append(errs, nodes[i].Stop())
		}
		return errors.Join(errs...)
	}
	password := ""
	for i, n := range nw.Nodes {
		g := &mariadb.Galera{Name: "indoubt", Peers: peers, Bootstrap: i == 0, Password: password}
		m, err := mariadb.Start(ctx, mariadb.Options{LogPath: filepath.Join(dir, "mariadb-"+n.Name+".log"),
			Node: serverNode(nw, n), Galera: g})
		if err != nil {
			return launched{}, errors.Join(fmt.Errorf("galera node %s: %w", n.Name, err), stopAll())
		}
		nodes = append(nodes, m)
		password = m.Password
	}
	dial := netns.DialFrom(nw.Admin)
	if err := waitGalera(ctx, nodes, dial); err != nil {
		return launched{}, errors.Join(err, stopAll())
	}
	t.admin = nodes[0].DSN
	// The clients set wsrep_sync_wait=3: a read, an UPDATE or a DELETE first waits
	// until the node has applied every writeset the cluster had committed when it was
	// sent. Without it (Galera's default, 0) a node serves them from state that lags
	// writes acknowledged on another node: the budget's first decrements on n2 found no
	// account yet, set by the harness on n1, and were rejected with budget remaining
	// (docs/findings.md).
	t.addSides(func(i int) string { return nodes[i].DSN + "?wsrep_sync_wait=3" })
	t.primary = func() string { return nw.Nodes[0].Name }
	// A node cut from the primary component refuses every statement (1047) until it
	// has rejoined: the final reads wait for the cluster to be whole again.
	t.settle = func(ctx context.Context) error { return waitGalera(ctx, nodes, dial) }
	desc := fmt.Sprintf("MariaDB %s Galera cluster of %d nodes on n1 to n%d (galera-4, state transfers by rsync, bootstrapped on n1; clients with wsrep_sync_wait=3)", nodes[0].Version, len(nodes), len(nodes))
	return launched{dsn: t.admin, desc: desc, stop: stopAll, ctl: galeraCtl{nodes}}, nil
}

// galeraCtl applies process faults to the cluster's first node.
type galeraCtl struct{ nodes []*mariadb.Server }

func (g galeraCtl) Pid() int                          { return g.nodes[0].Pid() }
func (g galeraCtl) Kill() error                       { return g.nodes[0].Kill() }
func (g galeraCtl) Pause() error                      { return g.nodes[0].Pause() }
func (g galeraCtl) Resume() error                     { return g.nodes[0].Resume() }
func (g galeraCtl) Start(ctx context.Context) error   { return g.nodes[0].Start(ctx) }
func (g galeraCtl) Restart(ctx context.Context) error { return g.nodes[0].Restart(ctx) }

// waitGalera waits until every node reports a cluster of all the nodes and itself
// synced (wsrep_cluster_size, wsrep_local_state_comment), at most three minutes.
func waitGalera(ctx context.Context, nodes []*mariadb.Server, dial func(context.Context, string, string) (net.Conn, error)) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, m := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = servers.Poll(ctx, 200*time.Millisecond, m.Exited(), func(ctx context.Context) error {
				size, state, err := galeraStatus(ctx, m, dial)
				if err != nil {
					return err
				}
				if size != fmt.Sprint(len(nodes)) || state != "Synced" {
					return fmt.Errorf("node at %s: cluster size %s, %s", m.Addr, size, state)
				}
				return nil
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("galera cluster: %w", err)
	}
	return nil
}

// galeraStatus reads a node's wsrep_cluster_size and wsrep_local_state_comment.
func galeraStatus(ctx context.Context, m *mariadb.Server, dial func(context.Context, string, string) (net.Conn, error)) (size, state string, err error) {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName = "tcp", m.Addr, m.User, m.Password, m.Database
	cfg.DialFunc = dial
	cfg.Logger = log.New(io.Discard, "", 0)
	cfg.Timeout = 2 * time.Second
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return "", "", err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SHOW STATUS WHERE Variable_name IN ('wsrep_cluster_size', 'wsrep_local_state_comment')")
	if err != nil {
		return "", "", err
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return "", "", err
		}
		switch strings.ToLower(k) {
		case "wsrep_cluster_size":
			size = v
		case "wsrep_local_state_comment":
			state = v
		}
	}
	return size, state, rows.Err()
}
