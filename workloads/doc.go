// Package workloads holds what the workloads share: the Workload, Worker and Session
// interfaces the runner drives, the final state each workload reports (Final), and the
// names of the workloads (Name). Each workload lives in a subpackage of its own with
// its generator, the Store interface it needs, its model and its final reconciliation;
// stores implement those interfaces:
//
//   - budget: one account, decrements of 1 while the balance lasts (the stand's
//     scenario), checked by the budget model;
//   - counter: increments of one hot row under an isolation level, with the lost
//     updates counted exactly;
//   - register: compare-and-set registers, one per key, checked for linearizability;
//   - insert: single-row inserts under one primary-key shape, with what the shape costs
//     and whether a retried insert stays exactly once;
//   - transfer: the distributed-transaction workloads transfer and two-rows over
//     several PostgreSQL servers, local or with two-phase commit;
//   - txn: list-append and rw-register, transactions of several micro-ops checked for
//     isolation (G0 to G2, lost update, ...) from what their reads returned.
//
// catalog is the one table of them that the runner and the reports look names up in.
//
// The package also owns the error contract every store follows and every consumer
// (workloads, the retry loop) branches on: ErrUnknown, ErrConflict or a definite
// failure, each with a Reason from one vocabulary shared by every store. See Classify.
package workloads
