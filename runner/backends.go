package runner

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/indoubt/indoubt/servers"
	"github.com/indoubt/indoubt/stores/cockroach"
	"github.com/indoubt/indoubt/stores/postgres"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/counter"
	"github.com/indoubt/indoubt/workloads/register"
)

// backend is one store: how to launch its throwaway server, where its DSN points, and
// how to bind each workload it supports. The table below is the one place stores are
// wired; nothing registers itself.
type backend struct {
	name string
	// protocol names the proxy's wire protocol for this store.
	protocol string
	launch   func(ctx context.Context, cfg Config, dir string) (launched, error)
	// addr returns the host:port a DSN points at; rewrite points it at addr instead.
	addr    func(dsn string) (string, error)
	rewrite func(dsn, addr string) (string, error)
	open    func(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error)
}

// launched is a server started for this run.
type launched struct {
	dsn  string
	desc string
	stop func() error
}

var backends = []backend{
	{
		name: "postgres", protocol: "postgres",
		launch:  launchPostgres,
		addr:    urlAddr,
		rewrite: urlRewrite,
		open:    openPostgres,
	},
	{
		name: "redis", protocol: "resp",
		launch:  launchRedis,
		addr:    urlAddr,
		rewrite: urlRewrite,
		open:    openRedis,
	},
	{
		// Locally, FerretDB (a MongoDB-wire server, in process); --dsn reaches MongoDB.
		name: "mongo", protocol: "mongo",
		launch:  launchFerretDB,
		addr:    urlAddr,
		rewrite: mongoRewrite,
		open:    openMongo,
	},
	{
		// Locally, Apache Cassandra from the jars scripts/prepare-cassandra resolves;
		// --dsn reaches ScyllaDB or Cassandra.
		name: "cql", protocol: "cql",
		launch:  launchCassandra,
		addr:    cqlAddr,
		rewrite: cqlRewrite,
		open:    openCQL,
	},
	{
		// CockroachDB runs only where --dsn points at one: nothing launches it here.
		name: "cockroach", protocol: "postgres",
		launch:  launchCockroach,
		addr:    urlAddr,
		rewrite: urlRewrite,
		open:    openCockroach,
	},
}

func lookupBackend(name string) (backend, bool) {
	for _, b := range backends {
		if b.name == name {
			return b, true
		}
	}
	return backend{}, false
}

func backendNames() string {
	var ns []string
	for _, b := range backends {
		ns = append(ns, b.name)
	}
	return strings.Join(ns, ", ")
}

func launchPostgres(ctx context.Context, _ Config, dir string) (launched, error) {
	pg, err := servers.StartPostgres(ctx, servers.PostgresOptions{LogPath: filepath.Join(dir, "postgres.log")})
	if err != nil {
		return launched{}, err
	}
	return launched{dsn: pg.DSN, desc: "PostgreSQL " + pg.Version + " at " + pg.Addr, stop: pg.Stop}, nil
}

func openPostgres(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	switch cfg.Workload {
	case "budget":
		c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Mechanism: postgres.Mechanism(cfg.Mechanism), MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			return nil, nil, err
		}
		return budget.New(c, cfg.Budget), c.Close, nil
	case "register":
		c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			return nil, nil, err
		}
		return register.New(c.Register()), c.Close, nil
	case "counter":
		c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			return nil, nil, err
		}
		k, err := postgres.NewCounter(c, postgres.CounterConfig{Mechanism: postgres.CounterMechanism(cfg.Mechanism), Isolation: postgres.Isolation(cfg.Isolation)})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return counter.New(k), c.Close, nil
	}
	return nil, nil, fmt.Errorf("store postgres has no workload %q", cfg.Workload)
}

func launchCockroach(ctx context.Context, _ Config, dir string) (launched, error) {
	return launched{}, fmt.Errorf("no CockroachDB can be launched here: give --dsn postgresql://root@HOST:26257/defaultdb?sslmode=disable (compose/ starts a three-node cluster)")
}

func openCockroach(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	if cfg.Workload != "counter" {
		return nil, nil, fmt.Errorf("store cockroach has no workload %q (it has counter)", cfg.Workload)
	}
	c, err := cockroach.Open(ctx, cockroach.Config{DSN: dsn, MaxConns: int32(cfg.Workers + 4)})
	if err != nil {
		return nil, nil, err
	}
	k, err := c.Counter(postgres.CounterConfig{Mechanism: postgres.CounterMechanism(cfg.Mechanism), Isolation: postgres.Isolation(cfg.Isolation)})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return counter.New(k), c.Close, nil
}

// urlAddr returns host:port of a URL-form DSN (postgres://, redis://, mongodb://).
func urlAddr(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("dsn must be a URL with a host:port to put the proxy in front of it")
	}
	if u.Port() == "" {
		return "", fmt.Errorf("dsn %s has no port", redactDSN(dsn))
	}
	return u.Host, nil
}

func urlRewrite(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Host = addr
	return u.String(), nil
}

// redactDSN hides a password in a URL-form DSN.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		return dsn
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
