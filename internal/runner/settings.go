package runner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/indoubt/indoubt/internal/catalog"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/twopc"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
	"github.com/indoubt/indoubt/workloads/txn"
)

// Setting is one run option, described once: the Config field it sets, its flag of
// indoubt run, its key in a suite case and in config.json, its default, what it applies
// to and its bounds. A suite's keys and defaults, the bounds and error names of indoubt
// run's flags, and a shrunk run's reproducer (Args) are read from Settings, so that
// every option a flag can set a suite case can set too, with the same default and the
// same bounds. (indoubt run declares its flags itself; its tests hold their names and
// defaults to this table.)
type Setting struct {
	// Field is the Config field, as a FieldError names it ("Workers", "Txn.Keys").
	Field string
	// Flag is indoubt run's flag, without its dashes; Key the suite case's key; JSON
	// the key of config.json.
	Flag, Key, JSON string
	// Default is the value a run takes when the option is not given, as the flag
	// writes it; "" when the zero value is the default (the runner's own choice).
	Default string
	// Applies says which workloads, stores or topologies the option is for; the runner
	// refuses it elsewhere (a FieldError).
	Applies string
	// Workloads, when set, are the only workloads the option applies to.
	Workloads []workloads.Name
	// List marks a repeatable flag (--fault, --dsn): a suite gives a list.
	List bool
	// Bool marks a flag without a value (--powerfs).
	Bool bool

	// set parses one value into c; bounds checks the value set, and is called only
	// for an option that was given (a zero left for the runner is not refused).
	set    func(c *Config, v string) error
	bounds func(c Config) error
	// get is the value in c as the flag writes it, nil when the run would take it
	// anyway (the default, or the zero value the runner fills in).
	get func(c Config) []string
}

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
// every setting's default that applies to w (the budget's balance only for budget, a
// transfer's reads only for transfer, the workload's retry policy).
func NewConfig(w workloads.Name) Config {
	c := Config{Workload: w}
	for _, s := range Settings {
		if s.Default == "" || s.Field == "Workload" {
			continue
		}
		if !s.AppliesTo(w) {
			continue
		}
		if err := s.set(&c, s.Default); err != nil {
			panic(fmt.Sprintf("runner: the default %q of %s: %v", s.Default, s.Field, err))
		}
	}
	c.Retry, _ = ParsePolicy(string(DefaultPolicy(w))) // the workload's own: never refused
	return c
}

// Args are the flags of indoubt run that make the run c describes: the store and
// workload, the counts and the seed, and every other setting that differs from what
// the run would take anyway, in the order of Settings. A DSN is written with its
// secrets masked (redact.DSN). The output directory is left out.
func Args(c Config) []string {
	var args []string
	for _, s := range Settings {
		if s.Field == "Out" || s.get == nil {
			continue
		}
		for _, v := range s.get(c) {
			if s.Bool {
				args = append(args, "--"+s.Flag)
				continue
			}
			args = append(args, "--"+s.Flag, v)
		}
	}
	return args
}

// Settings are the options of a run. Workload comes first: the defaults of several
// others follow it.
var Settings = []Setting{
	{Field: "Workload", Flag: "workload", Key: "workload", JSON: "workload", Default: string(workloads.Budget),
		Applies: "every run",
		set: func(c *Config, v string) error {
			w, err := catalog.Parse(v)
			if err != nil {
				return err
			}
			c.Workload = w
			return nil
		},
		get: func(c Config) []string { return []string{string(c.Workload)} }},
	{Field: "Store", Flag: "store", Key: "store", JSON: "store",
		Applies: "every run",
		set:     func(c *Config, v string) error { c.Store = StoreName(v); return nil },
		get:     func(c Config) []string { return str(string(c.Store)) }},
	{Field: "DSN", Flag: "dsn", Key: "dsn", JSON: "dsn", List: true,
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
		get: func(c Config) []string {
			var out []string
			for _, d := range append(str(c.DSN), c.DSNs...) {
				out = append(out, redact.DSN(d))
			}
			return out
		}},
	{Field: "Workers", Flag: "workers", Key: "workers", JSON: "workers", Default: "16",
		Applies: "every run (indoubt run: a comma list sweeps)",
		set:     intSet(func(c *Config) *int { return &c.Workers }),
		bounds: func(c Config) error {
			if c.Workers < 1 || c.Workers > 4096 {
				return fmt.Errorf("%d is not a worker count from 1 to 4096", c.Workers)
			}
			return nil
		},
		get: func(c Config) []string { return []string{strconv.Itoa(c.Workers)} }},
	{Field: "Ops", Flag: "ops", Key: "ops", JSON: "ops_per_worker", Default: "100",
		Applies: "every run without time",
		set:     intSet(func(c *Config) *int { return &c.Ops }),
		bounds: func(c Config) error {
			if c.Ops < 0 {
				return fmt.Errorf("must not be negative (got %d)", c.Ops)
			}
			return nil
		},
		get: func(c Config) []string {
			if c.Duration > 0 {
				return nil
			}
			return []string{strconv.Itoa(c.Ops)}
		}},
	{Field: "Duration", Flag: "time", Key: "time", JSON: "duration",
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
		get: durGet(func(c Config) time.Duration { return c.Duration }, 0)},
	{Field: "Seed", Flag: "seed", Key: "seed", JSON: "seed", Default: "1",
		Applies: "every run",
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 0, 64)
			if err != nil {
				return fmt.Errorf("%q is not an integer", v)
			}
			c.Seed = n
			return nil
		},
		get: func(c Config) []string { return []string{strconv.FormatInt(c.Seed, 10)} }},
	{Field: "Out", Flag: "out", JSON: "out", Default: "runs",
		Applies: "every run (a suite: indoubt suite --out)",
		set:     func(c *Config, v string) error { c.Out = v; return nil }},
	{Field: "Retry", Flag: "retry", Key: "retry", JSON: "retry",
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
	strSetting("Mechanism", "mechanism", "mechanism", "the store's mechanisms of the workload (indoubt run --help)",
		func(c *Config) *string { return &c.Mechanism }),
	strSetting("Isolation", "isolation", "isolation", "counter, list-append, rw-register",
		func(c *Config) *string { return &c.Isolation }),
	{Workloads: []workloads.Name{workloads.Budget}, Field: "Budget", Flag: "budget", Key: "budget", JSON: "budget", Default: "1000",
		Applies: "budget",
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(v, 0, 64)
			if err != nil {
				return fmt.Errorf("%q is not an integer", v)
			}
			c.Budget = n
			return nil
		},
		bounds: func(c Config) error {
			if c.Budget < 0 {
				return fmt.Errorf("must not be negative (got %d)", c.Budget)
			}
			return nil
		},
		get: func(c Config) []string {
			if c.Workload != workloads.Budget {
				return nil
			}
			return []string{strconv.FormatInt(c.Budget, 10)}
		}},
	forWorkloads(withDefault(strSetting("Key", "key", "key", "insert: the primary-key shape (indoubt run: a comma list, or all)",
		func(c *Config) *string { return &c.Key }), "identity"), workloads.Insert),
	{Workloads: []workloads.Name{workloads.Register}, Field: "Keys", Flag: "keys", Key: "keys", JSON: "keys", Applies: "register",
		set: intSet(func(c *Config) *int { return &c.Keys }), get: intGet(func(c Config) int { return c.Keys })},
	strSetting("Persistence", "persistence", "persistence", "a launched Redis",
		func(c *Config) *string { return &c.Persistence }),
	strSetting("SynchronousCommit", "synchronous-commit", "synchronous_commit", "a launched PostgreSQL",
		func(c *Config) *string { return &c.SynchronousCommit }),
	strSetting("Fsync", "fsync", "fsync", "a launched PostgreSQL",
		func(c *Config) *string { return &c.Fsync }),
	strSetting("CommitLogSync", "commitlog-sync", "commitlog_sync", "a launched Cassandra",
		func(c *Config) *string { return &c.CommitLogSync }),
	{Field: "PowerFS", Flag: "powerfs", Key: "powerfs", JSON: "powerfs", Bool: true,
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
	withDefault(strSetting("PowerFSEntries", "powerfs-entries", "powerfs_entries", "powerfs (ordered: a launched Cassandra)",
		func(c *Config) *string { return &c.PowerFSEntries }), "posix"),
	withDefault(strSetting("Topology", "topology", "topology", "a launched PostgreSQL, Redis or Cassandra: single or replicated",
		func(c *Config) *string { return &c.Topology }), TopologySingle),
	withDefault(strSetting("Replication", "replication", "replication", "the replicated topology (sync: PostgreSQL)",
		func(c *Config) *string { return &c.Replication }), "async"),
	strSetting("Network", "network", "network", "a launched topology: isolated (implied by partition:SHAPE@START-END)",
		func(c *Config) *string { return &c.Network }),
	strSetting("PGVersion", "pg-version", "pg_version", "a launched PostgreSQL",
		func(c *Config) *string { return &c.PGVersion }),
	{Field: "Faults", Flag: "fault", Key: "faults", JSON: "faults", List: true,
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
	withDefault(strSetting("Proxy", "proxy", "proxy", "every run: auto, on, off",
		func(c *Config) *string { return &c.Proxy }), "auto"),
	{Field: "CheckTimeout", Flag: "check-timeout", Key: "check_timeout", JSON: "check_timeout", Default: "1m0s",
		Applies: "the search checkers",
		set:     durSet(func(c *Config) *time.Duration { return &c.CheckTimeout }),
		bounds:  positive(func(c Config) time.Duration { return c.CheckTimeout }),
		get:     durGet(func(c Config) time.Duration { return c.CheckTimeout }, time.Minute)},
	{Field: "RecoveryWait", Flag: "recovery-wait", Key: "recovery_wait", JSON: "recovery_wait",
		Applies: "a timed run with process faults",
		set:     durSet(func(c *Config) *time.Duration { return &c.RecoveryWait }),
		bounds:  positive(func(c Config) time.Duration { return c.RecoveryWait }),
		get:     durGet(func(c Config) time.Duration { return c.RecoveryWait }, 0)},
	{Field: "MaxAnomalies", Flag: "max-anomalies", Key: "max_anomalies", JSON: "max_anomalies",
		Default: strconv.Itoa(results.DefaultMaxAnomalies), Applies: "every run",
		set: intSet(func(c *Config) *int { return &c.MaxAnomalies }),
		bounds: func(c Config) error {
			if c.MaxAnomalies < 1 && c.MaxAnomalies != -1 {
				return fmt.Errorf("must be at least 1, or -1 for all")
			}
			return nil
		},
		get: func(c Config) []string {
			if c.MaxAnomalies == 0 || c.MaxAnomalies == results.DefaultMaxAnomalies {
				return nil
			}
			return []string{strconv.Itoa(c.MaxAnomalies)}
		}},
	{Workloads: twoPhaseWorkloads, Field: "Servers", Flag: "servers", Key: "servers", JSON: "servers", Applies: "transfer, two-rows",
		set: intSet(func(c *Config) *int { return &c.Servers }), get: intGet(func(c Config) int { return c.Servers })},
	{Workloads: twoPhaseWorkloads, Field: "Placement", Flag: "placement", Key: "placement", JSON: "placement", Applies: "transfer, two-rows",
		set: func(c *Config, v string) error { c.Placement = transfer.Placement(v); return nil },
		get: func(c Config) []string { return str(string(c.Placement)) }},
	{Workloads: twoPhaseWorkloads, Field: "Coordinator", Flag: "coordinator", Key: "coordinator", JSON: "coordinator", Applies: "transfer, two-rows",
		set: func(c *Config, v string) error { c.Coordinator = twopc.Mode(v); return nil },
		get: func(c Config) []string { return str(string(c.Coordinator)) }},
	{Workloads: []workloads.Name{workloads.Transfer}, Field: "Reads", Flag: "reads", Key: "reads", JSON: "reads", Default: "0.1", Applies: "transfer",
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			c.Reads = f
			return nil
		},
		get: func(c Config) []string {
			if c.Workload != workloads.Transfer && c.Reads == 0 {
				return nil
			}
			return []string{strconv.FormatFloat(c.Reads, 'g', -1, 64)}
		}},
	{Workloads: twoPhaseWorkloads, Field: "RowsPerWorker", Flag: "rows-per-worker", Key: "rows_per_worker", JSON: "rows_per_worker", Applies: "transfer, two-rows",
		set: intSet(func(c *Config) *int { return &c.RowsPerWorker }), get: intGet(func(c Config) int { return c.RowsPerWorker })},
	{Workloads: twoPhaseWorkloads, Field: "RecoverAfter", Flag: "recover-after", Key: "recover_after", JSON: "recover_after", Applies: "transfer, two-rows",
		set:    durSet(func(c *Config) *time.Duration { return &c.RecoverAfter }),
		bounds: positive(func(c Config) time.Duration { return c.RecoverAfter }),
		get:    durGet(func(c Config) time.Duration { return c.RecoverAfter }, 0)},
	forWorkloads(strSetting("ReadFrom", "read-from", "read_from", "list-append, rw-register on a replicated PostgreSQL",
		func(c *Config) *string { return &c.ReadFrom }), txnWorkloads...),
	{Workloads: txnWorkloads, Field: "Txn.Keys", Flag: "txn-keys", Key: "txn_keys", JSON: "txn.keys", Applies: "list-append, rw-register",
		set: intSet(func(c *Config) *int { return &c.Txn.Keys }), get: intGet(func(c Config) int { return c.Txn.Keys })},
	{Workloads: txnWorkloads, Field: "Txn.MaxOps", Flag: "txn-ops", Key: "txn_ops", JSON: "txn.max_ops", Applies: "list-append, rw-register",
		set: intSet(func(c *Config) *int { return &c.Txn.MaxOps }), get: intGet(func(c Config) int { return c.Txn.MaxOps })},
	{Workloads: txnWorkloads, Field: "Txn.ReadFraction", Flag: "read-fraction", Key: "read_fraction", JSON: "txn.read_fraction", Applies: "list-append, rw-register",
		set: func(c *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("%q is not a number", v)
			}
			c.Txn.ReadFraction = f
			return nil
		},
		get: func(c Config) []string {
			if c.Txn.ReadFraction == 0 {
				return nil
			}
			return []string{strconv.FormatFloat(c.Txn.ReadFraction, 'g', -1, 64)}
		}},
	{Workloads: txnWorkloads, Field: "Txn.Distribution", Flag: "distribution", Key: "distribution", JSON: "txn.distribution", Applies: "list-append, rw-register",
		set: func(c *Config, v string) error { c.Txn.Distribution = txn.Distribution(v); return nil },
		get: func(c Config) []string { return str(string(c.Txn.Distribution)) }},
	{Workloads: txnWorkloads, Field: "Txn.Pattern", Flag: "pattern", Key: "pattern", JSON: "txn.pattern", Applies: "list-append, rw-register",
		set: func(c *Config, v string) error { c.Txn.Pattern = txn.Pattern(v); return nil },
		get: func(c Config) []string { return str(string(c.Txn.Pattern)) }},
	{Workloads: txnWorkloads, Field: "Txn.MaxWritesPerKey", Flag: "max-writes-per-key", Key: "max_writes_per_key", JSON: "txn.max_writes_per_key",
		Applies: "list-append, rw-register",
		set:     intSet(func(c *Config) *int { return &c.Txn.MaxWritesPerKey }),
		get:     intGet(func(c Config) int { return c.Txn.MaxWritesPerKey })},
	{Workloads: txnWorkloads, Field: "Txn.ConsistencyModels", Flag: "consistency-models", Key: "consistency_models", JSON: "txn.consistency_models",
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

func forWorkloads(s Setting, w ...workloads.Name) Setting { s.Workloads = w; return s }

func isTwoPhase(w workloads.Name) bool { return w == workloads.Transfer || w == workloads.TwoRows }

// str is v as a flag's values: none when empty.
func str(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

func strSetting(field, flag, key, applies string, p func(c *Config) *string) Setting {
	return Setting{Field: field, Flag: flag, Key: key, JSON: key, Applies: applies,
		set: func(c *Config, v string) error { *p(c) = v; return nil },
		get: func(c Config) []string { return str(*p(&c)) }}
}

// withDefault gives s a default, which Args then leaves out as it does "".
func withDefault(s Setting, def string) Setting {
	s.Default = def
	get := s.get
	s.get = func(c Config) []string {
		if v := get(c); len(v) == 1 && v[0] != def {
			return v
		}
		return nil
	}
	return s
}

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

func intGet(v func(c Config) int) func(c Config) []string {
	return func(c Config) []string {
		if v(c) == 0 {
			return nil
		}
		return []string{strconv.Itoa(v(c))}
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

func durGet(v func(c Config) time.Duration, def time.Duration) func(c Config) []string {
	return func(c Config) []string {
		if d := v(c); d > 0 && d != def {
			return []string{d.String()}
		}
		return nil
	}
}

// MaxRunTime bounds a run's time (--time, a suite case's time:): a run of more than a
// week is a typo (1000000h, 114 years, was taken), and the run clock's nanoseconds must
// hold every time of its history with room to spare.
const MaxRunTime = 7 * 24 * time.Hour

// positive bounds a duration setting to more than zero.
func positive(v func(c Config) time.Duration) func(c Config) error {
	return func(c Config) error {
		if d := v(c); d <= 0 {
			return fmt.Errorf("must be positive (got %v)", d)
		}
		return nil
	}
}
