package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/rundir"
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

// checkProgramHistory refuses what a program's history may not hold, before it is
// checked: an op id reserved for the final read (final, final-N) on an operation that
// is not a read (the check would take it for the final state, and the operations it
// stood for would go unchecked), and a header whose model is not the --model exec
// wrote there (a program that rewrote the header would choose its own checker).
func checkProgramHistory(model string, h *histories.Header, ops []histories.Op) error {
	if model != "" && h != nil && h.Model != model {
		return fmt.Errorf("exec: the program's history names model %q, but --model is %s: the program rewrote the header exec wrote; leave it as it is", cut(h.Model, 80), model)
	}
	for _, op := range ops {
		if !op.IsClient() || op.F == "read" {
			continue
		}
		if op.OpID == "final" || strings.HasPrefix(op.OpID, "final-") {
			return fmt.Errorf("exec: the program's history line of index %d: op id %q is reserved for the final read, and this is a %s: give the operation another op id", op.Index, cut(op.OpID, 80), cut(op.F, 40))
		}
	}
	return nil
}

// regularHistory errs unless the program's history at path is a regular file: one it
// replaced by a FIFO (which no one writes once it has ended), a device or a link to
// one would hold exec forever or never end.
func regularHistory(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil // a missing history is the reading's to report
	}
	return fmt.Errorf("exec: the program's history INDOUBT_HISTORY is %s, not a regular file: write the history to the file exec names", rundir.FileKind(fi.Mode()))
}
