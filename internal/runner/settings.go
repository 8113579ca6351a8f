package runner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/indoubt/indoubt/internal/catalog"
	"github.com/indoubt/indoubt/internal/choice"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/schedule"
	pgserver "github.com/indoubt/indoubt/internal/servers/postgres"
	"github.com/indoubt/indoubt/internal/twopc"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/insert"
	"github.com/indoubt/indoubt/workloads/register"
	"github.com/indoubt/indoubt/workloads/transfer"
	"github.com/indoubt/indoubt/workloads/txn"
)

// Setting is one run option, described once: the Config field it sets, its flag of
// indoubt run, its key in a suite case and in config.json, the kind of value it takes,
// its default, its help, what it applies to and its bounds. indoubt run declares its
// flags from Settings (their kinds, defaults and help), indoubt run and a suite make a
// run's configuration from the options given with Configure, the runner fills in the
// defaults a Go caller left zero from it, shrink reads config.json with ReadConfig and
// writes its reproducer with Args: an option is added here, and nowhere else.
type Setting struct {
	// Field is the Config field, as a FieldError names it ("Workers", "Txn.Keys").
	Field string
	// Flag is indoubt run's flag, without its dashes; Key the suite case's key; JSON
	// the key of config.json, a dotted path into an object ("txn.keys", "retry.Name").
	Flag, Key, JSON string
	// Kind is the kind of value the option takes, as the flag parses it.
	Kind Kind
	// Default is the value a run takes when the option is not given, as the flag
	// writes it; "" when it depends on the run (the store's, the workload's).
	Default string
	// Zero says what the field's zero value means: how a run that is not given the
	// option comes to Default.
	Zero Zero
	// Help is the flag's help; indoubt run --help adds the default to it.
	Help string
	// Applies says which workloads, stores or topologies the option is for; the runner
	// refuses it elsewhere (a FieldError).
	Applies string
	// Workloads, when set, are the only workloads the option applies to.
	Workloads []workloads.Name
	// Sweep marks an option indoubt run takes as a comma list, making a run of each
	// value (--workers 1,4,16, --key all); a suite case gives one value.
	Sweep bool

	// set parses one value into c; bounds checks the value set, and is called only
	// for an option that was given (a zero left for the runner is not refused).
	set    func(c *Config, v string) error
	bounds func(c Config) error
	// get is the value in c as the flag writes it; nil when the field is zero.
	get func(c Config) []string
}

// Kind is the kind of value an option takes.
type Kind uint8

const (
	KindText     Kind = iota // a word or a comma list
	KindInt                  // an integer
	KindFloat                // a number
	KindDuration             // a Go duration: 1.5s, 250ms
	KindBool                 // a flag without a value: --powerfs
	KindList                 // repeatable: --fault, --dsn; a list in a suite
)

// Zero says what the zero value of an option's field means.
type Zero uint8

const (
	// ZeroIsValue: the zero value is a value of its own, or refused (a seed of 0, no
	// reads, 0 workers); indoubt run and a suite set Default (NewConfig), a Go caller
	// gives the field.
	ZeroIsValue Zero = iota
	// ZeroFilled: the zero value stands for Default, which the runner fills in before
	// the run (Validate), so that config.json says it.
	ZeroFilled
	// ZeroImplied: the zero value stands for Default, which the runner or the workload
	// applies where it is used; the field stays zero.
	ZeroImplied
)

// Set parses v into c's field, as the flag and the suite key do; the error says what
// is wrong without naming the field (wrap it in a FieldError to name it).
func (s Setting) Set(c *Config, v string) error { return s.set(c, v) }

// Bounds checks the value an option was given: a *FieldError naming s.Field.
func (s Setting) Bounds(c Config) error {
	if s.bounds == nil {
		return nil
	}
	if err := s.bounds(c); err != nil {
		return &FieldError{Field: s.Field, Err: err}
	}
	return nil
}

// SettingByFlag returns the setting of a flag of indoubt run.
func SettingByFlag(flag string) (Setting, bool) {
	for _, s := range Settings {
		if s.Flag == flag {
			return s, true
		}
	}
	return Setting{}, false
}

// SettingByKey returns the setting of a suite key.
func SettingByKey(key string) (Setting, bool) {
	for _, s := range Settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// SettingByField returns the setting of a Config field ("Txn.Keys"). DSNs is DSN's
// (one flag, one key, given once per server); Txn as a whole is named by its first
// setting, Txn.Keys.
func SettingByField(field string) (Setting, bool) {
	for _, s := range Settings {
		if s.Field == field {
			return s, true
		}
	}
	switch field {
	case "DSNs":
		return SettingByField("DSN")
	case "Txn":
		return SettingByField("Txn.Keys")
	}
	return Setting{}, false
}

// AppliesTo reports whether the option applies to workload w (Workloads); the store and
// topology it applies to are the runner's to check (Validate).
func (s Setting) AppliesTo(w workloads.Name) bool {
	return s.Workloads == nil || slices.Contains(s.Workloads, w)
}

// NewConfig is the configuration a run of workload w takes when nothing else is given:
// the default of every setting that applies to w, but those whose zero value stands
// for it (ZeroImplied), and the workload's retry policy.
func NewConfig(w workloads.Name) Config {
	c := Config{Workload: w}
	for _, s := range Settings {
		if s.Default == "" || s.Zero == ZeroImplied || s.Field == "Workload" || !s.AppliesTo(w) {
			continue
		}
		if err := s.set(&c, s.Default); err != nil {
			panic(fmt.Sprintf("runner: the default %q of %s: %v", s.Default, s.Field, err))
		}
	}
	c.Retry, _ = ParsePolicy(string(DefaultPolicy(w))) // the workload's own: never refused
	return c
}

// Filled is c with every field left zero whose zero value stands for its default
// (ZeroFilled) set to it, as a run fills it in (config.json records it so): two
// configurations that make the same run are equal once filled.
func (c Config) Filled() Config { c.fill(); return c }

// fill sets every field left zero whose zero value stands for its default
// (ZeroFilled), the workload first: the others' depend on it.
func (c *Config) fill() {
	for _, s := range Settings {
		if s.Zero != ZeroFilled || !s.AppliesTo(c.Workload) || s.get(*c) != nil {
			continue
		}
		if err := s.set(c, s.Default); err != nil {
			panic(fmt.Sprintf("runner: the default %q of %s: %v", s.Default, s.Field, err))
		}
	}
}

// Configure is the configuration of a run made of the options given, by Field, each
// as its flag writes it (one value; several for a KindList): the workload's, then every
// other setting's default (NewConfig), then each option given set and its bounds
// checked, in the order of Settings. indoubt run and a suite case make their runs
// with it, so that both read an option alike.
//
// An option given for a workload it does not apply to is refused here when it has a
// default that is a value of its own (ZeroIsValue: a budget, reads; the runner could
// not tell it was given); the runner refuses the others. Every error is a *FieldError
// naming the option's field.
func Configure(given map[string][]string) (Config, error) {
	w := workloads.Budget
	if v := given["Workload"]; len(v) > 0 {
		var err error
		if w, err = catalog.Parse(v[len(v)-1]); err != nil {
			return Config{}, &FieldError{Field: "Workload", Err: err}
		}
	}
	c := NewConfig(w)
	for _, s := range Settings {
		vals, ok := given[s.Field]
		if !ok || s.Field == "Workload" {
			continue
		}
		if !s.AppliesTo(w) && s.Default != "" && s.Zero == ZeroIsValue {
			return Config{}, &FieldError{Field: s.Field, Err: fmt.Errorf("does not apply to the %s workload", w)}
		}
		if s.Kind == KindList {
			clearList(&c, s.Field)
		}
		for _, v := range vals {
			if err := s.set(&c, v); err != nil {
				return Config{}, &FieldError{Field: s.Field, Err: err}
			}
		}
		if err := s.Bounds(c); err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

// clearList empties a repeatable option's field before the values given are read in.
func clearList(c *Config, field string) {
	switch field {
	case "Faults":
		c.Faults = nil
	case "DSN":
		c.DSN, c.DSNs = "", nil
	}
}

// Args are the flags of indoubt run that make the run c describes: the store and
// workload, the counts and the seed (every option whose zero value is a value of its
// own), and every other option set to other than its default, in the order of
// Settings. A DSN is written with its secrets masked (redact.DSN). The output
// directory is left out.
func Args(c Config) []string {
	var args []string
	for _, s := range Settings {
		vals := s.get(c)
		if vals == nil && s.Zero == ZeroIsValue && s.Default != "" && s.AppliesTo(c.Workload) && (s.Kind == KindInt || s.Kind == KindFloat) {
			vals = []string{"0"} // a value of its own, which the flag's default is not
		}
		switch {
		case s.Field == "Out" || len(vals) == 0:
			continue
		case s.Field == "Ops" && c.Duration != 0:
			continue // --time sets the run's length
		case s.Field != "Workload" && s.Zero != ZeroIsValue && len(vals) == 1 && vals[0] == s.Default:
			continue
		}
		for _, v := range vals {
			if s.Kind == KindBool {
				args = append(args, "--"+s.Flag)
				continue
			}
			args = append(args, "--"+s.Flag, v)
		}
	}
	return args
}

// Settings are the options of a run, in the order Args writes them. Workload comes
// first: the defaults of several others follow it.
var Settings = []Setting{
	{Field: "Workload", Flag: "workload", Key: "workload", JSON: "workload", Default: string(workloads.Budget), Zero: ZeroFilled,
		Help:    "workload: budget, register, counter, insert; list-append and rw-register (transactions of micro-ops, checked for isolation); transfer and two-rows (two-phase commit over several servers)",
		Applies: "every run",
		set: func(c *Config, v string) error {
			w, err := catalog.Parse(v)
			if err != nil {
				return err
			}
			c.Workload = w
			return nil
		},
		get: func(c Config) []string { return str(string(c.Workload)) }},
	{Field: "Store", Flag: "store", Key: "store", JSON: "store",
		Help:    "store: postgres, redis, mongo, cql, cockroach, mysql, etcd, or all (default: all launchable here; with --dsn, the DSN's scheme)",
		Applies: "every run",
		set:     func(c *Config, v string) error { c.Store = StoreName(v); return nil },
		get:     func(c Config) []string { return str(string(c.Store)) }},
	{Field: "DSN", Flag: "dsn", Key: "dsn", JSON: "dsn", Kind: KindList,
		Help:    "connect to this server instead of launching one (a URL, e.g. postgres://user@host:5432/db); transfer, two-rows: once per server, 2 to 5, prepared transactions on",
		Applies: "a server not launched by the run; transfer, two-rows: 2 to 5 (dsns in config.json)",
		set: func(c *Config, v string) error {
			if isTwoPhase(c.Workload) || c.DSN != "" || len(c.DSNs) > 0 {
				if c.DSN != "" {
					c.DSNs, c.DSN = append(c.DSNs, c.DSN), ""
				}
				c.DSNs = append(c.DSNs, v)
				return nil
			}
			c.DSN = v
			return nil
		},
		bounds: func(c Config) error {
			if !isTwoPhase(c.Workload) && len(c.DSNs) > 1 {
				return fmt.Errorf("given %d times: only the transfer and two-rows workloads run over several servers", len(c.DSNs))
			}
			return nil
		},
		get: func(c Config) []string {
			var out []string
			for _, d := range append(str(c.DSN), c.DSNs...) {
				out = append(out, redact.DSN(d))
			}
			return out
		}},
	{Field: "Workers", Flag: "workers", Key: "workers", JSON: "workers", Default: "16", Sweep: true,
		Help:    "concurrent workers; a comma list (1,4,16,32) runs one sweep row per count",
		Applies: "every run (indoubt run: a comma list sweeps)",
		set:     intSet(func(c *Config) *int { return &c.Workers }),
		bounds: func(c Config) error {
			if c.Workers < 1 || c.Workers > 4096 {
				return fmt.Errorf("%d is not a worker count from 1 to 4096", c.Workers)
			}
			return nil
		},
		get: intGet(func(c Config) int { return c.Workers })},
	{Field: "Ops", Flag: "ops", Key: "ops", JSON: "ops_per_worker", Kind: KindInt, Default: "100",
		Help:    "operations per worker (ignored with --time)",
		Applies: "every run without time",
		set:     intSet(func(c *Config) *int { return &c.Ops }),
		bounds:  notNegative(func(c Config) int { return c.Ops }),
		get:     intGet(func(c Config) int { return c.Ops })},
	{Field: "Duration", Flag: "time", Key: "time", JSON: "duration", Kind: KindDuration,
		Help:    "run for this long instead of a number of operations (e.g. 30s); with process faults, until an operation is acknowledged after the last one ended, at most --recovery-wait longer",
		Applies: "every run: for this long instead of a number of operations",
		set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("%q: want a duration such as 10s", v)
			}
			c.Duration, c.Ops = d, 0
			return nil
		},
		bounds: func(c Config) error {
			if err := positive(func(c Config) time.Duration { return c.Duration })(c); err != nil {
				return err
			}
			if c.Duration > MaxRunTime {
				return fmt.Errorf("must be at most %v (got %v): a run that long is a typo; split it into runs", MaxRunTime, c.Duration)
			}
			return nil
		},
		get: durGet(func(c Config) time.Duration { return c.Duration })},
	{Field: "Seed", Flag: "seed", Key: "seed", JSON: "seed", Kind: KindInt, Default: "1",
		Help:    "seed of every random choice (fault decisions, backoff, generators)",
		Applies: "every run",
		set:     int64Set(func(c *Config) *int64 { return &c.Seed }),
		get:     int64Get(func(c Config) int64 { return c.Seed })},
	{Field: "Out", Flag: "out", JSON: "out", Default: "runs", Zero: ZeroFilled,
		Help:    "parent directory of run directories",
		Applies: "every run (a suite: indoubt suite --out)",
		set:     func(c *Config, v string) error { c.Out = v; return nil },
		get:     func(c Config) []string { return str(c.Out) }},
	{Field: "Retry", Flag: "retry", Key: "retry", JSON: "retry.Name",
		Help:    "retry policy: none, conflict, naive, idempotent, driver (default none; conflict for the counter and the transactional workloads)",
		Applies: "every run; default none, conflict for the counter and the transactional workloads",
		set: func(c *Config, v string) error {
			p, err := ParsePolicy(v)
			if err != nil {
				return err
			}
			c.Retry = p
			return nil
		},
		get: func(c Config) []string { return str(string(c.Retry.Name)) }},
	textSetting("Mechanism", "mechanism", "mechanism", "the store's mechanisms of the workload (indoubt run --help)",
		"store mechanism: postgres budget: autocommit (default) or transaction; counter: increment (default), read-write, for-update",
		func(c *Config) *string { return &c.Mechanism }),
	textSetting("Isolation", "isolation", "isolation", "counter, list-append, rw-register",
		"counter: transaction isolation, verified in every transaction: serializable (default), repeatable-read, read-committed",
		func(c *Config) *string { return &c.Isolation }),
	{Workloads: []workloads.Name{workloads.Budget}, Field: "Budget", Flag: "budget", Key: "budget", JSON: "budget", Kind: KindInt, Default: "1000",
		Help:    "budget workload: the initial balance",
		Applies: "budget",
		set:     int64Set(func(c *Config) *int64 { return &c.Budget }),
		bounds:  notNegative(func(c Config) int64 { return c.Budget }),
		get:     int64Get(func(c Config) int64 { return c.Budget })},
	with(textSetting("Key", "key", "key", "insert: the primary-key shape (indoubt run: a comma list, or all)",
		"insert workload: primary-key shape, a comma list, or all: "+choice.List(insert.Keys),
		func(c *Config) *string { return &c.Key }), func(s *Setting) {
		s.Default, s.Zero, s.Sweep, s.Workloads = string(insert.Identity), ZeroFilled, true, []workloads.Name{workloads.Insert}
	}),
	{Workloads: []workloads.Name{workloads.Register}, Field: "Keys", Flag: "keys", Key: "keys", JSON: "keys", Kind: KindInt,
		Default: strconv.Itoa(register.DefaultKeys), Zero: ZeroImplied,
		Help:    "register workload: the number of registers",
		Applies: "register",
		set:     intSet(func(c *Config) *int { return &c.Keys }), get: intGet(func(c Config) int { return c.Keys })},
	textSetting("Persistence", "persistence", "persistence", "a launched Redis",
		"a launched Redis's durability: none (the default), everysec, always",
		func(c *Config) *string { return &c.Persistence }),
	textSetting("SynchronousCommit", "synchronous-commit", "synchronous_commit", "a launched PostgreSQL",
		"a launched PostgreSQL's synchronous_commit: on or off (default PostgreSQL's, on)",
		func(c *Config) *string { return &c.SynchronousCommit }),
	textSetting("Fsync", "fsync", "fsync", "a launched PostgreSQL",
		"a launched PostgreSQL's fsync: on or off (default PostgreSQL's, on)",
		func(c *Config) *string { return &c.Fsync }),
	textSetting("CommitLogSync", "commitlog-sync", "commitlog_sync", "a launched Cassandra",
		"a launched Cassandra's commitlog_sync: periodic (acknowledge at once, sync every 10000ms), batch (sync before acknowledging) or group (batch sharing a sync per 15ms window); default Cassandra's, periodic",
		func(c *Config) *string { return &c.CommitLogSync }),
	{Field: "PowerFS", Flag: "powerfs", Key: "powerfs", JSON: "powerfs", Kind: KindBool,
		Help:    "put a launched PostgreSQL's, Redis's or Cassandra's data directory on powerfs, which can forget what was never fsynced (implied by --fault power-loss@T; needs root and /dev/fuse)",
		Applies: "a launched PostgreSQL, Redis or Cassandra (implied by power-loss@T)",
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%q: want true or false", v)
			}
			c.PowerFS = b
			return nil
		},
		get: func(c Config) []string {
			if !c.PowerFS {
				return nil
			}
			return []string{"true"}
		}},
	filled(textSetting("PowerFSEntries", "powerfs-entries", "powerfs_entries", "powerfs (ordered: a launched Cassandra)",
		"powerfs's rule for new, removed and renamed names: posix (durable once their directory is fsynced) or ordered (a journaling filesystem's: any fsync makes earlier ones durable; launched Cassandra only)",
		func(c *Config) *string { return &c.PowerFSEntries }), EntriesPOSIX),
	filled(textSetting("Topology", "topology", "topology", "a launched PostgreSQL, Redis or Cassandra: single or replicated",
		"launched server: single, replicated (PostgreSQL: a primary and a streaming standby; Redis: a primary, a replica and 3 Sentinels; etcd: 3 members; --fault failover@T), or patroni (PostgreSQL: 3 nodes under Patroni with an etcd DCS; --replication sync for its synchronous mode)",
		func(c *Config) *string { return &c.Topology }), TopologySingle),
	filled(textSetting("Replication", "replication", "replication", "the replicated topology (sync: PostgreSQL)",
		"replicated topology: async, or sync (every commit waits for the standby; PostgreSQL only)",
		func(c *Config) *string { return &c.Replication }), pgserver.ReplicationAsync),
	textSetting("Network", "network", "network", "a launched topology: isolated (implied by partition:SHAPE@START-END)",
		"isolated: every launched node in a network namespace of its own (root and nftables; implied by --fault partition:SHAPE@START-END; Redis replicated is then Jepsen's five nodes)",
		func(c *Config) *string { return &c.Network }),
	textSetting("PGVersion", "pg-version", "pg_version", "a launched PostgreSQL",
		"a launched PostgreSQL's version: 15, 18 (scripts/prepare-postgres18), or a directory of its binaries (default: INDOUBT_PG_VERSION, INDOUBT_PG_BIN, else the installed one)",
		func(c *Config) *string { return &c.PGVersion }),
	{Field: "Faults", Flag: "fault", Key: "faults", JSON: "faults", Kind: KindList,
		Help:    "fault NAME[:P][@START-END], repeatable: commit-cut, commit-drop, commit-mixed, latency, ...; on a launched server kill@START-END, pause@START-END, restart@T, failover@T, power-loss[:tear]@T; transfer, two-rows: prepare-cut, prepare-drop, coordinator-crash@T",
		Applies: "each fault its stores and topologies (docs/faults.md)",
		set: func(c *Config, v string) error {
			specs := append(specs(c.Faults), v)
			s, err := schedule.Parse(specs)
			if err != nil {
				return err
			}
			c.Faults = s
			return nil
		},
		get: func(c Config) []string { return specs(c.Faults) }},
	filled(textSetting("Proxy", "proxy", "proxy", "every run: auto, on, off",
		"put the fault proxy in front: auto (when --fault is given), on, off",
		func(c *Config) *string { return &c.Proxy }), "auto"),
	{Field: "CheckTimeout", Flag: "check-timeout", Key: "check_timeout", JSON: "check_timeout", Kind: KindDuration,
		Default: time.Minute.String(), Zero: ZeroFilled,
		Help:    "longest a search checker may take before the verdict is unknown",
		Applies: "the search checkers",
		set:     durSet(func(c *Config) *time.Duration { return &c.CheckTimeout }),
		bounds:  positive(func(c Config) time.Duration { return c.CheckTimeout }),
		get:     durGet(func(c Config) time.Duration { return c.CheckTimeout })},
	{Field: "RecoveryWait", Flag: "recovery-wait", Key: "recovery_wait", JSON: "recovery_wait", Kind: KindDuration,
		Default: RecoveryWait.String(), Zero: ZeroImplied,
		Help:    "a --time run with process faults: how long past --time it goes on, at most, for an operation acknowledged after the last fault",
		Applies: "a timed run with process faults",
		set:     durSet(func(c *Config) *time.Duration { return &c.RecoveryWait }),
		bounds:  positive(func(c Config) time.Duration { return c.RecoveryWait }),
		get:     durGet(func(c Config) time.Duration { return c.RecoveryWait })},
	{Field: "MaxAnomalies", Flag: "max-anomalies", Key: "max_anomalies", JSON: "max_anomalies", Kind: KindInt,
		Default: strconv.Itoa(results.DefaultMaxAnomalies), Zero: ZeroFilled,
		Help:    "list at most this many anomalies and ground-truth items in results.json and the console (counts stay exact; -1 lists all)",
		Applies: "every run",
		set:     intSet(func(c *Config) *int { return &c.MaxAnomalies }),
		bounds: func(c Config) error {
			if c.MaxAnomalies < 1 && c.MaxAnomalies != -1 {
				return fmt.Errorf("must be at least 1, or -1 for all")
			}
			return nil
		},
		get: intGet(func(c Config) int { return c.MaxAnomalies })},
	{Workloads: twoPhaseWorkloads, Field: "Servers", Flag: "servers", Key: "servers", JSON: "servers", Kind: KindInt,
		Default: strconv.Itoa(minServers), Zero: ZeroImplied, // as many as the DSNs given, else the default
		Help:    fmt.Sprintf("transfer, two-rows: PostgreSQL servers to launch, %d to %d", minServers, maxServers),
		Applies: "transfer, two-rows",
		set:     intSet(func(c *Config) *int { return &c.Servers }), get: intGet(func(c Config) int { return c.Servers })},
	{Workloads: twoPhaseWorkloads, Field: "Placement", Flag: "placement", Key: "placement", JSON: "placement",
		Default: string(transfer.Distributed), Zero: ZeroFilled,
		Help:    "transfer, two-rows: local (both rows on one server) or distributed (on two, two-phase commit)",
		Applies: "transfer, two-rows",
		set:     func(c *Config, v string) error { c.Placement = transfer.Placement(v); return nil },
		get:     func(c Config) []string { return str(string(c.Placement)) }},
	{Workloads: twoPhaseWorkloads, Field: "Coordinator", Flag: "coordinator", Key: "coordinator", JSON: "coordinator",
		Default: string(twopc.Logged), Zero: ZeroFilled,
		Help:    "transfer, two-rows: logged (decision log, presumed abort) or naive (recovery commits whatever is prepared)",
		Applies: "transfer, two-rows",
		set:     func(c *Config, v string) error { c.Coordinator = twopc.Mode(v); return nil },
		get:     func(c Config) []string { return str(string(c.Coordinator)) }},
	{Workloads: []workloads.Name{workloads.Transfer}, Field: "Reads", Flag: "reads", Key: "reads", JSON: "reads", Kind: KindFloat, Default: "0.1",
		Help:    "transfer: share of the operations that read the total across the servers",
		Applies: "transfer",
		set:     floatSet(func(c *Config) *float64 { return &c.Reads }),
		get:     floatGet(func(c Config) float64 { return c.Reads })},
	{Workloads: twoPhaseWorkloads, Field: "RowsPerWorker", Flag: "rows-per-worker", Key: "rows_per_worker", JSON: "rows_per_worker", Kind: KindInt,
		Default: strconv.Itoa(defaultRowsPerWorker), Zero: ZeroFilled,
		Help:    "transfer, two-rows: rows of the table per worker",
		Applies: "transfer, two-rows",
		set:     intSet(func(c *Config) *int { return &c.RowsPerWorker }), get: intGet(func(c Config) int { return c.RowsPerWorker })},
	{Workloads: twoPhaseWorkloads, Field: "RecoverAfter", Flag: "recover-after", Key: "recover_after", JSON: "recover_after", Kind: KindDuration,
		Default: time.Second.String(), Zero: ZeroFilled,
		Help:    "transfer, two-rows: after coordinator-crash@T, how long its transactions stay in doubt before recovery",
		Applies: "transfer, two-rows",
		set:     durSet(func(c *Config) *time.Duration { return &c.RecoverAfter }),
		bounds:  positive(func(c Config) time.Duration { return c.RecoverAfter }),
		get:     durGet(func(c Config) time.Duration { return c.RecoverAfter })},
	with(textSetting("ReadFrom", "read-from", "read_from", "list-append, rw-register on a replicated PostgreSQL",
		"list-append, rw-register on --topology replicated PostgreSQL: where read-only transactions run, primary or standby",
		func(c *Config) *string { return &c.ReadFrom }), func(s *Setting) {
		s.Default, s.Zero, s.Workloads = ReadFromPrimary, ZeroImplied, txnWorkloads
	}),
	{Workloads: txnWorkloads, Field: "Txn.Keys", Flag: "txn-keys", Key: "txn_keys", JSON: "txn.keys", Kind: KindInt,
		Default: strconv.Itoa(txn.DefaultKeys), Zero: ZeroImplied,
		Help:    "list-append, rw-register: keys active at a time",
		Applies: "list-append, rw-register",
		set:     intSet(func(c *Config) *int { return &c.Txn.Keys }), get: intGet(func(c Config) int { return c.Txn.Keys })},
	{Workloads: txnWorkloads, Field: "Txn.MaxOps", Flag: "txn-ops", Key: "txn_ops", JSON: "txn.max_ops", Kind: KindInt,
		Default: strconv.Itoa(txn.DefaultMaxOps), Zero: ZeroImplied,
		Help:    "list-append, rw-register: at most this many micro-ops a transaction",
		Applies: "list-append, rw-register",
		set:     intSet(func(c *Config) *int { return &c.Txn.MaxOps }), get: intGet(func(c Config) int { return c.Txn.MaxOps })},
	{Workloads: txnWorkloads, Field: "Txn.ReadFraction", Flag: "read-fraction", Key: "read_fraction", JSON: "txn.read_fraction", Kind: KindFloat,
		Default: strconv.FormatFloat(txn.DefaultReadFraction, 'g', -1, 64), Zero: ZeroImplied,
		Help:    "list-append, rw-register: probability that a micro-op is a read",
		Applies: "list-append, rw-register",
		set:     floatSet(func(c *Config) *float64 { return &c.Txn.ReadFraction }),
		get:     floatGet(func(c Config) float64 { return c.Txn.ReadFraction })},
	{Workloads: txnWorkloads, Field: "Txn.Distribution", Flag: "distribution", Key: "distribution", JSON: "txn.distribution",
		Default: string(txn.Uniform), Zero: ZeroImplied,
		Help:    "list-append, rw-register: key distribution, uniform or zipf",
		Applies: "list-append, rw-register",
		set:     func(c *Config, v string) error { c.Txn.Distribution = txn.Distribution(v); return nil },
		get:     func(c Config) []string { return str(string(c.Txn.Distribution)) }},
	{Workloads: txnWorkloads, Field: "Txn.Pattern", Flag: "pattern", Key: "pattern", JSON: "txn.pattern",
		Default: string(txn.Random), Zero: ZeroImplied,
		Help:    "list-append, rw-register: random or read-modify-write transactions",
		Applies: "list-append, rw-register",
		set:     func(c *Config, v string) error { c.Txn.Pattern = txn.Pattern(v); return nil },
		get:     func(c Config) []string { return str(string(c.Txn.Pattern)) }},
	{Workloads: txnWorkloads, Field: "Txn.MaxWritesPerKey", Flag: "max-writes-per-key", Key: "max_writes_per_key", JSON: "txn.max_writes_per_key", Kind: KindInt,
		Default: strconv.Itoa(txn.DefaultMaxWritesPerKey), Zero: ZeroImplied,
		Help:    "list-append, rw-register: writes to a key before a fresh key replaces it",
		Applies: "list-append, rw-register",
		set:     intSet(func(c *Config) *int { return &c.Txn.MaxWritesPerKey }),
		get:     intGet(func(c Config) int { return c.Txn.MaxWritesPerKey })},
	{Workloads: txnWorkloads, Field: "Txn.ConsistencyModels", Flag: "consistency-models", Key: "consistency_models", JSON: "txn.consistency_models",
		Help:    "list-append, rw-register: the models the history is checked for, comma-separated (default: the store's promise, e.g. serializable)",
		Applies: "list-append, rw-register: comma-separated",
		set: func(c *Config, v string) error {
			c.Txn.ConsistencyModels = nil
			for _, m := range strings.Split(v, ",") {
				c.Txn.ConsistencyModels = append(c.Txn.ConsistencyModels, strings.TrimSpace(m))
			}
			return nil
		},
		get: func(c Config) []string {
			if len(c.Txn.ConsistencyModels) == 0 {
				return nil
			}
			return []string{strings.Join(c.Txn.ConsistencyModels, ",")}
		}},
}

var twoPhaseWorkloads = []workloads.Name{workloads.Transfer, workloads.TwoRows}

func isTwoPhase(w workloads.Name) bool { return w == workloads.Transfer || w == workloads.TwoRows }

// str is v as a flag's values: none when empty.
func str(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// textSetting is a setting of a word, which the runner checks.
func textSetting(field, flag, key, applies, help string, p func(c *Config) *string) Setting {
	return Setting{Field: field, Flag: flag, Key: key, JSON: key, Applies: applies, Help: help,
		set: func(c *Config, v string) error { *p(c) = v; return nil },
		get: func(c Config) []string { return str(*p(&c)) }}
}

// filled gives s a default that its zero value stands for, and the runner fills in.
func filled(s Setting, def string) Setting {
	s.Default, s.Zero = def, ZeroFilled
	return s
}

// with is s changed by f.
func with(s Setting, f func(s *Setting)) Setting { f(&s); return s }

func intSet(p func(c *Config) *int) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		*p(c) = n
		return nil
	}
}

func int64Set(p func(c *Config) *int64) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		n, err := strconv.ParseInt(v, 0, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", v)
		}
		*p(c) = n
		return nil
	}
}

func intGet(v func(c Config) int) func(c Config) []string {
	return int64Get(func(c Config) int64 { return int64(v(c)) })
}

func int64Get(v func(c Config) int64) func(c Config) []string {
	return func(c Config) []string {
		if v(c) == 0 {
			return nil
		}
		return []string{strconv.FormatInt(v(c), 10)}
	}
}

func floatSet(p func(c *Config) *float64) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", v)
		}
		*p(c) = f
		return nil
	}
}

func floatGet(v func(c Config) float64) func(c Config) []string {
	return func(c Config) []string {
		if v(c) == 0 {
			return nil
		}
		return []string{strconv.FormatFloat(v(c), 'g', -1, 64)}
	}
}

func durSet(p func(c *Config) *time.Duration) func(c *Config, v string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("%q: want a duration such as 1s", v)
		}
		*p(c) = d
		return nil
	}
}

func durGet(v func(c Config) time.Duration) func(c Config) []string {
	return func(c Config) []string {
		if d := v(c); d != 0 {
			return []string{d.String()}
		}
		return nil
	}
}

// MaxRunTime bounds a run's time (--time, a suite case's time:): a run of more than a
// week is a typo (1000000h, 114 years, was taken), and the run clock's nanoseconds must
// hold every time of its history with room to spare.
const MaxRunTime = 7 * 24 * time.Hour

// notNegative is the bounds of a count that may be zero.
func notNegative[T int | int64](v func(c Config) T) func(c Config) error {
	return func(c Config) error {
		if n := v(c); n < 0 {
			return fmt.Errorf("must not be negative (got %d)", n)
		}
		return nil
	}
}

// positive bounds a duration setting to more than zero.
func positive(v func(c Config) time.Duration) func(c Config) error {
	return func(c Config) error {
		if d := v(c); d <= 0 {
			return fmt.Errorf("must be positive (got %v)", d)
		}
		return nil
	}
}
