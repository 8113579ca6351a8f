package main

import "fmt"

// exec --keep: the launched PostgreSQL stops with the run, as always, but keeps its data
// directory, so that a user can look at the rows the verdict is about; the run ends
// saying how to start a server on it again and how to remove it.

// checkKeep refuses --keep where there is no launched PostgreSQL to keep.
func (a *execArgs) checkKeep() error {
	switch {
	case !a.keep:
		return nil
	case a.dsn != "" || a.upstream != "":
		return fmt.Errorf("exec: --keep keeps the data of the PostgreSQL exec launches; with --dsn or --upstream the server is yours, and its data stays where it is")
	case !a.store.Keeps():
		return fmt.Errorf("exec: --keep keeps a launched PostgreSQL's data directory; for %s give --dsn, a server of your own", a.store.Name())
	}
	return nil
}
