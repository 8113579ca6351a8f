package runner

import (
	"errors"
	"fmt"
	"regexp"
	"slices"

	redisserver "github.com/indoubt/indoubt/internal/servers/redis"

	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/twopc"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/transfer"
)

// FieldError is a configuration refused for one of its fields. Field names the Config
// field ("Workers"); Err says what is wrong in words that do not name it, so that each
// caller names the field its own way: the command line as its flag (--workers), a suite
// as its key (workers:), a Go caller as Config.Workers (Error's text). Where the reason
// involves another field, Err's text names it in braces ("drop {DSN}"), and Text puts
// the caller's name for it there.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	return "Config." + e.Field + ": " + e.Text(func(f string) string { return "Config." + f })
}

func (e *FieldError) Unwrap() error { return e.Err }

// Text is what is wrong, with each field named in braces in the words of name
// (name("DSN") might give "--dsn").
func (e *FieldError) Text(name func(field string) string) string {
	return fieldRef.ReplaceAllStringFunc(e.Err.Error(), func(m string) string { return name(m[1 : len(m)-1]) })
}

// fieldRef is a field named in braces in a FieldError's text.
var fieldRef = regexp.MustCompile(`\{[A-Z][A-Za-z]*\}`)

// refuse is the error of a configuration refused for field: a FieldError, wrapped with
// ErrCouldNotRun.
func refuse(field, format string, a ...any) error {
	return fmt.Errorf("%w: %w", ErrCouldNotRun, &FieldError{Field: field, Err: fmt.Errorf(format, a...)})
}

// ErrUnavailable marks a store whose server cannot be launched on this machine (its
// binaries are missing): the run needs a DSN, or another machine.
var ErrUnavailable = errors.New("cannot be launched here")

// defaults checks the configuration and fills in what was left zero. Every error wraps
// ErrCouldNotRun; one that is about a single field is a FieldError.
func (c *Config) defaults() error {
	c.fill()
	if c.Store == "" {
		c.Store = Postgres
	}
	b, ok := lookupBackend(c.Store)
	if !ok {
		return refuse("Store", "unknown store %q (want one of %s)", c.Store, backendNames())
	}
	if !slices.Contains(b.workloads, c.Workload) {
		return refuse("Workload", "%v", noWorkload(b, c.Workload))
	}
	if err := checkChoice(b, c.Workload, "Mechanism", c.Mechanism, b.mechanisms); err != nil {
		return err
	}
	if err := checkChoice(b, c.Workload, "Isolation", c.Isolation, b.isolations); err != nil {
		return err
	}
	if err := c.checkApplies(); err != nil {
		return err
	}
	if err := c.checkTxn(); err != nil {
		return err
	}
	if err := c.checkKeys(); err != nil {
		return err
	}
	if c.Workers <= 0 {
		return refuse("Workers", "must be at least 1 (got %d)", c.Workers)
	}
	if c.Ops < 0 {
		return refuse("Ops", "must not be negative (got %d)", c.Ops)
	}
	if c.Duration < 0 {
		return refuse("Duration", "must not be negative (got %v)", c.Duration)
	}
	if c.Ops == 0 && c.Duration == 0 {
		return refuse("Ops", "give a number of operations per worker, or a duration")
	}
	if c.Retry.Name == "" {
		p, _ := ParsePolicy(string(DefaultPolicy(c.Workload)))
		c.Retry = p
	}
	if c.Proxy != "auto" && c.Proxy != "on" && c.Proxy != "off" {
		return refuse("Proxy", "%q: want auto, on or off", c.Proxy)
	}
	if c.Proxy == "off" && len(c.Faults.OnProxy()) > 0 {
		return refuse("Proxy", "off, but the faults need the proxy")
	}
	if err := c.checkWindows(); err != nil {
		return err
	}
	if c.twoPhase() {
		if err := c.twoPhaseDefaults(); err != nil {
			return err
		}
	}
	if err := checkNetwork(*c); err != nil {
		return err
	}
	if err := checkProcessFaults(*c); err != nil {
		return err
	}
	if err := checkDurability(*c); err != nil {
		return err
	}
	switch {
	case c.RecoveryWait < 0:
		return refuse("RecoveryWait", "must not be negative (got %v)", c.RecoveryWait)
	case c.RecoveryWait > 0 && (c.Duration == 0 || len(c.Faults.Processes()) == 0):
		return refuse("RecoveryWait", "applies to a timed run with a process fault (%s)", schedule.ProcessFaults)
	}
	if c.CheckTimeout < 0 {
		return refuse("CheckTimeout", "must not be negative (got %v)", c.CheckTimeout)
	}
	// Last: a bad setting is refused the same way on every machine.
	if c.DSN == "" && len(c.DSNs) == 0 {
		if err := b.available(); err != nil {
			return refuse("Store", "%w: %w", ErrUnavailable, err)
		}
	}
	return nil
}

// checkApplies refuses a setting that does not apply to the run's store or workload:
// set, it would be silently ignored.
func (c *Config) checkApplies() error {
	launchedOnly := func(field, what string) error {
		return refuse(field, "sets %s, not %s", what, c.Store)
	}
	switch {
	case !slices.Contains(persistences, c.Persistence):
		return refuse("Persistence", "%q: want none, everysec or always", c.Persistence)
	case c.Persistence != "" && c.Store != Redis:
		return launchedOnly("Persistence", "a launched Redis's persistence")
	case c.CommitLogSync != "" && c.Store != CQL:
		return launchedOnly("CommitLogSync", "a launched Cassandra's commitlog_sync")
	case c.SynchronousCommit != "" && (c.Store != Postgres || c.twoPhase()):
		return launchedOnly("SynchronousCommit", "one launched PostgreSQL's synchronous_commit (budget, register, counter, insert)")
	case c.Fsync != "" && (c.Store != Postgres || c.twoPhase()):
		return launchedOnly("Fsync", "one launched PostgreSQL's fsync (budget, register, counter, insert)")
	case c.Key != "" && c.Workload != workloads.Insert:
		return refuse("Key", "is the insert workload's primary-key shape, not %s's", c.Workload)
	}
	for _, f := range c.Faults {
		if (f.Coordinator || f.Statement != "") && !c.twoPhase() {
			return refuse("Faults", "%q acts on two-phase commit: the transfer and two-rows workloads, not %s", f.Spec, c.Workload)
		}
	}
	if c.twoPhase() {
		return nil
	}
	// The two-phase commit settings.
	for _, s := range []struct {
		field string
		set   bool
	}{
		{"Servers", c.Servers != 0}, {"DSNs", len(c.DSNs) > 0}, {"Placement", c.Placement != ""},
		{"Coordinator", c.Coordinator != ""}, {"Reads", c.Reads != 0}, {"RowsPerWorker", c.RowsPerWorker != 0},
		{"RecoverAfter", c.RecoverAfter != 0},
	} {
		if s.set {
			return refuse(s.field, "applies to the two-phase commit workloads (transfer, two-rows), not %s", c.Workload)
		}
	}
	return nil
}

// checkWindows refuses a fault that would start after a run of a known length has
// ended: it would never fire, and the run would pass for one that met it. A run sized
// by operations has no known end: the runner warns after it instead (unapplied).
func (c *Config) checkWindows() error {
	if c.Duration <= 0 {
		return nil
	}
	for _, f := range c.Faults {
		if f.Start >= c.Duration {
			return refuse("Faults", "%q starts at %v, when the run is over (it lasts %v)", f.Spec, f.Start, c.Duration)
		}
	}
	return nil
}

// twoPhase reports whether the run is of a two-phase commit workload.
func (c Config) twoPhase() bool {
	return c.Workload == workloads.Transfer || c.Workload == workloads.TwoRows
}

// Limits and defaults of a two-phase commit run (Settings).
const (
	minServers           = 2
	maxServers           = 5
	defaultRowsPerWorker = 1000
)

// twoPhaseDefaults checks and fills in the settings of a two-phase commit run.
func (c *Config) twoPhaseDefaults() error {
	switch {
	case c.DSN != "":
		return refuse("DSN", "names one server; the %s workload runs over several: give them as DSNs", c.Workload)
	case len(c.DSNs) > 0 && (len(c.DSNs) < minServers || len(c.DSNs) > maxServers):
		return refuse("DSNs", "%d servers given: the %s workload runs over %d to %d", len(c.DSNs), c.Workload, minServers, maxServers)
	case len(c.DSNs) > 0 && c.Servers != 0 && c.Servers != len(c.DSNs):
		return refuse("Servers", "is %d, but %d DSNs are given", c.Servers, len(c.DSNs))
	case len(c.DSNs) > 0:
		c.Servers = len(c.DSNs)
	case c.Servers == 0:
		c.Servers = minServers
	}
	if c.Servers < minServers || c.Servers > maxServers {
		return refuse("Servers", "must be %d to %d (got %d)", minServers, maxServers, c.Servers)
	}
	if _, err := transfer.ParsePlacement(string(c.Placement)); err != nil {
		return refuse("Placement", "%w", err)
	}
	if _, err := twopc.ParseMode(string(c.Coordinator)); err != nil {
		return refuse("Coordinator", "%w", err)
	}
	switch {
	case c.Reads < 0 || c.Reads > 1:
		return refuse("Reads", "must be from 0 to 1 (got %v)", c.Reads)
	case c.Reads > 0 && c.Workload != workloads.Transfer:
		return refuse("Reads", "applies to the transfer workload (the share of its operations that read the total), not two-rows")
	case c.RowsPerWorker < 0 || c.RowsPerWorker == 1:
		return refuse("RowsPerWorker", "must be at least 2 (got %d)", c.RowsPerWorker)
	case c.RecoverAfter < 0:
		return refuse("RecoverAfter", "must not be negative (got %v)", c.RecoverAfter)
	case c.Retry.Name != "" && c.Retry.Name != NoRetry:
		return refuse("Retry", "%s: the %s workload runs each transaction once (a retry of one left in doubt would reuse its gid); want none", c.Retry.Name, c.Workload)
	case c.Topology != "" && c.Topology != TopologySingle:
		return refuse("Topology", "%s: the %s workload launches independent servers of its own", c.Topology, c.Workload)
	case c.PowerFS || c.PowerFSEntries == EntriesOrdered:
		return refuse("PowerFS", "applies to one launched server, not to the %s workload's", c.Workload)
	}
	if rows := c.RowsPerWorker * c.Workers; rows/c.Servers < 2 {
		return refuse("RowsPerWorker", "%d rows for %d workers leave fewer than 2 on each of %d servers", c.RowsPerWorker, c.Workers, c.Servers)
	}
	phase := ""
	for _, f := range c.Faults {
		switch {
		case f.Process:
			return refuse("Faults", "%q acts on one launched server; the %s workload takes the proxy's faults and coordinator-crash@T", f.Spec, c.Workload)
		case f.Coordinator && c.Placement != transfer.Distributed:
			return refuse("Faults", "%q needs the distributed placement: local transactions have no coordinator", f.Spec)
		case f.Coordinator || f.Toxic != nil || f.Name == "partition":
			continue
		}
		at := schedule.PrepareStatement
		if f.Statement == "" {
			at = commitPrepared
		}
		if phase != "" && phase != at {
			return refuse("Faults", "%q cuts at %s, and another fault at %s: the proxy matches one statement, give faults of one phase", f.Spec, at, phase)
		}
		phase = at
	}
	return nil
}

// commitPrepared is the statement the commit faults of a two-phase commit run act on.
const commitPrepared = "COMMIT PREPARED"

// persistences are the Persistence values; "" is none.
var persistences = []string{"", redisserver.NoPersistence, redisserver.EverySec, redisserver.Always}
