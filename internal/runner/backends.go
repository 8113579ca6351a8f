package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/internal/redact"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	redisserver "github.com/indoubt/indoubt/internal/servers/redis"
	"github.com/indoubt/indoubt/stores/cockroach"
	"github.com/indoubt/indoubt/stores/postgres"
	redisstore "github.com/indoubt/indoubt/stores/redis"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/counter"
	"github.com/indoubt/indoubt/workloads/insert"
)

// StoreName names a store. The names are defined here, once; everything else refers
// to these values or looks them up in the table below.
type StoreName string

// The stores indoubt has.
const (
	Postgres  StoreName = "postgres"
	Redis     StoreName = "redis"
	Mongo     StoreName = "mongo"
	CQL       StoreName = "cql"
	Cockroach StoreName = "cockroach"
	MySQL     StoreName = "mysql"
)

// backend is one store: the DSN schemes that name it, the workloads it has, the wire
// protocol the proxy's toxics speak to it, how to launch its throwaway server and
// whether that can be done here, where its DSN points, and how to bind each workload.
// The table below is the one place stores are wired; nothing registers itself.
type backend struct {
	name StoreName
	// schemes are the DSN schemes that name the store.
	schemes   []string
	workloads []workloads.Name
	// protocol is the commit-aware toxics' protocol for the store's wire protocol.
	protocol toxics.Protocol
	launch   func(ctx context.Context, cfg Config, dir string) (launched, error)
	// available says why no server can be launched here, or nil when one can.
	available func() error
	// addr returns the host:port a DSN points at; rewrite points it at addr instead.
	addr    func(dsn string) (string, error)
	rewrite func(dsn, addr string) (string, error)
	open    func(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error)
	// mechanisms are the --mechanism values of each workload that has a choice, and
	// isolations the --isolation levels; a workload not listed takes neither flag.
	// Config.defaults checks them, so that a bad value is refused before a launch.
	mechanisms map[workloads.Name][]string
	isolations map[workloads.Name][]string

	// What indoubt exec needs to serve the store to a program (program.go). env gives
	// the program the DSN through the proxy in the variables its drivers read; nil for a
	// store exec does not serve. finalSQL reads the final state with a query (exec
	// --final-sql); nil for a store without SQL. keep launches the server keeping its
	// data after it stops (exec --keep); nil when it cannot. dsnOnly: nothing launches
	// the store here, its launch only says so.
	env      func(proxied, addr string) ([]string, error)
	finalSQL func(ctx context.Context, dsn, query, model string) (json.RawMessage, error)
	keep     func(ctx context.Context, dir string) (launched, error)
	dsnOnly  bool
	// lock takes the run lock of the database a DSN names and returns its release
	// (dsnlock.go); nil for a store that takes none.
	lock func(ctx context.Context, dsn string) (func(), error)
	// isolated launches the store with each node in a network namespace of its own
	// (--network isolated, partitions.go), by --topology (single for ""); a topology
	// not listed has no such launch.
	isolated map[string]isolatedLaunch
}

// isolatedLaunch is one topology of a store on nodes of their own: the nodes' names, in
// order, and the launcher that starts the servers on them.
type isolatedLaunch struct {
	nodes  []string
	launch func(t *topology, ctx context.Context, cfg Config, dir string) (launched, error)
}

// oneNode and threeNodes name the nodes of the isolated topologies.
var (
	oneNode    = []string{"n1"}
	threeNodes = []string{"n1", "n2", "n3"}
)

// launched is a server started for this run.
type launched struct {
	dsn string
	// dsns are the servers of a two-phase commit run (dsn is the first); nil for one.
	dsns []string
	desc string
	stop func() error
	// ctl applies process faults to the server; nil when it has none.
	ctl processCtl
	// standby is the DSN of a replicated PostgreSQL's standby, "" for others.
	standby string
	// topo is the topology when its nodes have a network of their own (partitions.go).
	topo *topology
	// roles, when set, asks the members of a cluster on loopback for their roles,
	// recorded as on a topology of its own (roles.go); nil for others and with topo.
	roles *roleSource
	// kept says how to look at a kept server's data again (exec --keep); nil for others.
	kept []string
}

// kv are the workloads of a store that has budget and register (bindKV).
var kv = []workloads.Name{workloads.Budget, workloads.Register}

var backends = []backend{
	{
		name: Postgres, schemes: []string{"postgres", "postgresql"}, protocol: toxics.Postgres{},
		// transfer and two-rows run over several servers (twophase.go).
		workloads: []workloads.Name{workloads.Budget, workloads.Register, workloads.Counter, workloads.Insert, workloads.Transfer, workloads.TwoRows, workloads.ListAppend, workloads.RWRegister},
		launch:    launchPostgres,
		available: func() error { _, err := pgserver.Bin(""); return err },
		addr:      urlAddr,
		rewrite:   pgRewrite,
		open:      openPostgres,
		env:       pgEnv, finalSQL: queryFinal, keep: launchKeptPostgres, lock: lockPostgres,
		isolated: map[string]isolatedLaunch{TopologySingle: {oneNode, (*topology).launchPostgresSingle},
			TopologyReplicated: {[]string{"n1", "n2"}, (*topology).launchPostgres}, TopologyPatroni: {threeNodes, (*topology).launchPatroni}},
		mechanisms: map[workloads.Name][]string{
			workloads.Budget:  {string(postgres.Autocommit), string(postgres.Transaction)},
			workloads.Counter: names(postgres.CounterMechanisms),
		},
		isolations: map[workloads.Name][]string{workloads.Counter: names(postgres.Isolations),
			workloads.ListAppend: names(postgres.Isolations), workloads.RWRegister: names(postgres.Isolations)},
	},
	{
		name: Redis, schemes: []string{"redis", "rediss"}, protocol: toxics.Resp{},
		workloads: append(slices.Clone(kv), workloads.ListAppend, workloads.RWRegister),
		launch:    launchRedis,
		available: func() error { _, err := redisserver.Find(); return err },
		addr:      redisAddr,
		rewrite:   urlRewrite,
		open:      openRedis,
		env:       urlEnv("REDIS_URL"), lock: lockRedis,
		// Replicated, Jepsen's layout: five nodes, a Sentinel on each, the data on three.
		isolated: map[string]isolatedLaunch{TopologySingle: {oneNode, (*topology).launchRedisSingle},
			TopologyReplicated: {[]string{"n1", "n2", "n3", "n4", "n5"}, (*topology).launchRedis}},
		mechanisms: map[workloads.Name][]string{
			workloads.ListAppend: names(redisstore.TxnMechanisms), workloads.RWRegister: names(redisstore.TxnMechanisms),
		},
	},
	{
		// Locally, FerretDB (a MongoDB-wire server, in process); --dsn reaches MongoDB.
		name: Mongo, schemes: []string{"mongodb", "mongodb+srv"}, protocol: toxics.Mongo{},
		workloads: append(slices.Clone(kv), workloads.ListAppend, workloads.RWRegister),
		launch:    launchFerretDB,
		available: func() error { return nil }, // FerretDB runs in this process
		addr:      urlAddr,
		rewrite:   mongoRewrite,
		open:      openMongo,
		env:       urlEnv("MONGODB_URI"),
	},
	{
		// Locally, Apache Cassandra from the jars scripts/prepare-cassandra resolves;
		// --dsn reaches ScyllaDB or Cassandra.
		name: CQL, schemes: []string{"cql", "cassandra"}, protocol: toxics.CQL{},
		workloads: append(slices.Clone(kv), workloads.ListAppend, workloads.RWRegister),
		launch:    launchCassandra,
		available: cassandraAvailable,
		addr:      cqlAddr,
		rewrite:   cqlRewrite,
		open:      openCQL,
		isolated: map[string]isolatedLaunch{TopologySingle: {oneNode, (*topology).launchCassandra},
			TopologyReplicated: {threeNodes, (*topology).launchCassandra}},
	},
	{
		// etcd v3 (backends_etcd.go): no fault proxy (gRPC to every member).
		name: Etcd, schemes: []string{"etcd"},
		workloads: append(slices.Clone(kv), workloads.ListAppend, workloads.RWRegister), launch: launchEtcd, available: etcdAvailable,
		addr: etcdNoProxy, rewrite: func(dsn, _ string) (string, error) { return dsn, nil },
		open: openEtcd, mechanisms: etcdMechanisms,
		isolated: map[string]isolatedLaunch{TopologySingle: {oneNode, (*topology).launchEtcd},
			TopologyReplicated: {threeNodes, (*topology).launchEtcd}},
	},
	{
		// CockroachDB runs only where --dsn points at one: nothing launches it here.
		name: Cockroach, protocol: toxics.Postgres{},
		workloads:  []workloads.Name{workloads.Counter, workloads.Insert},
		launch:     launchCockroach,
		available:  func() error { return fmt.Errorf("cockroach: no CockroachDB can be launched here; give --dsn") },
		addr:       urlAddr,
		rewrite:    pgRewrite,
		open:       openCockroach,
		mechanisms: map[workloads.Name][]string{workloads.Counter: names(postgres.CounterMechanisms)},
		isolations: map[workloads.Name][]string{workloads.Counter: names(postgres.Isolations)},
		env:        pgEnv, finalSQL: queryFinal, dsnOnly: true,
	},
	mysqlBackend,
}

func lookupBackend(name StoreName) (backend, bool) {
	for _, b := range backends {
		if b.name == name {
			return b, true
		}
	}
	return backend{}, false
}

func backendNames() string { return choice.List(StoreNames()) }

// StoreNames lists the stores in the order --store all runs them.
func StoreNames() []StoreName {
	var ns []StoreName
	for _, b := range backends {
		ns = append(ns, b.name)
	}
	return ns
}

// Available reports why a store cannot be launched on this machine, or nil when it can:
// what --store all uses to pick the stores it runs.
func Available(store StoreName) error {
	b, ok := lookupBackend(store)
	if !ok {
		return fmt.Errorf("unknown store %q", store)
	}
	return b.available()
}

// StoreFromDSN tells the store a DSN names by its scheme.
func StoreFromDSN(dsn string) (StoreName, bool) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok {
		return "", false
	}
	for _, b := range backends {
		if slices.Contains(b.schemes, scheme) {
			return b.name, true
		}
	}
	return "", false
}

// Supports reports whether store has the workload.
func Supports(store StoreName, workload workloads.Name) bool {
	b, ok := lookupBackend(store)
	return ok && slices.Contains(b.workloads, workload)
}

// ProtocolFor returns the commit-aware toxics' protocol for name: a store's name, one of
// its DSN schemes, or a protocol's own name (resp), or an API layer's (http, grpc, and
// grpc's h2c and http2). ok is false for any other name.
func ProtocolFor(name string) (p toxics.Protocol, ok bool) {
	for _, b := range append(slices.Clone(backends), apis...) {
		if b.protocol == nil {
			continue
		}
		if string(b.name) == name || b.protocol.Name() == name || slices.Contains(b.schemes, name) {
			return b.protocol, true
		}
	}
	return nil, false
}

// noWorkload is the error of a store asked for a workload it does not have.
func noWorkload(b backend, w workloads.Name) error {
	return fmt.Errorf("store %s has no workload %q (it has %s)", b.name, w, choice.List(b.workloads))
}

// checkChoice refuses a Mechanism or Isolation value (field) the store's workload does
// not have; an empty value picks the default.
func checkChoice(b backend, w workloads.Name, field, value string, choices map[workloads.Name][]string) error {
	if value == "" {
		return nil
	}
	what := strings.ToLower(field)
	have := choices[w]
	if len(have) == 0 {
		return refuse(field, "%s: the %s workload on %s has no %s to choose", value, w, b.name, what)
	}
	if !slices.Contains(have, value) {
		return refuse(field, "unknown %s %q for the %s workload on %s (want %s)", what, value, w, b.name, strings.Join(have, ", "))
	}
	return nil
}

// names converts a list of typed names to strings.
func names[T ~string](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = string(x)
	}
	return out
}

// unbound is the error of an open function given a workload the table does not list
// for its store: Config.defaults refuses those first.
func unbound(b StoreName, w workloads.Name) error {
	return fmt.Errorf("store %s cannot bind workload %q", b, w)
}

func launchPostgres(ctx context.Context, cfg Config, dir string) (launched, error) {
	if cfg.twoPhase() {
		return launchPostgresMany(ctx, cfg, dir)
	}
	if cfg.Topology == TopologyReplicated {
		return launchReplicatedPostgres(ctx, cfg, dir)
	}
	if cfg.Topology == TopologyPatroni {
		return launchPatroni(ctx, cfg, dir)
	}
	pg, err := pgserver.Start(ctx, pgserver.Options{LogPath: filepath.Join(dir, "postgres.log"),
		Settings: cfg.pgDurability(), DataFS: cfg.dataFS(), Version: cfg.PGVersion})
	if err != nil {
		return launched{}, err
	}
	return launched{dsn: pg.DSN, desc: "PostgreSQL " + pg.Version + " at " + pg.Addr + cfg.durabilityDesc(), stop: pg.Stop, ctl: pg}, nil
}

func openPostgres(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	switch cfg.Workload {
	case workloads.Budget:
		c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Dial: cfg.dial, Mechanism: postgres.Mechanism(cfg.Mechanism), MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			return nil, nil, err
		}
		return budget.New(c, cfg.Budget), c.Close, nil
	case workloads.Register:
		c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Dial: cfg.dial, MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			return nil, nil, err
		}
		return cfg.register(c.Register()), c.Close, nil
	case workloads.Counter:
		c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Dial: cfg.dial, MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			return nil, nil, err
		}
		k, err := postgres.NewCounter(c, postgres.CounterConfig{Mechanism: postgres.CounterMechanism(cfg.Mechanism), Isolation: postgres.Isolation(cfg.Isolation)})
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return counter.New(k), c.Close, nil
	case workloads.Insert:
		c, err := postgres.Open(ctx, postgres.Config{DSN: dsn, Dial: cfg.dial, MaxConns: int32(cfg.Workers + 4)})
		if err != nil {
			return nil, nil, err
		}
		return insert.New(c, insert.Key(cfg.Key)), c.Close, nil
	case workloads.ListAppend, workloads.RWRegister:
		return openPostgresTxn(ctx, cfg, dsn)
	}
	return nil, nil, unbound(Postgres, cfg.Workload)
}

func launchCockroach(ctx context.Context, _ Config, dir string) (launched, error) {
	return launched{}, fmt.Errorf("no CockroachDB can be launched here: give --dsn postgresql://root@HOST:26257/defaultdb?sslmode=disable (compose/ starts a three-node cluster)")
}

func openCockroach(ctx context.Context, cfg Config, dsn string) (workloads.Workload, func(), error) {
	if cfg.Workload != workloads.Counter && cfg.Workload != workloads.Insert {
		return nil, nil, unbound(Cockroach, cfg.Workload)
	}
	c, err := cockroach.Open(ctx, cockroach.Config{DSN: dsn, MaxConns: int32(cfg.Workers + 4)})
	if err != nil {
		return nil, nil, err
	}
	if cfg.Workload == workloads.Insert {
		return insert.New(c, insert.Key(cfg.Key)), c.Close, nil
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
		return "", fmt.Errorf("dsn %s has no port", redact.DSN(dsn))
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

// pgRewrite points a PostgreSQL URL at addr, without TLS unless it asks for it: the
// proxy cannot see commits inside TLS.
func pgRewrite(dsn, addr string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", err
	}
	u.Host = addr
	if q := u.Query(); q.Get("sslmode") == "" {
		q.Set("sslmode", "disable")
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
