package runner

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/ferret"
	"github.com/indoubt/indoubt/stores/cql"
	"github.com/indoubt/indoubt/stores/mongo"
	"github.com/indoubt/indoubt/stores/redis"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
)

// The stores other than PostgreSQL: their launchers, DSNs and workloads.

func launchRedis(ctx context.Context, cfg Config, dir string) (launched, error) {
	r, err := servers.StartRedis(ctx, servers.RedisOptions{Persistence: cfg.Persistence, LogPath: filepath.Join(dir, "redis.log"),
		PowerFS: cfg.onPowerFS()})
	if err != nil {
		return launched{}, err
	}
	return launched{
		dsn:  r.DSN,
		desc: fmt.Sprintf("Redis %s at %s, persistence %s", r.Version, r.Addr, r.Persistence) + cfg.durabilityDesc(),
		stop: r.Stop,
		ctl:  r,
	}, nil
}

func openRedis(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != string(Redis) || u.Host == "" {
		return nil, nil, fmt.Errorf("redis dsn: want redis://[:password@]host:port[/db], got %q", redact.DSN(dsn))
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
	return bindKV(cfg, Redis, c, c.Register(), func() { c.Close() })
}

// bindKV binds the budget or register workload to a store that has both, or closes it.
func bindKV(cfg Config, name StoreName, b budget.Store, r register.Store, closer func()) (workloads.Workload, func(), error) {
	switch cfg.Workload {
	case workloads.Budget:
		return budget.New(b, cfg.Budget), closer, nil
	case workloads.Register:
		return register.New(r), closer, nil
	}
	closer()
	return nil, nil, unbound(name, cfg.Workload)
}

func launchFerretDB(ctx context.Context, cfg Config, dir string) (launched, error) {
	f, err := ferret.Start(ctx, ferret.Options{LogPath: filepath.Join(dir, "ferretdb.log")})
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
	return bindKV(cfg, Mongo, c, c.Register(), func() { c.Close() })
}

func launchCassandra(ctx context.Context, cfg Config, dir string) (launched, error) {
	c, err := servers.StartCassandra(ctx, servers.CassandraOptions{LogPath: filepath.Join(dir, "cassandra.log"),
		CommitLogSync: cfg.CommitLogSync, PowerFS: cfg.onPowerFS(), PowerFSEntries: cfg.entryDurability()})
	if err != nil {
		return launched{}, err
	}
	return launched{dsn: "cql://" + c.Addr + "/indoubt", desc: "Apache Cassandra " + c.Version + " at " + c.Addr + cfg.durabilityDesc(), stop: c.Stop, ctl: c}, nil
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
	return bindKV(cfg, CQL, c, c.Register(), c.Close)
}

// cassandraAvailable says why no Cassandra can be launched here: its jars are not in
// the cache scripts/prepare-cassandra fills.
func cassandraAvailable() error {
	cache, err := servers.CassandraCacheDir()
	if err != nil {
		return err
	}
	_, err = servers.FindCassandra(cache, servers.CassandraVersion)
	return err
}
