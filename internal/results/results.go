// Package results holds results.json: what a run, or a re-check of a run directory,
// found and measured. The runner and `indoubt check` fill it; package report only
// renders it (the console, report.html, the stand's tables, junit.xml). A reader of
// results.json gets back the workload's typed final state (UnmarshalJSON).
//
// The verdict, its summary and its anomalies are copied from the checker's Result:
// nothing here decides. Evidence (the proxy's ground truth joined to operations),
// the process-fault timeline and the lost writes explain the verdict beside it.
// schemas/results.schema.json is the JSON Schema of the file, and SchemaVersion its
// version.
package results

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/catalog"
	"github.com/indoubt/indoubt/workloads"
)

// SchemaVersion is the version of results.json's layout, written in every results.json
// as schema_version; schemas/results.schema.json describes it. It changes when a key is
// removed or changes meaning, not when one is added.
const SchemaVersion = 1

// Results is results.json: everything a person or a CI job needs to judge a run.
type Results struct {
	// SchemaVersion is SchemaVersion when the run wrote it; 0 in results.json files
	// written before the field existed.
	SchemaVersion int             `json:"schema_version"`
	Verdict       checker.Verdict `json:"verdict"`
	Summary       string          `json:"summary"`
	Workload      workloads.Name  `json:"workload"`
	Store         string          `json:"store"`
	Mechanism     string          `json:"mechanism"`
	Retry         string          `json:"retry"`
	Seed          int64           `json:"seed"`
	Workers       int             `json:"workers"`
	Interrupted   bool            `json:"interrupted"`
	StartedAt     time.Time       `json:"started_at"`
	DurationS     float64         `json:"duration_s"`
	// Phases is where the run's wall time went, apart from writing its results; absent
	// in results written before it was added.
	Phases *Phases `json:"phases_s,omitempty"`
	// PhasesCPU is the CPU time (user and system, every thread) the process used in
	// each of those phases, in seconds: what the harness itself cost, the workload
	// apart from the check. It counts whatever else the process did meanwhile; absent
	// in results written before it was added.
	PhasesCPU *Phases  `json:"phases_cpu_s,omitempty"`
	Ops       OpCounts `json:"ops"`
	// Throughput is completed operations (ok, fail and info) per second of the run.
	Throughput float64 `json:"throughput"`
	// PerSecond is completed operations in each second of the run.
	PerSecond []int64     `json:"per_second"`
	LatencyMs Latency     `json:"latency_ms"`
	Retries   RetryCounts `json:"retries"`
	// Conflicts counts compare-and-set rounds lost inside store mechanisms (LWT loops).
	Conflicts int64 `json:"conflicts"`
	// Outcomes counts operations and their attempts by how the retry loop ended.
	Outcomes  Outcomes          `json:"outcomes"`
	Errors    map[string]int64  `json:"errors"`
	Faults    FaultCounts       `json:"faults"`
	Anomalies []checker.Anomaly `json:"anomalies"`
	// AnomalyCount is how many anomalies the checker found; Anomalies lists at most
	// --max-anomalies of them. 0 in files written before the field existed: see
	// AnomalyTotal.
	AnomalyCount int `json:"anomaly_count"`
	// AnomalyKinds counts every anomaly by kind, listed or not.
	AnomalyKinds map[string]int `json:"anomaly_kinds,omitempty"`
	// Evidence joins the proxy's ground truth to operations; never fed to the checker.
	Evidence *Evidence `json:"evidence,omitempty"`
	// ProcessFaults is the timeline of the process faults (kill, pause, restart) with
	// their figures; LostWrites the acknowledged writes found missing after them.
	ProcessFaults []ProcessFault `json:"process_faults,omitempty"`
	LostWrites    []LostWrite    `json:"lost_writes,omitempty"`
	// Partitions is the timeline of the partitions between the nodes of a topology
	// launched with a network of its own (partitions.go), and SplitBrain the windows in
	// which two or more of its nodes reported themselves primary.
	Partitions []Partition  `json:"partitions,omitempty"`
	SplitBrain []SplitBrain `json:"split_brain,omitempty"`
	// Leaders is who reported itself leader over the run (leaders.go), from the nodes'
	// role reports; nil without them.
	Leaders *Leaders `json:"leaders,omitempty"`
	// TwoPhase is the two-phase commit section of a transfer or two-rows run; nil for
	// the other workloads.
	TwoPhase *TwoPhase `json:"two_phase_commit,omitempty"`
	// Txn is what the transactional checker reported of a list-append or rw-register
	// history beside its anomalies (the models ruled out, the cycles as data); nil for
	// the other workloads.
	Txn *TxnCheck `json:"transactions,omitempty"`
	// Models is each part's verdict of a history held to several models at once; nil
	// for a history of one model.
	Models []ModelVerdict `json:"models,omitempty"`
	// Final is the workload's final state; nil when the run has none.
	Final   workloads.Final `json:"final"`
	RunDir  string          `json:"run_dir"`
	Server  string          `json:"server"`
	Proxied bool            `json:"proxied"`
	// NotWritten lists the files of the run directory that could not be written when
	// it was published, each as "file: why" ("report.html: no space left on device").
	// A view of the results (report.html) that cannot be written costs a line here,
	// not the verdict; the run is published without it, never with part of it.
	NotWritten []string `json:"not_written,omitempty"`
}

// UnmarshalJSON reads results.json back, with its `final` section as the typed final
// state of the run's workload. Its errors name the field and the JSON it holds
// (JSONError), never a Go type.
func (r *Results) UnmarshalJSON(b []byte) error {
	type plain Results
	aux := struct {
		*plain
		Final json.RawMessage `json:"final"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return JSONError(err)
	}
	f, err := catalog.DecodeFinal(r.Workload, aux.Final)
	if err != nil {
		return jsonError(err, "final.")
	}
	r.Final = f
	return nil
}

// OpCounts counts logical operations by how they ended. Final reads are included.
type OpCounts struct {
	Invoked int64 `json:"invoked"`
	OK      int64 `json:"ok"`
	Fail    int64 `json:"fail"`
	Info    int64 `json:"info"`
}

// Latency holds percentiles of operation latency, invocation to completion, retries
// included, in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// Phases is a run's wall time by phase, in seconds: starting the server (or reaching
// the one --dsn names) and the fault proxy, opening the store and setting up the
// workload, the workload with its final reads, checking the history, and stopping
// what the run started.
type Phases struct {
	Launch   float64 `json:"launch"`
	Setup    float64 `json:"setup"`
	Workload float64 `json:"workload"`
	Check    float64 `json:"check"`
	Stop     float64 `json:"stop"`
}

// RetryCounts accounts retries (attempts beyond the first) per outcome and per reason,
// never as one mixed total alone.
type RetryCounts struct {
	Total     int64            `json:"total"`
	ByReason  map[string]int64 `json:"by_reason"`
	ByOutcome RetryOutcomes    `json:"by_outcome"`
}

// RetryOutcomes splits retries by how their operation ended; Deadline counts the
// retries of operations that the run's deadline cut off, apart from the failures.
type RetryOutcomes struct {
	OK       int64 `json:"ok"`
	Fail     int64 `json:"fail"`
	Info     int64 `json:"info"`
	Deadline int64 `json:"deadline"`
}

// Add adds p's retries to r's.
func (r *RetryCounts) Add(p RetryCounts) {
	r.Total += p.Total
	r.ByReason = AddCounts(r.ByReason, p.ByReason)
	r.ByOutcome.OK += p.ByOutcome.OK
	r.ByOutcome.Fail += p.ByOutcome.Fail
	r.ByOutcome.Info += p.ByOutcome.Info
	r.ByOutcome.Deadline += p.ByOutcome.Deadline
}

// FaultCounts counts what the proxy did, by kind and by ground truth.
type FaultCounts struct {
	Schedule []string         `json:"schedule"`
	ByKind   map[string]int64 `json:"by_kind"`
	// ByTruth counts faults by the proxy's truth: "applied" for every cut after the
	// server committed, whatever the statement changed (Commits splits it).
	ByTruth map[string]int64 `json:"by_truth"`
	// Commits says in plain words what the commit faults did; nil before it existed.
	Commits *CommitCounts `json:"commits,omitempty"`
}

// CommitCounts splits the commit faults by what the server did: a cut after commit
// proves a commit, not a change (an UPDATE that matched no row commits too).
type CommitCounts struct {
	// Committed counts cuts after the server committed: the client got an error.
	Committed int64 `json:"committed"`
	// ChangedRows counts those whose reply proves rows changed ("UPDATE 1",
	// "INSERT 0 1", a CQL LWT's [applied]=true).
	ChangedRows int64 `json:"changed_rows"`
	// Unchanged counts those whose reply says nothing changed ("UPDATE 0", an LWT's
	// [applied]=false): committed without effect.
	Unchanged int64 `json:"unchanged"`
	// EffectUnseen counts those whose reply does not say what changed ("COMMIT",
	// "CALL", a script's result).
	EffectUnseen int64 `json:"effect_unseen"`
	// NotCommitted counts commits dropped before the server saw them.
	NotCommitted int64 `json:"not_committed"`
}

// String says it in a sentence.
func (c CommitCounts) String() string {
	return fmt.Sprintf("%d cut after the server committed (%d changed rows, %d changed nothing, %d whose reply does not say), %d dropped before the server saw them (not committed)",
		c.Committed, c.ChangedRows, c.Unchanged, c.EffectUnseen, c.NotCommitted)
}

// Evidence is the proxy's ground truth joined to the operations it hit. It is gathered
// beside the history and never fed to the checker; it confirms or contradicts what the
// checker inferred.
type Evidence struct {
	// Events counts the proxy's fault events; Joined those matched to an operation.
	Events int64 `json:"events"`
	Joined int64 `json:"joined"`
	// Ambiguous lists, per operation a fault hit, what the proxy did to it.
	Ambiguous []AmbiguousOp `json:"ambiguous"`
	// AppliedTwice lists the operations proven to have taken effect more than once:
	// by the final state's count of their op id, or by the proxy's truth for each
	// attempt (cut attempts whose reply shows changed rows, and an acknowledged attempt
	// whose own reply shows a change). Each item's Times and Proof say which.
	AppliedTwice []AmbiguousOp `json:"applied_twice"`
	// CommittedTwice lists operations with an attempt the proxy cut after a commit
	// whose reply does not show what it changed (COMMIT, CALL), retried: they may have
	// taken effect more than once, which is not proven either way.
	CommittedTwice []AmbiguousOp `json:"committed_twice"`
	// Replays lists operations the proxy proves committed once whose acknowledged
	// retry is proven to have changed nothing: its reply says so, a retry met the key
	// the first commit wrote, or the final state holds the op id once.
	Replays []AmbiguousOp `json:"replays"`
	// Requests say, for each API request whose response the proxy cut (an HTTP or gRPC
	// proxy) and whose Idempotency-Key is an operation's id, what became of it when the
	// history proves it: handled more than once (the final state's count of the key),
	// or its retry answered from the key's stored response (the client's reply says
	// "replayed": true, and the final state, when there is one, holds the key once).
	// Omitted when there is none.
	Requests []string `json:"requests,omitempty"`
	// RequestsCount is the exact length of Requests before --max-anomalies bounded it.
	RequestsCount int `json:"requests_count,omitempty"`
	// AmbiguousCount, AppliedTwiceCount, CommittedTwiceCount and ReplaysCount are the
	// exact lengths of those lists before --max-anomalies bounded them.
	AmbiguousCount      int `json:"ambiguous_count"`
	AppliedTwiceCount   int `json:"applied_twice_count"`
	CommittedTwiceCount int `json:"committed_twice_count"`
	ReplaysCount        int `json:"replays_count"`
	// TimesApplied counts the operations of AppliedTwice by how many times each took
	// effect (2, 3, ...), over the whole list.
	TimesApplied map[int]int `json:"times_applied,omitempty"`
	// Disagreements say where the checker's inference and the ground truth differ.
	Disagreements []string `json:"disagreements"`
}

// AmbiguousOp is one operation a fault hit.
type AmbiguousOp struct {
	OpID    string `json:"op_id"`
	Process int    `json:"process"`
	// Invoke is the history index of the operation's invocation.
	Invoke int64 `json:"invoke"`
	// Completion is the history type the operation ended with: ok, fail or info.
	Completion string `json:"completion"`
	Conn       string `json:"conn"`
	Fault      string `json:"fault"`
	// Truth is what the proxy's fault did (applied, not-applied) or, in the lists of
	// claims, what is proven of the operation: applied (more than once), replayed,
	// committed (by a cut, with nothing proven of its retry).
	Truth string `json:"truth"`
	// Times is how many times the operation is proven to have taken effect, and Proof
	// what proves it (ProofFinalState, ProofProxy); both empty where nothing is
	// counted.
	Times int    `json:"times,omitempty"`
	Proof string `json:"proof,omitempty"`
	// Sentence says it in words, claiming only what is proven.
	Sentence string `json:"sentence"`
}

// What proves an AmbiguousOp's Times.
const (
	// ProofFinalState: the final state holds the operation's op id Times times.
	ProofFinalState = "final-state"
	// ProofProxy: the proxy's truth for each attempt, and the acknowledged attempt's
	// own reply as the client recorded it; a lower bound.
	ProofProxy = "proxy"
)
