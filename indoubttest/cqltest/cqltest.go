// Package cqltest gives a test a Cassandra keyspace of its own behind indoubt's
// commit-aware proxy. It links gocql and nothing of the other stores.
//
//	srv := cqltest.Cassandra(t)         // srv.Addr: the proxy; srv.Database: the keyspace
//	cl := gocql.NewCluster(srv.Addr)
//	cl.Keyspace = srv.Database
//	cl.DisableInitialHostLookup = true  // else gocql finds the node's own address, around the proxy
//
// The server is a single Apache Cassandra node launched once per test binary from the
// jars scripts/prepare-cassandra fetches (it takes a minute and about 900 MiB), or the
// node INDOUBT_CASSANDRA_DSN names (cql://host:port). Every test gets a keyspace
// (SimpleStrategy, one replica) created for it and dropped after it. Where the jars or
// java are missing the test skips (fails under CI=true).
package cqltest

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/indoubttest"
	"github.com/indoubt/indoubt/indoubttest/internal/serve"
	"github.com/indoubt/indoubt/internal/servers/cassandra"
	"github.com/indoubt/indoubt/stores/cql"
)

// EnvDSN names the environment variable that points the tests at an existing node
// (cql://host:port) instead of a launched one.
const EnvDSN = "INDOUBT_CASSANDRA_DSN"

// server is the shared node; its Addr is a DSN cql://host:port.
var server = &serve.SharedServer{Env: EnvDSN, Timeout: 5 * time.Minute,
	Launch: func(ctx context.Context) (string, func() error, error) {
		c, err := cassandra.Start(ctx, cassandra.Options{})
		if err != nil {
			return "", nil, err
		}
		return "cql://" + c.Addr, c.Stop, nil
	},
}

// keyspaceName fits serve.DatabaseName into Cassandra's 48 characters, keeping its
// unique end.
func keyspaceName(tb testing.TB) string {
	name := serve.DatabaseName(tb)
	if len(name) > 48 {
		name = "t_" + name[len(name)-46:]
	}
	return name
}

// Cassandra returns a keyspace of the test's own (srv.Database) behind a commit-aware
// proxy at srv.Addr; srv.DSN and srv.DirectDSN are cql://host:port/keyspace, as indoubt
// run takes them. The error rules are those of the stores/cql adapter. opts configure
// the Server (indoubttest.Seed); Arm's match= is not available on Cassandra's proxy.
func Cassandra(tb testing.TB, opts ...indoubttest.Option) *indoubttest.Server {
	tb.Helper()
	dsn := server.Need(tb, "cqltest: launch Cassandra")
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		tb.Fatalf("cqltest: %s: want cql://host:port", EnvDSN)
	}
	addr := u.Host
	ks := keyspaceName(tb)
	serve.OwnDatabase(tb, "cqltest", func(_ context.Context, stmt string) error { return schema(addr, stmt) },
		"CREATE KEYSPACE "+ks+" WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
		"DROP KEYSPACE IF EXISTS "+ks)
	direct := "cql://" + addr + "/" + ks
	return serve.NewServer(tb, serve.Target{
		Store:      "cql",
		DirectAddr: addr,
		DirectDSN:  direct,
		Database:   ks,
		Protocol:   toxics.CQL{},
		Options:    opts,
		Classify:   cql.Classify,
	}).(*indoubttest.Server)
}

func schema(addr, stmt string) error {
	cl := gocql.NewCluster(addr)
	cl.DisableInitialHostLookup = true
	cl.Timeout = 30 * time.Second
	cl.ConnectTimeout = 10 * time.Second
	s, err := cl.CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Query(stmt).Exec()
}
