// Package twopc is indoubt's own two-phase commit over several PostgreSQL servers: a
// coordinator, its decision log and its recovery, and the table of the transfer and
// two-rows workloads spread over the servers (Cluster, a transfer.Store). The runner
// drives the runs (internal/runner); this package owns the protocol.
//
// The coordinator (Coordinator) runs BEGIN and the work on every participant, PREPARE
// TRANSACTION on each in turn, then decides. The logged coordinator writes the commit
// decision (gid, participants, commit) to an append-only file and fsyncs it before any
// participant is told COMMIT PREPARED: that line is the commit point of the whole
// transaction. Recovery (Recover) needs nothing else: it lists pg_prepared_xacts on
// every participant and finishes each gid as the log says, rolling back every gid the
// log does not hold (presumed abort, sound because no participant commits before the
// decision is on disk). The naive coordinator keeps no log and recovers by committing
// whatever it finds prepared; a crash between two participants' PREPAREs then commits
// one side of a transfer while the other side never existed.
//
// A coordinator crash (Cluster.Crash) abandons every transaction in flight at a
// protocol point chosen by a seeded coin. Cluster.Settle then lists the transactions in
// doubt with their age and locks, sets a writer on each row they hold (a loop of short
// lock_timeouts) to time how long the rows stay locked, and runs recovery.
package twopc
