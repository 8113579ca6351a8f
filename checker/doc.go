// Package checker decides whether a history is correct, and explains why not.
//
// It works on histories alone (package histories) and never sees the proxy's ground
// truth, so that its verdict can be confirmed against that truth, and so that any
// history file, indoubt's or Jepsen's, can be checked again later.
//
// # Verdicts
//
// A check gives a Result: Valid, Invalid (with one Anomaly per thing found wrong,
// naming the history indices of the events involved and a sentence a person
// understands) or Unknown (a search ran out of time, or was interrupted). An invalid
// history is a Result, never an error; an error means the history cannot be checked:
// no model, missing parameters, or events that are not of the model (the message
// names the event). Verdict.ExitCode gives indoubt's exit codes.
//
// # Checkers
//
// Check picks the checker from the history's header (or Options.Model):
//
//   - budget (CheckBudget): one account, decrements that apply or are rejected,
//     reads of the balance. Exact, O(n log n), no search.
//   - counter (CheckCounter): increments that read and write, reads. Exact,
//     O(n log n), no search.
//   - exactly-once (CheckExactlyOnce): applies identified by op id, and a final read
//     of how many times each effect is present (ExactlyOnceState). Every
//     acknowledged effect present exactly once, every failed one absent, every
//     unknown one at most once; duplicates and losses named by op id. Exact, a count
//     per op id, no search.
//   - bank (CheckBank): transfers (Transfer) between accounts with initial balances
//     and floors (BankParams), reads of every balance (Balances). The total conserved
//     at every read, no balance below its floor, and the final balances explained by
//     every acknowledged transfer once and some choice of unknown ones at most once.
//     Exact; the choice is a search over partial sums, bounded, Unknown when it
//     outgrows its bound. CheckBank's documentation says what it cannot see.
//   - transfer (CheckTransfer): the bank model over rows spread on several servers,
//     with final reads of each server's markers (Markers: which rows each transfer
//     applied on) and of the transactions still prepared. Atomic commitment: no
//     transfer applied on one side only, none acknowledged and lost, none failed and
//     applied; nothing left prepared. Exact, one rule per transfer, no search beyond
//     the bank model's. TransferModel says what each function holds.
//   - register and cas-register (CheckRegister): integer registers, one per key,
//     checked for linearizability by a search that linearizes each operation just in
//     time (linear in a long history of few concurrent operations), held to porcupine,
//     which draws the visualization. A search: bounded by Options.Timeout and
//     Options.MaxMemory, and Unknown, naming the bound, when one runs out.
//   - list-append and rw-register (CheckListAppend, CheckRWRegister): transactions
//     over lists and registers, checked for consistency models from read
//     uncommitted to strict serializability in the manner of Jepsen's Elle: version
//     orders inferred from reads, a dependency graph, its strongly connected
//     components proved cyclic per model and searched for the shortest cycle of each
//     anomaly class (G0, G1c, G-single, G-nonadjacent, G2-item, with process and
//     real-time variants) within a budget per component, plus the anomalies that
//     need no cycle (G1a, G1b, internal, lost-update, ...). The verdict names the
//     weakest models violated (Options.Txn, TxnOptions). Linear in the history but
//     for the cycle search, which a timeout bounds (Unknown for what it cut short).
//
// The value formats each checker reads are those of package histories ("Values").
// The exactly-once and bank models judge the final state, which a history carries as
// an ok read that begins after every other operation ended, or which Options.Final
// supplies (`indoubt check --final`) when the program that recorded the history read
// it some other way.
// Every checker allows an info operation to take effect at any point after its
// invocation, or never. What a failed cas means is a convention of the history's
// source: FailCompareFailed (porcupine's, and indoubt's own histories) or
// FailNotApplied (Jepsen's and Knossos's); see FailMeaning.
//
// # Cancellation
//
// Every check takes a context. When it ends, a search stops within moments and the
// Result is Unknown, its Summary saying it was interrupted; the exact checkers look
// at it every few thousand events. Check is safe to call from several goroutines at
// once on different histories.
package checker
