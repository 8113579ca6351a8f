package shrink

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/workloads"
)

// Command is the one-line `indoubt run` command that makes the run cfg describes: every
// setting that differs from the command line's default, the seed, and each fault as a
// --fault. A DSN is written with its secrets masked (redact.DSN): the command is printed
// and stored, so its reader puts the password back. The output directory is left out.
func Command(cfg runner.Config) string {
	args := []string{"indoubt", "run", "--store", string(cfg.Store), "--workload", string(cfg.Workload)}
	add := func(flag, v string) { args = append(args, "--"+flag, v) }
	if cfg.DSN != "" {
		add("dsn", redact.DSN(cfg.DSN))
	}
	for _, d := range cfg.DSNs {
		add("dsn", redact.DSN(d))
	}
	add("workers", strconv.Itoa(cfg.Workers))
	if cfg.Duration > 0 {
		add("time", dur(cfg.Duration))
	} else {
		add("ops", strconv.Itoa(cfg.Ops))
	}
	add("seed", strconv.FormatInt(cfg.Seed, 10))
	if cfg.Retry.Name != "" {
		add("retry", string(cfg.Retry.Name))
	}
	if cfg.Workload == workloads.Budget {
		add("budget", strconv.FormatInt(cfg.Budget, 10))
	}
	for _, s := range []struct{ flag, v string }{
		{"mechanism", cfg.Mechanism}, {"isolation", cfg.Isolation}, {"key", cfg.Key},
		{"persistence", cfg.Persistence}, {"synchronous-commit", cfg.SynchronousCommit}, {"fsync", cfg.Fsync},
		{"commitlog-sync", cfg.CommitLogSync}, {"pg-version", cfg.PGVersion},
		{"placement", string(cfg.Placement)}, {"coordinator", string(cfg.Coordinator)},
	} {
		if s.v != "" {
			add(s.flag, s.v)
		}
	}
	if cfg.Keys > 0 {
		add("keys", strconv.Itoa(cfg.Keys))
	}
	if cfg.PowerFS {
		args = append(args, "--powerfs")
	}
	if cfg.PowerFSEntries != "" && cfg.PowerFSEntries != "posix" {
		add("powerfs-entries", cfg.PowerFSEntries)
	}
	if cfg.Topology != "" && cfg.Topology != runner.TopologySingle {
		add("topology", cfg.Topology)
	}
	if cfg.Replication != "" && cfg.Replication != "async" {
		add("replication", cfg.Replication)
	}
	if cfg.Servers > 0 {
		add("servers", strconv.Itoa(cfg.Servers))
	}
	if cfg.Workload == workloads.Transfer || cfg.Reads != 0 {
		add("reads", strconv.FormatFloat(cfg.Reads, 'g', -1, 64))
	}
	if cfg.RowsPerWorker > 0 {
		add("rows-per-worker", strconv.Itoa(cfg.RowsPerWorker))
	}
	if cfg.RecoverAfter > 0 {
		add("recover-after", dur(cfg.RecoverAfter))
	}
	if cfg.Proxy != "" && cfg.Proxy != "auto" {
		add("proxy", cfg.Proxy)
	}
	if cfg.CheckTimeout > 0 && cfg.CheckTimeout != time.Minute {
		add("check-timeout", dur(cfg.CheckTimeout))
	}
	for _, f := range cfg.Faults {
		add("fault", f.Spec)
	}
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	return strings.Join(args, " ")
}

// dur writes a duration as Go parses it: 1.5s, 250ms, 0s.
func dur(d time.Duration) string { return d.String() }

var plainWord = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./~-]+$`)

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if plainWord.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
