// Package twopc runs distributed transactions over several PostgreSQL servers with
// indoubt's own two-phase commit coordinator, and breaks them on purpose.
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
// Run drives the transfer and two-rows workloads (package workloads/transfer) on 2 to
// 5 launched servers, with the proxy's commit faults at PREPARE TRANSACTION or COMMIT
// PREPARED, or a coordinator crash (Coordinator.Crash: every transaction in flight is
// abandoned at a protocol point chosen by a seeded coin, and the run ends). After a
// crash it lists the transactions in doubt with their age and locks, sets a writer on
// each row they hold (a loop of short lock_timeouts) to time how long the rows stay
// locked, runs recovery, and checks the servers' final state: total conserved, no
// transfer half applied, nothing left prepared. Transfer runs also record a bank history
// that the bank checker judges on its own.
//
// Reads of the total across servers (one server after another, no global snapshot) can
// see a transfer committed on one participant and not yet on the other: a fractured
// read. It is counted and named, and it leaves the verdict valid, because what is
// checked is atomic commitment, which two-phase commit promises, and not a snapshot
// across servers, which independent PostgreSQL servers do not offer.
package twopc
