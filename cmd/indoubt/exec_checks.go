package main

import (
	"fmt"
	"strings"

	"github.com/indoubt/indoubt/internal/runner"
)

// storeAgrees errs when --store names another store than the DSN's scheme does: a
// redis store over a postgres:// DSN used to be taken, and the proxy spoke the wrong
// protocol. A store that speaks the protocol of the DSN's agrees: CockroachDB speaks
// PostgreSQL's, and its DSNs are postgres:// ones.
func storeAgrees(name, dsn string) error {
	if name == "" || dsn == "" {
		return nil
	}
	s, ok := runner.StoreFromDSN(dsn)
	if !ok || string(s) == name {
		return nil
	}
	named, ok1 := runner.ProgramStore(name)
	of, ok2 := runner.ProgramStore(string(s))
	if ok1 && ok2 && named.Protocol() == of.Protocol() {
		return nil
	}
	scheme, _, _ := strings.Cut(dsn, "://")
	return fmt.Errorf("exec: --store %s, but the DSN's scheme %s:// is %s's: give the DSN of a %s server, or --store %s", name, scheme, s, name, s)
}
