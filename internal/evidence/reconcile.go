package evidence

import (
	"fmt"

	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
	"github.com/indoubt/indoubt/workloads/counter"
	"github.com/indoubt/indoubt/workloads/insert"
)

// Truth is what the fault proxy knows of the run's commits, joined to the operations
// whose attempts it cut: what a final state is reconciled with.
type Truth struct {
	// Applied holds, per commit the proxy cut after the server applied it, the op id of
	// its operation (an operation cut twice appears twice).
	Applied []string
	// Proven counts cut attempts whose reply proves they changed rows ("UPDATE 1");
	// Committed counts cut attempts that committed with a reply that does not say what
	// changed ("COMMIT", "CALL").
	Proven, Committed int64
}

// Reconcile holds a workload's final state, as its final reads found it, to the fault
// proxy's ground truth t (the zero Truth for a run without a proxy), and returns it with
// what the reconciliation counts filled in, and the sentences that say where the two
// disagree (none when they agree). A workload reads its final state; this judges it.
//
//   - budget: the balance's fall must lie between the acknowledged decrements (less
//     those replayed) plus the cuts that changed a row, and the acknowledged ones
//     plus every cut that committed.
//   - counter: the growth of the counter against the acknowledged increments gives
//     Lost or Extra, and Cause: lost increments were acknowledged and are missing;
//     extra ones are attributed to ambiguous commits only as far as evidence goes
//     (attempts that ended with SQLSTATE 40003, commits the proxy cut after they
//     applied).
//   - insert: a duplicated row needs a commit cut after it applied; more duplicates
//     than such cuts is a disagreement.
//
// The other workloads' final states are returned as they are: their checkers judge them.
func Reconcile(f workloads.Final, t Truth) (workloads.Final, []string) {
	switch f := f.(type) {
	case budget.Final:
		return f, reconcileBudget(f, t)
	case counter.Final:
		f.EvidenceCuts = int64(len(t.Applied))
		f.Lost, f.Extra, f.Cause = reconcileCounter(f)
		return f, nil
	case insert.Final:
		f.EvidenceCuts = int64(len(t.Applied))
		if !f.ClientSide && f.Duplicates > f.EvidenceCuts {
			return f, []string{fmt.Sprintf("%d duplicated rows but only %d commits cut after they applied", f.Duplicates, f.EvidenceCuts)}
		}
		return f, nil
	}
	return f, nil
}

func reconcileBudget(f budget.Final, t Truth) []string {
	if f.Balance == nil {
		return nil
	}
	taken := f.Budget - *f.Balance
	low := f.Applied - f.Replayed + t.Proven
	high := f.Applied + t.Proven + t.Committed
	if taken < low || taken > high {
		return []string{fmt.Sprintf("the balance fell by %d, but acknowledged decrements (%d, of which %d replayed) and the commits the proxy cut (%d that changed a row, %d that may have) account for between %d and %d", taken, f.Applied, f.Replayed, t.Proven, t.Committed, low, high)}
	}
	return nil
}

// reconcileCounter computes a counter's Lost, Extra and Cause from its counts.
func reconcileCounter(f counter.Final) (lost, extra int64, cause string) {
	if f.After == nil {
		return 0, 0, "no final read: the counter could not be reconciled"
	}
	applied := *f.After - f.Before
	switch {
	case applied < f.Acknowledged:
		lost = f.Acknowledged - applied
		cause = fmt.Sprintf("silently lost: %d of %d acknowledged increments are missing from the counter (it grew by %d); each was reported committed",
			lost, f.Acknowledged, applied)
		if f.SameValueWrites > 0 {
			cause += fmt.Sprintf(", and %d acknowledged increments wrote a value another had already written (lost updates)", f.SameValueWrites)
		}
		if f.Failed+f.Unknown == 0 {
			cause += "; no operation reported an error"
		}
	case applied > f.Acknowledged:
		extra = applied - f.Acknowledged
		evidence := f.EvidenceServerUnknown + f.EvidenceCuts
		attributed := min(extra, evidence)
		if attributed > 0 {
			cause = fmt.Sprintf("%d of %d extra attributed to ambiguous commits (evidence: %d attempts ended with SQLSTATE 40003, %d commits cut after they applied)",
				attributed, extra, f.EvidenceServerUnknown, f.EvidenceCuts)
		}
		if rest := extra - attributed; rest > 0 {
			if cause != "" {
				cause += "; "
			}
			cause += fmt.Sprintf("%d extra: cause not established (%d increments ended with an unknown outcome; no SQLSTATE 40003 or applied cut to show they committed)", rest, f.Unknown)
		}
	}
	return lost, extra, cause
}
