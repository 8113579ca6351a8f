// Package histories records and reads operation histories: what every client of a
// test asked, and what it was told.
//
// Every operation appears as an invocation followed by one completion: ok (it took
// effect), fail (it certainly did not) or info (the outcome is unknown). Info is the
// point of indoubt: an ambiguous commit. Checkers must allow an info operation to take
// effect at any point after its invocation, or never, and a process whose operation
// ended in info never invokes again (the worker continues under a fresh process id).
//
// # Files
//
// A history is stored as JSON lines (history.jsonl of a run directory), in real-time
// order: a header line that names the workload, the model, the seed and the checker's
// parameters, so that `indoubt check` needs no flags, then one event per line:
//
//	{"header":{"format":"indoubt-history/1","workload":"budget","model":"budget","store":"postgres","seed":1,"params":{"budget":3}}}
//	{"index":7,"time":1843021,"process":3,"type":"invoke","f":"decrement","op_id":"3-41","conn":"127.0.0.1:51514"}
//	{"index":9,"time":2901554,"process":3,"type":"info","f":"decrement","op_id":"3-41","error":"conn closed"}
//
// schemas/history.schema.json in the repository is the JSON Schema of a line, and
// docs/history-format.md the format as a program in another language writes it (for
// indoubt exec, with recorders for Python and JavaScript beside it). Writer
// streams a history to a file and survives a crash up to its last complete line;
// Reader and ReadFile read one back, refusing input that is not a history (ErrEmpty),
// a line that is not an event or not valid UTF-8, an index that is negative or does
// not increase, a process below -1, a completion whose time is earlier than its
// invocation's, and what Jepsen's rules of a process forbid: an invocation while the
// process has one open, an invocation after its info, and a completion with none open
// (except in a history of completions alone, as Elle's tests write them), with the
// file and the line. A line may be MaxLine bytes long, or as long as the history
// before it: the final read of a long run, which names every operation, is read back
// however long the run was.
//
// Events of the nemesis (fault windows opened and closed by the schedule, faults the
// proxy fired with their ground truth) carry process Nemesis (-1) and type info;
// checkers skip them and reports draw them on the timeline.
//
// # Values
//
// Op.Value holds what an operation was asked (on invoke) or answered (on completion),
// per function f of each workload. A fail or info completion carries its error
// text in Op.Error and no value, except that a failed cas may echo its [from,to]:
//
//	model         f          invoke value                       ok value
//	budget        decrement  none                               {"applied":true,"balance":n}; applied false: rejected, nothing left
//	budget        read       none                               {"balance":n}
//	counter       increment  none                               {"wrote":n}, or {"read":n-1,"wrote":n} when it read first
//	counter       read       none                               {"value":n}
//	register      read       none                               n, or null when the register is absent
//	register      write      n                                  n (echoed)
//	register      cas        [from,to]                          [from,to]: swapped (cas-register model only)
//	exactly-once  apply      any (op_id names the effect)       any
//	exactly-once  read       none                               {"<op id>":count,...}: the effects present, how often
//	bank          transfer   {"from":"a","to":"b","amount":n}   any
//	bank          read       none                               {"a":n,"b":m,...}: every account's balance
//	list-append   txn        [["append",k,v],["r",k,null],...]  [["append",k,v],["r",k,[v1,v2,...]],...]
//	rw-register   txn        [["w",k,v],["r",k,null],...]       [["w",k,v],["r",k,v],...]: null for a register never written
//
// Register workloads add Op.Key for each independent register. An ok read with no
// value at all carries no information (what Jepsen's nil read means) and is accepted
// in any state. For a failed cas, checker.FailMeaning says what the fail means.
// Header.Params holds what the checker needs: "budget" (the initial balance),
// "before" (the counter's value before the run), "initial" (every register's initial
// value; null or absent: the registers start absent), "accounts" (bank: every
// account's initial balance, {"a":10,"b":0}), "floor" and "floors" (bank: the lowest
// balance allowed, for every account and per account; 0 when absent).
//
// A transaction (list-append, rw-register) is a JSON array of micro-ops, each an array
// of the function (append, w or r), the key and the argument: the value appended or
// written, or what a read returned, null in the invocation (not known yet). Keys and
// values may be any JSON value (Jepsen's keywords arrive as strings); a value appended
// or written must be unique per key. A fail or info completion may leave the value out:
// the invocation's stands for it. A read of a list-append key returns the whole list.
// The header's params may name what the transactional checkers are checking for:
// "consistency_models" and "anomalies" (arrays of names, as checker.TxnOptions), and
// for rw-register "linearizable_keys", "sequential_keys", "wfr_keys" (booleans).
//
// An exactly-once apply must carry op_id, the identity of its effect (the idempotency
// key, the tag of the row it writes); applies that share an op id are one effect. The
// exactly-once and bank models judge the final state: an ok read, by a process of its
// own, that begins after every other operation ended; a program that reads it some
// other way gives it to `indoubt check --final` instead (a file holding the read's
// value). A history written by a program other than indoubt follows the same lines:
// the header, then for each operation an invoke and one completion on the same
// process, in the order they happened, with conn naming the client's local address of
// the connection so that `indoubt check --faults` can join the proxy's events to it.
//
// # Jepsen
//
// ReadJepsenEDN and ReadJepsenLog import Jepsen's histories (history.edn as Jepsen and
// Knossos write it; the jepsen.util op lines of a test's log, as in the etcd logs
// porcupine is tested against), JepsenEDNReader reads history.edn one op at a time as
// Reader reads JSONL, and WriteJepsenEDN exports to EDN, so that indoubt's histories
// can be checked by Knossos or Elle too.
package histories
