package runner

import (
	"cmp"
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/servers/cassandra"
	"github.com/indoubt/indoubt/internal/servers/ferret"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/stores/cql"
	"github.com/indoubt/indoubt/stores/mongo"
	"github.com/indoubt/indoubt/stores/redis"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/register"
	"github.com/indoubt/indoubt/workloads/txn"
)

// The stores other than PostgreSQL: their launchers, DSNs and workloads.

func launchRedis(ctx context.Context, cfg Config, dir string) (launched, error) {
	if cfg.Topology == TopologyReplicated {
		return launchReplicatedRedis(ctx, cfg, dir)
	}
	r, err := redisserver.Start(ctx, redisserver.Options{Persistence: cfg.Persistence, LogPath: filepath.Join(dir, "redis.log"),
		DataFS: cfg.dataFS()})
	if err != nil {
		return launched{}, err
	}
	return launched{
		// The user named: redis-cli -u refuses a URL with a password and an empty user.
		dsn:  strings.Replace(r.DSN, "redis://:", "redis://default:", 1),
		desc: fmt.Sprintf("Redis %s at %s, persistence %s", r.Version, r.Addr, cmp.Or(r.Persistence, redisserver.NoPersistence)) + cfg.durabilityDesc(),
		stop: r.Stop,
		ctl:  r,
	}, nil
}

func openRedis(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	rc, err := redisConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	rc.DriverRetry = cfg.Retry.DriverRetry()
	rc.Dial = cfg.dial
	c, err := redis.Open(ctx, rc)
	if err != nil {
		return nil, nil, err
	}
	txns := func(model workloads.Name) (*redis.Txns, error) {
		return redis.NewTxns(c, redis.TxnConfig{Model: model, Mechanism: redis.TxnMechanism(cfg.Mechanism)})
	}
	return bindClient(cfg, Redis, c, c.Register(), txns, func() { c.Close() })
}

// redisConfig reads a Redis DSN: redis://[:PASSWORD@]HOST:PORT[/DB] names one server;
// with master_name=NAME, HOST:PORT and each addr=HOST:PORT name Sentinels, which say
// where the primary NAME is. PASSWORD is the servers' and, unless sentinel_password is
// given (empty for Sentinels without one), the Sentinels' too.
func redisConfig(dsn string) (redis.Config, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != string(Redis) || u.Host == "" {
		return redis.Config{}, fmt.Errorf("redis dsn: want redis://[:password@]host:port[/db][?master_name=NAME&addr=SENTINEL...], got %q", redact.DSN(dsn))
	}
	rc := redis.Config{Addr: u.Host}
	if u.User != nil {
		rc.Password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if _, err := fmt.Sscan(db, &rc.DB); err != nil {
			return redis.Config{}, fmt.Errorf("redis dsn: database %q is not a number", db)
		}
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "master_name", "addr", "sentinel_password":
		default:
			return redis.Config{}, fmt.Errorf("redis dsn: unknown parameter %q (want master_name, addr, sentinel_password)", k)
		}
	}
	if q.Has("master_name") {
		rc.MasterName = q.Get("master_name")
		if rc.MasterName == "" {
			return redis.Config{}, fmt.Errorf("redis dsn: master_name is empty")
		}
		rc.SentinelAddrs = append([]string{u.Host}, q["addr"]...)
		rc.SentinelPassword = rc.Password
		if q.Has("sentinel_password") {
			rc.SentinelPassword = q.Get("sentinel_password")
		}
		rc.Addr = ""
	} else if q.Has("addr") || q.Has("sentinel_password") {
		return redis.Config{}, fmt.Errorf("redis dsn: addr and sentinel_password name Sentinels: add master_name")
	}
	return rc, nil
}

// redisAddr is the one server a Redis DSN names, for the fault proxy: a DSN that names
// Sentinels has none, and a DSN the adapter would refuse is refused here, before the
// proxy starts.
func redisAddr(dsn string) (string, error) {
	rc, err := redisConfig(dsn)
	if err != nil {
		return "", err
	}
	if rc.MasterName != "" {
		return "", fmt.Errorf("a Sentinel DSN (master_name) names several servers and the fault proxy fronts one: use process faults with --proxy off, or point --dsn at the primary")
	}
	return urlAddr(dsn)
}

// bindKV binds the budget or register workload to a store that has both, or closes it.
func bindKV(cfg Config, name StoreName, b budget.Store, r register.Store, closer func()) (workloads.Workload, func(), error) {
	switch cfg.Workload {
	case workloads.Budget:
		return budget.New(b, cfg.Budget), closer, nil
	case workloads.Register:
		return cfg.register(r), closer, nil
	}
	closer()
	return nil, nil, unbound(name, cfg.Workload)
}

// bindClient binds a client of a store that has every workload: a transactional
// workload to the store txns opens on it, the budget and register workloads through
// bindKV. On an error it closes the client.
func bindClient[T txn.Store](cfg Config, name StoreName, b budget.Store, r register.Store,
	txns func(workloads.Name) (T, error), closer func()) (workloads.Workload, func(), error) {
	if isTxn(cfg.Workload) {
		store, err := txns(cfg.Workload)
		if err != nil {
			closer()
			return nil, nil, err
		}
		return bindTxn(cfg, store, closer)
	}
	return bindKV(cfg, name, b, r, closer)
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
	return bindClient(cfg, Mongo, c, c.Register(), c.Txns, func() { c.Close() })
}

func launchCassandra(ctx context.Context, cfg Config, dir string) (launched, error) {
	c, err := cassandra.Start(ctx, cassandra.Options{LogPath: filepath.Join(dir, "cassandra.log"),
		CommitLogSync: cfg.CommitLogSync, DataFS: cfg.dataFS()})
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
	cc.Dial = cfg.dial
	var c *cql.Client
	if r := cfg.ring; r != nil && r.admin != nil {
		c = r.admin.Beside(cc.Hosts, cc.Dial)
	} else {
		if c, err = cql.Open(ctx, cc); err != nil {
			return nil, nil, err
		}
		if cfg.ring != nil {
			cfg.ring.admin = c
		}
	}
	return bindClient(cfg, CQL, c, c.Register(), c.Txns, c.Close)
}

// cqlRing is the admin's client of a Cassandra ring on nodes of its own: the first
// client opened with it (the admin's) is kept, the others stand beside it.
type cqlRing struct{ admin *cql.Client }

// cassandraAvailable says why no Cassandra can be launched here: its jars are not in
// the cache scripts/prepare-cassandra fills.
func cassandraAvailable() error {
	cache, err := servers.CacheDir()
	if err != nil {
		return err
	}
	_, err = cassandra.Find(cache, cassandra.Version)
	return err
}
