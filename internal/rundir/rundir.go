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
//   - config.json: what the run was asked (the runner's Config, or ExecConfig).
//   - check.json: what the judge takes beside the history (Check): the bounds of the
//     run's search, and the final state the run read.
//   - results.json: what the judge found (package results).
//   - report.html: a view of results.json.
package rundir

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/atomicfile"
	"github.com/indoubt/indoubt/internal/results"
)

// The files of a run directory.
const (
	HistoryFile = "history.jsonl"
	FaultsFile  = "faults.jsonl"
	ConfigFile  = "config.json"
	ResultsFile = "results.json"
	ReportFile  = "report.html"
)

// CheckFile is check.json: what the judge takes from a run beside its history and
// faults.jsonl (Check).
const CheckFile = "check.json"

// Check is check.json: the bounds the run's check searched under, which a re-check
// uses again, and what the run knew that its history does not hold. A run directory
// without it (written before it existed, or by another program) is judged with no
// bounds and no final state beside the history.
type Check struct {
	// Limits are the bounds of the search checkers.
	Limits Limits `json:"limits"`
	// Proxied is true when the run went through the fault proxy: its faults.jsonl
	// holds the proxy's every event, and the evidence joins them.
	Proxied bool `json:"proxied"`
	// Final is the workload's final state as the run read it (results.json's `final`
	// section before the proxy's ground truth reconciled it): the state read from the
	// server after the workers stopped and the figures of the server only the run saw
	// (restart counters). Absent for a run that has none.
	Final json.RawMessage `json:"final,omitempty"`
}

// Limits bound a search checker (checker.Options): when either runs out the verdict
// is unknown. Zero is no bound.
type Limits struct {
	// Timeout is in nanoseconds.
	Timeout   time.Duration `json:"timeout_ns"`
	MaxMemory int64         `json:"max_memory_bytes"`
}

// String says the limits in words: "timeout 1m0s, no memory bound".
func (l Limits) String() string {
	t, m := "no timeout", "no memory bound"
	if l.Timeout > 0 {
		t = "timeout " + l.Timeout.String()
	}
	if l.MaxMemory > 0 {
		m = fmt.Sprintf("max memory %d MiB", l.MaxMemory>>20)
	}
	return t + ", " + m
}

// WriteCheck writes check.json into dir, whole or not at all.
func WriteCheck(dir string, c Check) error {
	return WriteJSON(filepath.Join(dir, CheckFile), c)
}

// ReadCheck reads dir's check.json; ok is false when there is none.
func ReadCheck(dir string) (c Check, ok bool, err error) {
	b, err := ReadFileBounded(filepath.Join(dir, CheckFile), MaxResultsSize)
	if errors.Is(err, fs.ErrNotExist) {
		return Check{}, false, nil
	}
	if err != nil {
		return Check{}, false, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Check{}, false, fmt.Errorf("%s: %v", filepath.Join(dir, CheckFile), results.JSONError(err))
	}
	return c, true, nil
}

// WriteJSON writes v as indented JSON to path, whole or not at all, readable by its
// owner only: config.json and results.json carry the configuration, and a run
// directory is its owner's.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(b, '\n'), 0o600)
}

// ExecConfig is config.json of an `indoubt exec` run: what it was asked, the DSN's
// secrets masked. (config.json of `indoubt run` is the runner's Config.)
type ExecConfig struct {
	// Command is "exec".
	Command  string                     `json:"command"`
	Argv     []string                   `json:"argv"`
	Store    string                     `json:"store"`
	DSN      string                     `json:"dsn"`
	Upstream string                     `json:"upstream"`
	Faults   []string                   `json:"faults"`
	Seed     int64                      `json:"seed"`
	Model    string                     `json:"model"`
	Params   map[string]json.RawMessage `json:"params"`
	FinalSQL string                     `json:"final_sql"`
	FinalCmd string                     `json:"final_cmd"`
	Match    string                     `json:"match"`
	// Grace is written as a duration ("10s").
	Grace string `json:"grace"`
}

// WriteHistory writes dir's history.jsonl: the header hdr, then ops (renumbered from
// 0, as histories.Writer numbers them).
func WriteHistory(dir string, hdr histories.Header, ops []histories.Op) error {
	w, err := histories.Create(filepath.Join(dir, HistoryFile), hdr)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if _, err := w.Write(op); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// MaxAnomalies is the bound dir's config.json names for results.json's lists
// (max_anomalies), or results.DefaultMaxAnomalies.
func MaxAnomalies(dir string) int {
	var c struct {
		MaxAnomalies int `json:"max_anomalies"`
	}
	if b, err := ReadFileBounded(filepath.Join(dir, ConfigFile), maxConfigSize); err == nil {
		_ = json.Unmarshal(b, &c)
	}
	if c.MaxAnomalies <= 0 {
		return results.DefaultMaxAnomalies
	}
	return c.MaxAnomalies
}
