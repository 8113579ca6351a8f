package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
)

const checkHelp = `indoubt check: re-check a recorded history and print the verdict.

indoubt's own histories (history.jsonl of a run directory) name their workload, model
and parameters in their header, so they need no flags. Public Jepsen histories need
--format and --model.

A file with nothing of its format in it (empty, another format, random bytes) is
refused, and so is one line that is not of the format among lines that are, unless
--skip-bad-lines says to skip them (a whole Jepsen log, with other loggers' lines).

What a failed cas means differs: for --format jepsen-edn and elle-json it is Jepsen's meaning, the
operation did not take place and constrains nothing (Knossos drops it); for
jepsen-log, porcupine's etcd convention, and indoubt's own, it is "the compare did not
match". --fail-means chooses explicitly; the verdict line says which was used.

A history written by any program (schemas/history.schema.json) is checked the same
way. --faults joins the events of 'indoubt proxy --events' (or a run's faults.jsonl) to
it and prints the proxy's ground truth beside the verdict: each fault is joined to the
operation on that connection (the history's conn: the client's local address) whose
invocation..completion holds the fault's time; a fault on a connection the history
never names (a retry's) joins the operation then running, if only one was. Proxy events carry wall-clock times, so
such a history must record time in Unix nanoseconds. --final gives the final state
when the history has no final read (exactly-once, bank, budget, counter), as the JSON
value the model's read would return: {"p-1":1,...}, {"alice":10,...}, {"balance":n},
{"value":n}.

The register models search for an order of the operations, which can take time and
memory exponential in how many ran at once. The search stops when --timeout expires
or when the check's memory reaches --max-memory (default: half of this machine's
memory, or of the cgroup's limit when that is lower), and the verdict is then unknown
(exit 2), saying which bound ran out. Both bound the reading of the history too.

Transactional histories (--model list-append or rw-register; values as in Elle's
histories, [["append","x",1],["r","y",[1,2]]]) are checked for the consistency models
of --consistency-models, strict-serializable by default, as Jepsen's Elle does: the
verdict names the weakest models the history violates and each anomaly's cycle, one
line per dependency. --anomalies names anomalies to look for besides those the models
forbid (alone, with no --consistency-models, only those). --cycle-search-timeout bounds
the search of each strongly connected component (default 1s); a search cut short
leaves the verdict unknown unless something else proves it invalid. On rw-register
histories the search for a version order (snapshot isolation, serializability) is
bounded by --order-search-steps for each region of transactions, a count of steps
and not time, so a busy machine does not change its outcome, and as a whole by
--timeout and --max-memory; cut short, the verdict is unknown, naming the bound.

A run directory (of indoubt run, indoubt exec or the test helper) is judged from its
files alone, as its run judged it: history.jsonl checked under the limits its
check.json names (say other ones with --timeout and --max-memory, and the check says
so), faults.jsonl joined to it, the final state the run read reconciled with the
proxy's ground truth (disagreements, lost, extra), the timelines of its process faults
and partitions. --json prints the run's results.json with every section the judge
decides computed again; the figures only the run measured (times, throughput, latency,
retries) are as results.json has them.

Usage: indoubt check [flags] FILE
       indoubt check [--json] [--timeout D] [--max-memory N] [--html FILE] RUNDIR

Examples:
  indoubt check runs/20261130-120000.000-budget-postgres
  indoubt check --json runs/20261130-120000.000-budget-postgres
  indoubt check runs/20261130-120000.000-budget-postgres/history.jsonl
  indoubt check --format jepsen-log --model cas-register etcd_000.log
  indoubt check --format jepsen-edn --model cas-register --initial 0 history.edn
  indoubt check --format jepsen-log --skip-bad-lines --model cas-register jepsen.log
  indoubt check --format jepsen-edn --fail-means compare-failed --model cas-register h.edn
  indoubt check --faults faults.jsonl history.jsonl
  indoubt check --final final.json --faults faults.jsonl payments.jsonl
  indoubt check --format jepsen-edn --model list-append history.edn
  indoubt check --model list-append --consistency-models snapshot-isolation,repeatable-read h.jsonl
  indoubt check --format jepsen-edn --model rw-register --linearizable-keys history.edn
  indoubt check --format plume --consistency-models causal history.txt
  indoubt check --format dbcop --consistency-models read-atomic history.json
  indoubt check --format elle-json --model list-append history.json

Exit codes: 0 valid, 1 invalid, 2 unknown (checker ran out of time), 3 could not read
the history.
`

func checkCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a, err := parseCheckArgs(args, stdout)
	if err != nil {
		return err
	}
	if err := a.readFinal(ctx); err != nil {
		return err
	}
	if a.opt.MaxMemory > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// Garbage is collected before the heap grows past the bound, so that the
		// bound the search stops at is the memory the process holds.
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(a.opt.MaxMemory))
	}
	if a.dir != "" {
		return a.checkRunDir(ctx, stdout, stderr)
	}
	res, ops, err := a.check(ctx)
	var fatal fatalCheck
	if errors.As(err, &fatal) {
		return fatal.err
	}
	if err != nil && res.Verdict != 0 {
		// Only the visualization failed: the verdict stands, with a warning, and the part
		// of the page porcupine wrote (a full disk) is not left as if it were the page.
		if fi, serr := os.Stat(a.opt.VisualizePath); serr == nil && fi.Mode().IsRegular() {
			os.Remove(a.opt.VisualizePath)
		}
		console.Fprintf(stderr, "indoubt: warning: %s\n", oneLine(err.Error()))
		err = nil
	}
	if err != nil {
		return fmt.Errorf("check %s: %v", a.path, err)
	}
	var truth *groundTruth
	if a.faults != "" {
		if a.opt.Final != nil {
			// The final state given is evidence too: its count of an op id proves how
			// many times the operation took effect.
			ops = checker.WithFinalRead(ops, a.opt.Final)
		}
		spans := evidence.SpansFromHistory(ops, a.events)
		ev, _ := evidence.Join(a.events, spans, ops, nil, res.Verdict == checker.Invalid)
		truth = &groundTruth{Evidence: ev, Commits: evidence.Tally(a.events), File: a.faults, Unjoined: evidence.Unjoined(a.events, spans, ops)}
	}
	if a.jsonOut {
		printCheckJSON(stdout, res, truth)
	} else {
		a.printCheck(stdout, res, ops, truth)
	}
	if code := res.Verdict.ExitCode(); code != 0 {
		return verdictExit{code}
	}
	return nil
}

// checkArgs is what `indoubt check` was asked, parsed and validated.
type checkArgs struct {
	path, format string
	// dir is the run directory given instead of a history ("" for a file);
	// timeoutSet and memorySet say that --timeout and --max-memory were given, to
	// judge it under other limits than its run's.
	dir                   string
	timeoutSet, memorySet bool
	partial               bool
	skipBad               bool
	jsonOut               bool
	faults                string // --faults: the proxy's events file, "" for none
	finalPath             string // --final, read by readFinal
	events                []evidence.FaultEvent
	clock                 evidence.Clock
	opt                   checker.Options
	// maxAnomalies is --max-anomalies: 0 for the default (a run directory's
	// config.json, else results.DefaultMaxAnomalies), -1 for all.
	maxAnomalies int
}

// parseCheckArgs parses and validates the flags, reads --final and --faults, and
// refuses any combination that cannot be checked, before the history is read.
func parseCheckArgs(args []string, stdout io.Writer) (checkArgs, error) {
	fs := newFlags("check", checkHelp, stdout)
	var (
		a       checkArgs
		format  = fs.String("format", "indoubt", "history format: indoubt (JSONL), jepsen-edn, jepsen-log, plume (Plume's and AWDIT's text; rw-register), cobra (a directory of Cobra's client logs; rw-register), dbcop (dbcop's JSON; rw-register), elle-json (elle-cli's JSON)")
		model   = fs.String("model", "", "model, overriding the header: "+strings.Join(checker.Models, ", "))
		initial = fs.String("initial", "", "register models: initial value of every register (default: absent)")
		budget  = fs.String("budget", "", "budget model: initial balance, overriding the header")
		timeout = fs.Duration("timeout", 0, "longest the search may take; then the verdict is unknown (default: none)")
		maxMem  = fs.String("max-memory", "", "most memory the search may hold, as 512MiB, 4GiB or bytes (0: no bound); then the verdict is unknown (default: half of this machine's memory)")
		partial = fs.Bool("partial", false, "indoubt format: accept a history cut short by a crash (drop a truncated last line)")
		viz     = fs.String("html", "", "register models: write porcupine's visualization to this file")
		jsonOut = fs.Bool("json", false, "print the result as JSON")
		skipBad = fs.Bool("skip-bad-lines", false, "Jepsen formats: skip lines (log) or values (EDN) that are not ops instead of refusing the file")
		failMns = fs.String("fail-means", "", "register models: what a failed cas means, not-applied (Jepsen; default for jepsen-edn) or compare-failed (porcupine; default otherwise)")
		faultsF = fs.String("faults", "", "the proxy's fault events (indoubt proxy --events, or a run's faults.jsonl): join them to the history and print the ground truth")
		finalF  = fs.String("final", "", "a JSON file holding the final state, for a history without a final read (exactly-once, bank, budget, counter)")
		cms     = fs.String("consistency-models", "", "list-append, rw-register: comma-separated models the history must satisfy (default strict-serializable): "+strings.Join(checker.TxnConsistencyModels, ", "))
		anoms   = fs.String("anomalies", "", "list-append, rw-register: comma-separated anomalies to look for besides those the models forbid (G0, G1, G2, G-single, lost-update, ...)")
		cycleT  = fs.Duration("cycle-search-timeout", 0, "list-append, rw-register: longest the search of one strongly connected component may take (default 1s)")
		orderN  = fs.Int64("order-search-steps", 0, "rw-register: most steps the search of one region of transactions for a version order may take, the same however busy the machine (default 1048576)")
		linKeys = fs.Bool("linearizable-keys", false, "rw-register: assume each key is linearizable, and infer version orders from real-time order")
		seqKeys = fs.Bool("sequential-keys", false, "rw-register: assume each key is sequentially consistent, and infer version orders from each process's order")
		wfrKeys = fs.Bool("wfr-keys", false, "rw-register: assume writes follow reads within a transaction")
		maxA    = fs.Int("max-anomalies", 0, "list at most this many anomalies (and, for a run directory, ground-truth items) on the console and in --json; -1 lists all (default: a run directory's max_anomalies, else 20); counts stay exact")
	)
	if err := parseFlags(fs, args); err != nil {
		return a, err
	}
	if fs.NArg() != 1 {
		return a, fmt.Errorf("check: want one history file or run directory (see indoubt check --help)")
	}
	// A directory is a run directory, except that Cobra's format is a directory of logs.
	if a.path = fs.Arg(0); *format != "cobra" && isRunDir(a.path) {
		if err := runDirArgs(&a, flagsSet(fs)); err != nil {
			return a, err
		}
	}
	a.path, a.format, a.partial, a.skipBad, a.jsonOut, a.faults = fs.Arg(0), *format, *partial, *skipBad, *jsonOut, *faultsF
	switch a.format {
	case "indoubt", "jepsen-edn", "jepsen-log", "elle-json":
	case "plume", "cobra", "dbcop":
		if *model == "" {
			*model = checker.RWRegisterModel
		}
	default:
		return a, fmt.Errorf("check: unknown --format %q (want indoubt, jepsen-edn, jepsen-log, elle-json, plume, cobra or dbcop)", a.format)
	}
	if *timeout < 0 {
		return a, fmt.Errorf("check: --timeout must not be negative (got %v)", *timeout)
	}
	if *maxA < -1 {
		return a, fmt.Errorf("check: --max-anomalies must be -1 (all) or a count (got %d)", *maxA)
	}
	a.maxAnomalies = *maxA
	var err error
	if a.opt.MaxMemory, err = parseMaxMemory(*maxMem); err != nil {
		return a, fmt.Errorf("check: --max-memory: %v", err)
	}
	if err := checkWritable(*viz); err != nil {
		return a, fmt.Errorf("check: --html: %v", err)
	}
	a.opt.Model, a.opt.Timeout, a.opt.VisualizePath = *model, *timeout, *viz
	if *orderN < 0 {
		return a, fmt.Errorf("check: --order-search-steps must not be negative (got %d)", *orderN)
	}
	if *cycleT < 0 {
		return a, fmt.Errorf("check: --cycle-search-timeout must not be negative (got %v)", *cycleT)
	}
	a.opt.Txn = checker.TxnOptions{ConsistencyModels: splitList(*cms), Anomalies: splitList(*anoms),
		CycleSearchTimeout: *cycleT, OrderSearchSteps: *orderN, LinearizableKeys: *linKeys, SequentialKeys: *seqKeys, WFRKeys: *wfrKeys}
	if err := a.opt.Txn.Validate(); err != nil {
		return a, fmt.Errorf("check: %v", err)
	}
	if err := a.parseValues(*initial, *budget, *failMns); err != nil {
		return a, err
	}
	if a.format != "indoubt" && a.opt.Model == "" {
		return a, fmt.Errorf("check: Jepsen histories name no model: give --model register, cas-register, list-append or rw-register")
	}
	if a.skipBad && a.format == "indoubt" {
		return a, fmt.Errorf("check: --skip-bad-lines is for the Jepsen formats; an indoubt history with a bad line is damaged (--partial accepts a truncated last line)")
	}
	if a.skipBad && (a.format == "dbcop" || a.format == "elle-json") {
		return a, fmt.Errorf("check: --skip-bad-lines is for jepsen-edn and jepsen-log; a %s history with a bad op is refused, at its position", a.format)
	}
	if a.partial && a.format != "indoubt" {
		return a, fmt.Errorf("check: --partial is for indoubt histories (a truncated last line); the Jepsen formats have --skip-bad-lines")
	}
	if err := a.modelFlags(*initial != "", *budget != "", *failMns != "", *viz != ""); err != nil {
		return a, err
	}
	a.finalPath = *finalF // read by readFinal
	if a.faults != "" {
		f, err := openNoWait(a.faults)
		if err != nil {
			return a, fmt.Errorf("check: --faults: %w", err)
		}
		a.events, a.clock, err = evidence.ReadEvents(f, a.faults)
		f.Close()
		if err != nil {
			return a, fmt.Errorf("check: --faults: %w", err)
		}
	}
	return a, nil
}

// modelFlags refuses a flag of one model given for a history of another: --initial
// (register models, counter), --budget (budget), --fail-means and --html (register
// models). The model is --model's, or the one an indoubt history's header names, read
// only when such a flag is given.
func (a *checkArgs) modelFlags(initial, budget, failMeans, html bool) error {
	if !initial && !budget && !failMeans && !html {
		return nil
	}
	model := a.opt.Model
	if model == "" && a.format == "indoubt" {
		path := a.path
		if a.dir != "" {
			path = filepath.Join(a.dir, rundir.HistoryFile)
		}
		f, err := openNoWait(path)
		if err != nil {
			return fmt.Errorf("check: open history: %w", err)
		}
		rd, err := histories.NewReader(f, path)
		if err == nil && rd.Header() != nil {
			model = rd.Header().Model
		}
		f.Close()
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
	if model == "" {
		return nil // refused later: a history needs a model
	}
	register := model == checker.RegisterModel || model == checker.CASRegisterModel
	for _, f := range []struct {
		flag    string
		set, ok bool
		models  string
	}{
		{"--initial", initial, register || model == "counter", "the register, cas-register and counter models"},
		{"--budget", budget, model == "budget", "the budget model"},
		{"--fail-means", failMeans, register, "the register and cas-register models"},
		{"--html", html, register, "the register and cas-register models"},
	} {
		if f.set && !f.ok {
			return fmt.Errorf("check: %s applies to %s, not to this %s history", f.flag, f.models, model)
		}
	}
	return nil
}

// parseValues reads --initial, --budget and --fail-means into the checker's options.
// Each format is read the way the tool its histories come from reads it: Jepsen's
// meaning of a failed cas for EDN, porcupine's for its logs, unless told otherwise.
func (a *checkArgs) parseValues(initial, budget, failMeans string) error {
	if initial != "" && initial != "absent" && initial != "nil" {
		v, err := strconv.ParseInt(initial, 10, 64)
		if err != nil {
			return fmt.Errorf("check: --initial %q is not an integer", initial)
		}
		a.opt.Initial = &v
	}
	if budget != "" {
		v, err := strconv.ParseInt(budget, 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("check: --budget %q is not a non-negative integer", budget)
		}
		a.opt.Budget = &v
	}
	a.opt.FailMeans = checker.FailCompareFailed
	if a.format == "jepsen-edn" || a.format == "elle-json" {
		a.opt.FailMeans = checker.FailNotApplied
	}
	if failMeans != "" {
		a.opt.FailMeans = checker.FailMeaning(failMeans)
		if !slices.Contains(checker.FailMeanings, a.opt.FailMeans) {
			return fmt.Errorf("check: unknown --fail-means %q (want one of %v)", failMeans, checker.FailMeanings)
		}
	}
	return nil
}

// check reads the history and checks it. A failure to read is returned as the fatal
// error of the command; the checker's own error comes back with its result.
func (a checkArgs) check(ctx context.Context) (checker.Result, []histories.Op, error) {
	var h *histories.Header
	var ops []histories.Op
	var err error
	if a.faults == "" && (a.format == "indoubt" || a.format == "jepsen-edn") {
		// Nothing else needs the events: check them as they are read.
		res, err, fatal := a.checkStreamed(ctx)
		if fatal != nil {
			return checker.Result{}, nil, fatalCheck{fatal}
		}
		return res, nil, err
	}
	switch a.format {
	case "indoubt":
		if h, ops, err = histories.ReadFile(a.path, a.partial); err != nil {
			return checker.Result{}, nil, fatalCheck{err}
		}
		if !slices.ContainsFunc(ops, histories.Op.IsClient) {
			return checker.Result{}, nil, fatalCheck{fmt.Errorf("check %s: the history has a header but no operations: nothing to check", a.path)}
		}
	default:
		if ops, err = a.readJepsen(); err != nil {
			return checker.Result{}, nil, fatalCheck{err}
		}
	}
	if a.faults != "" {
		if err := evidence.CheckClock(ops, a.clock); err != nil {
			return checker.Result{}, nil, fatalCheck{fmt.Errorf("check %s: --faults %s: %v", a.path, a.faults, err)}
		}
	}
	res, err := checker.Check(ctx, h, ops, a.opt)
	return res, ops, err
}

// readJepsen reads a Jepsen EDN or log history, which names no model of its own.
func (a checkArgs) readJepsen() ([]histories.Op, error) {
	f, err := openNoWait(a.path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	jopt := a.jepsenOptions()
	var ops []histories.Op
	switch a.format {
	case "plume":
		ops, err = histories.ReadPlume(f, a.path)
	case "cobra":
		ops, err = histories.ReadCobra(a.path)
	case "dbcop":
		ops, err = histories.ReadDBCop(f, a.path)
	case "elle-json":
		ops, err = histories.ReadElleJSON(f, a.path)
	case "jepsen-edn":
		ops, err = histories.ReadJepsenEDN(f, a.path, jopt)
	default:
		ops, err = histories.ReadJepsenLog(f, a.path, jopt)
	}
	if err != nil {
		return nil, err
	}
	return ops, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// fatalCheck is an error that ends `indoubt check` as it is, without a verdict: the
// history could not be read.
type fatalCheck struct{ err error }

func (f fatalCheck) Error() string { return f.err.Error() }
func (f fatalCheck) Unwrap() error { return f.err }

// printCheckJSON prints the result, and the ground truth when there is one, as JSON.
func printCheckJSON(w io.Writer, res checker.Result, truth *groundTruth) {
	out := any(res)
	if truth != nil {
		out = struct {
			checker.Result
			GroundTruth *groundTruth `json:"ground_truth"`
		}{res, truth}
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	fmt.Fprintf(w, "%s\n", console.JSON(b))
}

// printCheck prints the verdict line, up to --max-anomalies (20) anomalies with what the proxy says of
// their operations, and the ground truth.
func (a checkArgs) printCheck(w io.Writer, res checker.Result, ops []histories.Op, truth *groundTruth) {
	checked := res.Checker
	if res.Checker == checker.RegisterModel || res.Checker == checker.CASRegisterModel {
		checked += ", a failed cas read as " + string(a.opt.FailMeans)
	}
	console.Fprintf(w, "%s: %s (%s): %s\n", a.path, res.Verdict, checked, res.Summary)
	limit := cmp.Or(a.maxAnomalies, results.DefaultMaxAnomalies)
	for i, an := range res.Anomalies {
		if i == limit {
			console.Fprintf(w, "  ... and %d more anomalies (--max-anomalies -1 lists them all)\n", len(res.Anomalies)-limit)
			break
		}
		console.Fprintf(w, "  %s: %s\n", an.Kind, console.BoundedLines(an.Explanation, "    ", "--json"))
		if truth != nil {
			for _, s := range truth.about(an, ops) {
				console.Fprintf(w, "    the proxy: %s\n", s)
			}
		}
	}
	if truth != nil {
		truth.write(w)
	}
}

// checkStreamed checks an indoubt or Jepsen EDN history as it reads it, so that a long
// history need not fit in memory (checker.CheckStream), and so that reading stops
// within moments of ctx ending (SIGINT), however long the file. Its errors come in the
// order reading the whole file first gave them: the file's own (a bad line anywhere),
// then the checker's. The checker's result and error are returned as checker.Check
// returns them (a visualization error comes with a verdict); fatal is an error of the
// file, to return as it is.
func (a checkArgs) checkStreamed(ctx context.Context) (res checker.Result, err, fatal error) {
	f, err := openInput(ctx, a.path)
	if err != nil {
		return checker.Result{}, nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	src := ctxFile{ctx, f}
	// check checks the history; drain reads the rest of it after the checker stopped
	// early; readErr is the first error of reading it.
	var check func() (checker.Result, error)
	var drain func() (histories.Op, error)
	var readErr func() error
	if a.format == "indoubt" {
		rd, err := histories.NewReader(src, a.path)
		if err != nil {
			return checker.Result{}, nil, err
		}
		rd.Partial = a.partial
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			rd.Size = fi.Size()
		}
		check = func() (checker.Result, error) { return checker.CheckReader(ctx, rd, a.opt) }
		drain, readErr = rd.Next, rd.Err
	} else {
		read := histories.NewJepsenEDNReader(src, a.path, a.jepsenOptions()).Next
		var first error
		next := func() (histories.Op, error) {
			op, err := read()
			if err != nil && err != io.EOF && first == nil {
				first = err
			}
			return op, err
		}
		check = func() (checker.Result, error) { return checker.CheckStream(ctx, nil, next, a.opt) }
		drain, readErr = next, func() error { return first }
	}
	res, err = check()
	if ctx.Err() != nil {
		// Interrupted: what was not read is not the file's fault.
		return res, err, nil
	}
	if err != nil && res.Verdict == 0 && readErr() == nil {
		// The checker stopped early: the rest of the file is read for an error of its
		// own, which comes first.
		for {
			if _, nerr := drain(); nerr != nil {
				break
			}
		}
	}
	if err := readErr(); err != nil {
		return checker.Result{}, nil, err
	}
	// A header with no operation after it is a history of nothing: the checker says
	// nothing was checked (unknown), as of one whose operations never completed.
	return res, err, nil
}

// groundTruth is what the proxy's events prove about a checked history.
type groundTruth struct {
	File     string               `json:"file"`
	Commits  results.CommitCounts `json:"commits"`
	Evidence *results.Evidence    `json:"evidence"`
	// Unjoined says why the events that joined no operation did not.
	Unjoined []string        `json:"unjoined,omitempty"`
	shown    map[string]bool // sentences already printed under an anomaly
}

// about returns the proxy's sentences on the operations of anomaly a: what it proves of
// them (report.ClaimsAbout), then, for one it proves nothing of, what it did to it.
func (g *groundTruth) about(a checker.Anomaly, ops []histories.Op) []string {
	if g.shown == nil {
		g.shown = map[string]bool{}
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range report.ClaimsAbout(g.Evidence, a) {
		seen[c.OpID] = true
		out = append(out, c.Sentence)
	}
	for _, x := range g.Evidence.Ambiguous {
		if !seen[x.OpID] && slices.Contains(a.Ops, x.Invoke) {
			out = append(out, x.Sentence)
		}
	}
	for _, s := range out {
		g.shown[s] = true
	}
	return out
}

// write prints the ground truth after the verdict.
func (g *groundTruth) write(w io.Writer) {
	e := g.Evidence
	console.Fprintf(w, "ground truth (%s): %d fault events, %d joined to operations of the history\n", g.File, e.Events, e.Joined)
	for _, s := range g.Unjoined {
		console.Fprintf(w, "  not joined: %s\n", s)
	}
	console.Fprintf(w, "  commit faults: %s\n", g.Commits)
	g.list(w, "applied more than once", "operations proven to have taken effect more than once", e.AppliedTwice)
	g.list(w, "replayed", "operations committed by a cut whose retry is proven to have changed nothing", e.Replays)
	g.list(w, "committed and retried", "operations committed by a cut and retried, a second application possible, not proven", e.CommittedTwice)
	if len(e.Requests) > 0 {
		console.Fprintf(w, "  API requests: %d whose cut response the history proves handled more than once or replayed\n", e.RequestsTotal())
		shown := min(len(e.Requests), 20)
		for _, s := range e.Requests[:shown] {
			console.Fprintf(w, "    %s\n", s)
		}
		if more := e.RequestsTotal() - shown; more > 0 {
			console.Fprintf(w, "    ... and %d more (--json lists those results.json holds)\n", more)
		}
	}
	for _, d := range e.Disagreements {
		console.Fprintf(w, "  ground truth vs checker: %s\n", d)
	}
}

// list prints one list of the ground truth, leaving out the sentences already printed
// under an anomaly.
func (g *groundTruth) list(w io.Writer, name, what string, ops []results.AmbiguousOp) {
	if len(ops) == 0 {
		return
	}
	var rest []string
	for _, a := range ops {
		if !g.shown[a.Sentence] {
			rest = append(rest, a.Sentence)
		}
	}
	shown := ""
	if n := len(ops) - len(rest); n > 0 {
		shown = fmt.Sprintf(" (%d shown above)", n)
	}
	console.Fprintf(w, "  %s: %d %s%s\n", name, len(ops), what, shown)
	for i, s := range rest {
		if i == 20 {
			console.Fprintf(w, "    ... and %d more (--json lists them)\n", len(rest)-20)
			break
		}
		console.Fprintf(w, "    %s\n", s)
	}
}

// checkWritable refuses an output path that cannot be written (no such directory, a
// directory, no permission) before a long check runs, so that a typo costs nothing.
// An empty path is no output. A file it creates to find out is removed again.
func checkWritable(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", path)
	}
	_, statErr := os.Stat(path)
	// Not waiting: a FIFO no program reads is refused (ENXIO) rather than held open
	// until a reader comes, which never did.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, 0o644)
	if errors.Is(err, syscall.ENXIO) {
		return fmt.Errorf("%s is a FIFO no program reads", path)
	}
	if err != nil {
		return err
	}
	f.Close()
	if os.IsNotExist(statErr) {
		// What the open created: the file a dangling link names, not the link.
		if made, err := filepath.EvalSymlinks(path); err == nil {
			os.Remove(made)
		}
	}
	return nil
}

// parseMaxMemory reads --max-memory: a size in bytes with an optional unit (K, M, G, T,
// with or without i and B, all powers of 1024), 0 or "none" for no bound, and the
// default when empty.
func parseMaxMemory(s string) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return defaultMaxMemory(), nil
	case "0", "none":
		return 0, nil
	}
	num := strings.TrimRight(s, "KkMmGgTtIiBb")
	unit := strings.ToLower(strings.TrimSpace(s[len(num):]))
	unit = strings.TrimSuffix(strings.TrimSuffix(unit, "b"), "i")
	shift, ok := map[string]uint{"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[unit]
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if !ok || err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%q is not a size (512MiB, 4GiB, or bytes)", s)
	}
	n := v * float64(uint64(1)<<shift)
	if n >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is larger than any memory", s)
	}
	if n < 1<<20 && n != 0 {
		return 0, fmt.Errorf("%q is less than 1 MiB: no check fits", s)
	}
	return int64(n), nil
}

// defaultMaxMemory is half of the machine's memory, or of the cgroup's limit when that
// is lower; 4 GiB when neither can be read.
func defaultMaxMemory() int64 {
	var total int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var kb int64
			if n, _ := fmt.Sscanf(sc.Text(), "MemTotal: %d kB", &kb); n == 1 {
				total = kb << 10
				break
			}
		}
		f.Close()
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(path); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && (total == 0 || v < total) {
				total = v
			}
		}
	}
	if total == 0 {
		return 4 << 30
	}
	return total / 2
}
