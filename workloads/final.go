package workloads

// Name names a workload. The names are defined here, once; everything else refers to
// these values.
type Name string

// The workloads indoubt has.
const (
	Budget   Name = "budget"
	Counter  Name = "counter"
	Register Name = "register"
	// Transfer moves 1 between two rows, on one server or across two with two-phase
	// commit (package workloads/transfer; its coordinator is internal/twopc's).
	Transfer Name = "transfer"
	// TwoRows reads two rows in one transaction, on one server or across two with
	// two-phase commit: the Schism paper's workload.
	TwoRows Name = "two-rows"
	Insert  Name = "insert"
	// ListAppend and RWRegister run transactions of several micro-ops, checked for
	// isolation by the Elle-class checkers (package workloads/txn).
	ListAppend Name = "list-append"
	RWRegister Name = "rw-register"
	// Bank moves amounts between a few accounts in read-then-write transactions and
	// reads them all (package workloads/bank): Jepsen's bank test.
	Bank Name = "bank"
)

// Final is a workload's final state after a run: the `final` section of results.json,
// computed from the history by Workload.Summary. It marshals to that section's JSON, and
// it is the only way the runner, the evidence and the reports read the final state. A
// workload reads its final state; it does not judge it: indoubt holds it to the fault
// proxy's ground truth beside the checker's verdict.
type Final interface {
	// Figures is what the stand's table and the summaries show of the final state.
	Figures() Figures
}

// Figures is what a report shows of a final state. A nil figure shows as "-".
type Figures struct {
	// Applied counts the operations acknowledged as applied; Rejected those
	// acknowledged as rejected by the workload's own rule.
	Applied, Rejected *int64
	// Value is the final value read back (a balance, a counter).
	Value *int64
	// PerApplied names an applied operation when conflicts per applied operation are a
	// figure worth showing ("applied decrement"); empty when they are not.
	PerApplied string
	// Reconciliation is the exact reconciliation of a counting workload, nil for others.
	Reconciliation *Reconciliation
}

// Reconciliation is a counter's value before and after the run against its
// acknowledged increments, with the cause of any difference and the server's restart
// counters as deltas over the run.
type Reconciliation struct {
	Before              int64
	After               *int64
	Acknowledged        int64
	Lost, Extra         int64
	Cause               string
	ServerRestarts      map[string]int64
	ServerRestartsError string
}
