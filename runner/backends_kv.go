package runner

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/indoubt/indoubt/servers"
	"github.com/indoubt/indoubt/stores/cql"
	"github.com/indoubt/indoubt/stores/mongo"
	"github.com/indoubt/indoubt/stores/redis"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
)

// The stores other than PostgreSQL: their launchers, DSNs and workloads.

func launchRedis(ctx context.Context, cfg Config, dir string) (launched, error) {
	r, err := servers.StartRedis(ctx, servers.RedisOptions{Persistence: cfg.Persistence, LogPath: filepath.Join(dir, "redis.log")})
	if err != nil {
		return launched{}, err
	}
	return launched{
		dsn:  r.DSN,
		desc: fmt.Sprintf("Redis %s at %s, persistence %s", r.Version, r.Addr, r.Persistence),
		stop: r.Stop,
	}, nil
}

func openRedis(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "redis" || u.Host == "" {
		return nil, nil, fmt.Errorf("redis dsn: want redis://[:password@]host:port[/db], got %q", redactDSN(dsn))
	}
	rc := redis.Config{Addr: u.Host, DriverRetry: cfg.Retry.DriverRetry()}
	if u.User != nil {
		rc.Password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if _, err := fmt.Sscan(db, &rc.DB); err != nil {
			return nil, nil, fmt.Errorf("redis dsn: database %q is not a number", db)
		}
	}
	c, err := redis.Open(ctx, rc)
	if err != nil {
		return nil, nil, err
	}
	return bindKV(cfg, "redis", c, c.Register(), func() { c.Close() })
}

// bindKV binds the budget or register workload to a store that has both, or closes it.
func bindKV(cfg Config, name string, b budget.Store, r register.Store, closer func()) (workloads.Workload, func(), error) {
	switch cfg.Workload {
	case "budget":
		return budget.New(b, cfg.Budget), closer, nil
	case "register":
		return register.New(r), closer, nil
	}
	closer()
	return nil, nil, fmt.Errorf("store %s has no workload %q (it has budget, register)", name, cfg.Workload)
}

func launchFerretDB(ctx context.Context, cfg Config, dir string) (launched, error) {
	f, err := servers.StartFerretDB(ctx, servers.FerretDBOptions{LogPath: filepath.Join(dir, "ferretdb.log")})
	if err != nil {
		return launched{}, err
	}
	return launched{dsn: f.URI, desc: "FerretDB 1.24 (" + f.Handler + ") at " + f.Addr, stop: f.Stop}, nil
}

// mongoRewrite points a mongodb:// URI at addr and connects directly, so the driver
// does not follow the server's own address around the proxy.
func mongoRewrite(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Host = addr
	q := u.Query()
	q.Set("directConnection", "true")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func openMongo(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	if !strings.HasPrefix(dsn, "mongodb://") && !strings.HasPrefix(dsn, "mongodb+srv://") {
		return nil, nil, fmt.Errorf("mongo dsn: want mongodb://host:port/")
	}
	c, err := mongo.Open(ctx, mongo.Config{URI: dsn, DriverRetry: cfg.Retry.DriverRetry()})
	if err != nil {
		return nil, nil, err
	}
	return bindKV(cfg, "mongo", c, c.Register(), func() { c.Close() })
}

func launchCassandra(ctx context.Context, cfg Config, dir string) (launched, error) {
	c, err := servers.StartCassandra(ctx, servers.CassandraOptions{LogPath: filepath.Join(dir, "cassandra.log")})
	if err != nil {
		return launched{}, err
	}
	return launched{dsn: "cql://" + c.Addr + "/indoubt", desc: "Apache Cassandra " + c.Version + " at " + c.Addr, stop: c.Stop}, nil
}

// cqlAddr is the first host of a cql:// DSN: the proxy stands in front of one node.
func cqlAddr(dsn string) (string, error) {
	c, err := cql.ParseDSN(dsn)
	if err != nil {
		return "", err
	}
	if len(c.Hosts) != 1 {
		return "", fmt.Errorf("cql dsn: the proxy stands in front of one node; give one host (got %d)", len(c.Hosts))
	}
	return c.Hosts[0], nil
}

func cqlRewrite(dsn, addr string) (string, error) {
	scheme, rest, _ := strings.Cut(dsn, "://")
	i := strings.IndexAny(rest, "/?")
	if i < 0 {
		return scheme + "://" + addr, nil
	}
	return scheme + "://" + addr + rest[i:], nil
}

func openCQL(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	cc, err := cql.ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	cc.DriverRetry = cfg.Retry.DriverRetry()
	c, err := cql.Open(ctx, cc)
	if err != nil {
		return nil, nil, err
	}
	return bindKV(cfg, "cql", c, c.Register(), c.Close)
}

// StoreNames lists the stores in the order --store all runs them.
func StoreNames() []string {
	var ns []string
	for _, b := range backends {
		ns = append(ns, b.name)
	}
	return ns
}

// Available reports why a store cannot be launched on this machine, or nil when it can:
// what --store all uses to pick the stores it runs.
func Available(store string) error {
	switch store {
	case "postgres":
		_, err := servers.FindPostgres()
		return err
	case "redis":
		_, err := servers.FindRedis()
		return err
	case "mongo":
		return nil // FerretDB runs in this process
	case "cql":
		cache, err := servers.CassandraCacheDir()
		if err != nil {
			return err
		}
		_, err = servers.FindCassandra(cache, servers.CassandraVersion)
		return err
	case "cockroach":
		return fmt.Errorf("cockroach: no CockroachDB can be launched here; give --dsn")
	}
	return fmt.Errorf("unknown store %q", store)
}

// StoreFromDSN guesses the store a DSN names by its scheme.
func StoreFromDSN(dsn string) (string, bool) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return "", false
	}
	switch scheme {
	case "postgres", "postgresql":
		return "postgres", true
	case "redis", "rediss":
		return "redis", true
	case "mongodb", "mongodb+srv":
		return "mongo", true
	case "cql", "cassandra":
		return "cql", true
	}
	return "", false
}

// Supports reports whether store has the workload.
func Supports(store, workload string) bool {
	switch workload {
	case "budget", "register":
		return store == "postgres" || store == "redis" || store == "mongo" || store == "cql"
	case "counter":
		return store == "postgres" || store == "cockroach"
	}
	return false
}
