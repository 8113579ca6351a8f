// Package rundir is the format of a run directory, the evidence a run leaves: what
// each file holds, as Go types, with the one writer and the one reader of each. indoubt
// run, indoubt exec and the test helper (indoubttest) write run directories through
// it; indoubt check, indoubt report, indoubt shrink and the evidence join read them
// through it. No other package of the module spells a line of these files.
//
// A run directory holds:
//
//   - history.jsonl: the history (package histories: its Header, then one Op a line);
//     a final read's op id is histories.FinalReadID's.
//   - faults.jsonl: what the nemesis did, one FaultLine a line, on the history's clock
//     (run_time, nanoseconds since the run started).
//   - config.json: what the run was asked (the runner's Config, or ExecConfig), with
//     the check limits it was judged under (CheckLimits).
//   - results.json: what the judge found (package results).
//   - report.html: a view of results.json.
package rundir

// The files of a run directory.
const (
	HistoryFile = "history.jsonl"
	FaultsFile  = "faults.jsonl"
	ConfigFile  = "config.json"
	ResultsFile = "results.json"
	ReportFile  = "report.html"
)
