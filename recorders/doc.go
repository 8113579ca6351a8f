// Package recorders holds history writers for programs not written in Go, each a single
// file with no dependencies that a user copies next to their program:
//
//	python/indoubt_history.py   Python 3.8+, standard library only
//	js/indoubt-history.mjs      Node (ESM), with js/indoubt-history.d.ts for TypeScript
//
// They write the history format of docs/history-format.md, which `indoubt exec` gives
// the program the path of in INDOUBT_HISTORY and `indoubt check` reads. python/examples
// and js/examples hold payments and transfer clients (psycopg, node-postgres) that use
// them, and python/examples/list_append.py and js/examples/list-append.mjs check their
// own transactions for isolation (the list-append model: READ COMMITTED caught,
// SERIALIZABLE valid).
//
// The package has no Go code of its own. Its tests run each recorder's own tests
// (pytest, node --test), hold both recorders to one contract with the Go helper
// (testdata/contract.json: call sequences and the history each must give, which
// indoubttest's TestRecorderContract runs against the Go helper), hold what the
// recorders write to the history schema and to indoubt's reader and checker, and run
// the payments and transfer clients through `indoubt exec` on PostgreSQL, to a verdict. scripts/test installs the clients' drivers into
// python/examples/.deps and js/examples/node_modules.
package recorders
