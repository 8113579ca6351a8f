package shrink

import (
	"fmt"
	"regexp"

	"github.com/indoubt/indoubt/internal/runner"
)

// A run directory may come from elsewhere, and shrink re-runs what its config.json
// says: config.json is data, never instructions. What would have shrink run a program
// or reach a machine it names is refused unless the user names it on the command
// line:
//
//   - pg_version is a PostgreSQL version number ("15"); a path (a directory of
//     binaries, which the run's initdb and postgres would be run from) is refused.
//   - dsn and dsns name a server to connect to: the user gives it with --dsn, and a
//     DSN of config.json is never connected to. A run over several DSNs cannot be
//     re-run by shrink.

// pgVersion is what pg_version may hold: a major version number.
var pgVersion = regexp.MustCompile(`^[0-9]{1,3}$`)

// refuseInstructions errs when cfg, read from config.json, names a program to run or a
// server to connect to that dsn, the user's --dsn, does not stand for.
func refuseInstructions(cfg runner.Config, dsn string) error {
	if cfg.PGVersion != "" && !pgVersion.MatchString(cfg.PGVersion) {
		return fmt.Errorf("config.json's pg_version %.80q is not a PostgreSQL version number: shrink runs no program a run directory names (re-run it with indoubt run --pg-version)", cfg.PGVersion)
	}
	if len(cfg.DSNs) > 0 {
		return fmt.Errorf("the run was over %d servers (dsns in config.json): shrink connects to no server a run directory names, and one --dsn cannot stand for them", len(cfg.DSNs))
	}
	if cfg.DSN != "" && dsn == "" && masked(cfg.DSN) {
		return fmt.Errorf("the run's DSN %.200q has its password masked in config.json, and shrink connects to no server a run directory names: give it again with --dsn", cfg.DSN)
	}
	if cfg.DSN != "" && dsn == "" {
		return fmt.Errorf("the run was against a server of its own (a dsn in config.json): shrink connects to no server a run directory names; give it with --dsn")
	}
	return nil
}
