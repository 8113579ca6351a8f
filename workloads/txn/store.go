package txn

import (
	"context"

	"github.com/indoubt/indoubt/workloads"
)

// Store is what the transactional workloads need of a database: transactions of
// micro-ops over integer keys, for one model (list-append or rw-register) fixed when
// the store was opened.
type Store interface {
	// Reset removes every key, so that each starts absent: an empty list, a register
	// never written.
	Reset(ctx context.Context) error
	// Session opens one worker's connection (or connections: a store that reads from a
	// standby holds one to each server).
	Session(ctx context.Context) (Session, error)
	// Guarantee says what the store promises for these transactions and how it runs
	// them.
	Guarantee() Guarantee
}

// PrimaryStore is implemented by a store that routes some transactions away from the
// primary (read-only ones to a standby): its PrimarySession runs every transaction on
// the primary, for the final reads.
type PrimaryStore interface {
	PrimarySession(ctx context.Context) (Session, error)
}

// Session is one worker's connection. Every attempt of a transaction runs on it.
type Session interface {
	workloads.Session
	// Txn runs t as one transaction and returns it with every read's result filled in
	// (Done, and List or Value and Found), and the compare-and-set rounds it lost inside
	// the store's own mechanism (a lightweight-transaction loop), which are not retries
	// of the transaction. t is the store's to modify. Errors follow the contract of
	// package workloads: ErrConflict when the transaction certainly did not commit and
	// may be tried again (a serialization failure, a WATCHed key that changed),
	// ErrUnknown when it may or may not have committed, anything else definite. The
	// workload never sets req.Idempotent: it refuses an idempotent request itself.
	Txn(ctx context.Context, req workloads.Request, t Txn) (done Txn, conflicts int, err error)
}

// Guarantee is what a store promises for the workload's transactions: the consistency
// models a history of them must satisfy, said in the store's own terms, and what the
// generator must respect for the promise to apply.
type Guarantee struct {
	// Mechanism says how a transaction runs ("BEGIN ISOLATION LEVEL SERIALIZABLE, one
	// statement a micro-op", "WATCH, reads, MULTI/EXEC"), for reports.
	Mechanism string
	// Models are the consistency models (checker.TxnConsistencyModels) the store
	// promises for these transactions: what the history is checked for unless the run
	// names others.
	Models []string
	// Promise says in a sentence who promises what, and where the promise stops.
	Promise string
	// SingleKey is set for a store that is atomic per key only (one document, one
	// partition): every transaction then touches one key, and Models is what the store
	// promises of such transactions.
	SingleKey bool
	// LinearizableKeys, SequentialKeys and WFRKeys say which of the rw-register
	// checker's assumptions hold for this store (checker.TxnOptions): each key
	// linearizable on its own, sequentially consistent on its own, writes following the
	// reads of their transaction.
	LinearizableKeys, SequentialKeys, WFRKeys bool
}
