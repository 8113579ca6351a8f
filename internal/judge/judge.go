// Package judge is the one judge of a run directory: from its files alone (history.jsonl,
// faults.jsonl, check.json) it reaches the verdict, the anomalies, the lost writes, the
// proxy's evidence joined to the operations with the final state reconciled, and the
// timelines of the process faults, the partitions and the leaders. indoubt run, indoubt
// exec, the test helper and `indoubt check RUNDIR` all call it, so a run directory
// re-checked gives what the run gave: the directory is the evidence, the checker the
// only judge.
//
// The figures of the operations (outcomes, retries by reason and outcome, errors,
// conflicts, completions per second) are the judge's too, counted from the history as
// it was recorded (Figures). What only the run could measure (its length, throughput
// and latency as it timed them, its workers, the server's description) is the
// caller's to add.
package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/catalog"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/workloads"
)

// Options adjust a judgement.
type Options struct {
	// Limits, when set, replace the bounds check.json names (a re-check with other
	// limits); Judgement.Limits says which were used and Judgement.OtherLimits that
	// they differ from the run's.
	Limits *rundir.Limits
	// VisualizePath receives porcupine's visualization of a register history; "" for
	// none.
	VisualizePath string
}

// Judgement is what the judge found.
type Judgement struct {
	// Results holds the judged sections of results.json: verdict, summary, anomalies
	// (all of them: the caller trims), lost writes, the transactional details, the
	// operation counts and figures, the fault counts, the evidence, the final state
	// reconciled with the proxy's truth, and the timelines.
	Results *results.Results
	// Checked is the checker's result as it returned it.
	Checked checker.Result
	// Header and Ops are the history read.
	Header *histories.Header
	Ops    []histories.Op
	// Events are the proxy's events of faults.jsonl on the history's clock; Spans the
	// attempts they were joined to (evidence.SpansFromHistory).
	Events []evidence.FaultEvent
	Spans  []evidence.Span
	// Limits are the bounds the check ran under; RunLimits those check.json names
	// (nil when it names none).
	Limits    rundir.Limits
	RunLimits *rundir.Limits
	// CheckErr is the checker's error when it reached a verdict all the same (the
	// visualization could not be written).
	CheckErr error
}

// OtherLimits reports whether the check ran under other bounds than the run's, and
// says how in a sentence; false when the run's are not known.
func (j *Judgement) OtherLimits() (string, bool) {
	if j.RunLimits == nil || *j.RunLimits == j.Limits {
		return "", false
	}
	return fmt.Sprintf("checked with %s; the run was checked with %s", j.Limits, *j.RunLimits), true
}

// Dir judges the run directory dir from its files alone.
func Dir(ctx context.Context, dir string, opt Options) (*Judgement, error) {
	// A run directory may come from elsewhere: a FIFO or a device in place of its
	// history would hold the judge forever.
	f, err := rundir.OpenRegular(filepath.Join(dir, rundir.HistoryFile))
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	f.Close()
	h, ops, err := histories.ReadFileContext(ctx, filepath.Join(dir, rundir.HistoryFile), false)
	if err != nil {
		return nil, err
	}
	return History(ctx, dir, h, ops, opt)
}

// History judges the run directory dir whose history.jsonl the caller has read already
// (h and ops): the runner reads it once, for the workload's final state. When ctx ends
// the check stops within moments, its verdict unknown (checker.Check); a run that was
// interrupted and is still judged passes context.WithoutCancel.
func History(ctx context.Context, dir string, h *histories.Header, ops []histories.Op, opt Options) (*Judgement, error) {
	c, ok, err := rundir.ReadCheck(dir)
	if err != nil {
		return nil, err
	}
	j := &Judgement{Header: h, Ops: ops}
	if ok {
		l := c.Limits
		j.RunLimits, j.Limits = &l, l
	}
	if opt.Limits != nil {
		j.Limits = *opt.Limits
	}
	lines, err := rundir.ReadFaultsFile(filepath.Join(dir, rundir.FaultsFile))
	if err != nil {
		return nil, err
	}
	j.Events, _ = evidence.EventsOf(lines)
	copt := checker.Options{Timeout: j.Limits.Timeout, MaxMemory: j.Limits.MaxMemory, VisualizePath: opt.VisualizePath}
	v, err := checker.Check(ctx, h, ops, copt)
	if err != nil && v.Verdict == 0 {
		return nil, fmt.Errorf("check: %w", err)
	}
	j.Checked, j.CheckErr = v, err
	res := &results.Results{
		SchemaVersion: results.SchemaVersion,
		Verdict:       v.Verdict, Summary: v.Summary,
		Anomalies: v.Anomalies, LostWrites: v.LostWrites,
		Faults: results.FaultCounts{ByKind: map[string]int64{}, ByTruth: map[string]int64{}},
	}
	if h != nil {
		res.Workload, res.Store, res.Seed = workloads.Name(h.Workload), h.Store, h.Seed
	}
	if res.Anomalies == nil {
		res.Anomalies = []checker.Anomaly{}
	}
	res.AnomalyCount = results.AnomalyCountOf(v)
	res.Txn = results.TxnCheckOf(v, consistencyModels(h))
	res.Models = results.ModelsOf(v)
	res.Ops = CountOps(ops)
	res.ProcessFaults = results.ProcessTimeline(ops, res.LostWrites)
	res.Partitions, res.SplitBrain = results.PartitionTimeline(ops, res.LostWrites)
	res.Leaders = LeaderTimeline(ops)
	final, err := finalOf(h, c.Final)
	if err != nil {
		return nil, err
	}
	res.Final = final
	if c.Proxied || !ok && len(j.Events) > 0 {
		res.Proxied = true
		for _, e := range j.Events {
			res.Faults.ByKind[e.Kind]++
			res.Faults.ByTruth[e.Truth]++
		}
		commits := evidence.Tally(j.Events)
		res.Faults.Commits = &commits
		j.Spans = evidence.SpansFromHistory(ops, j.Events)
		res.Evidence, res.Final = evidence.Join(j.Events, j.Spans, ops, final, v.Verdict == checker.Invalid)
		if final == nil {
			res.Final = nil
		}
	} else if final != nil {
		// No proxy, no ground truth: the final state is reconciled with none (a
		// counter's lost and extra increments).
		res.Final, _ = evidence.Reconcile(final, evidence.Truth{})
	}
	Figures(res, ops, 0)
	if h != nil {
		if tx, ok := TwoPhaseTransactions(h.Workload, ops); ok {
			res.TwoPhase = &results.TwoPhase{Transactions: tx, Recovery: []results.Resolution{}}
		}
	}
	j.Results = res
	return j, nil
}

// finalOf decodes check.json's final state for the history's workload; nil when there
// is none.
func finalOf(h *histories.Header, raw json.RawMessage) (workloads.Final, error) {
	if h == nil || len(raw) == 0 {
		return nil, nil
	}
	f, err := catalog.DecodeFinal(workloads.Name(h.Workload), raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rundir.CheckFile, err)
	}
	return f, nil
}

// consistencyModels are the models a transactional history was checked for, as its
// header names them.
func consistencyModels(h *histories.Header) []string {
	if h == nil {
		return nil
	}
	var ms []string
	if raw, ok := h.Params["consistency_models"]; ok {
		_ = json.Unmarshal(raw, &ms)
	}
	return ms
}

// CountOps counts the history's operations by how they ended: results.json's ops.
// An operation never completed counts as info (its outcome is unknown), final reads
// included.
func CountOps(ops []histories.Op) results.OpCounts {
	var c results.OpCounts
	all, err := histories.Pair(ops)
	if err != nil {
		return c
	}
	for _, o := range all {
		c.Invoked++
		switch o.Type() {
		case histories.OK:
			c.OK++
		case histories.Fail:
			c.Fail++
		default:
			c.Info++
		}
	}
	return c
}

// Exists reports whether dir holds a run's history.
func Exists(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, rundir.HistoryFile))
	return err == nil && fi.Mode().IsRegular()
}

// Onto returns run (a results.json read back) with its judged sections replaced by
// judged's: verdict, summary, anomalies, lost writes, transactional details, operation
// and fault counts, evidence, final state (when the directory holds one: check.json)
// and timelines. What only the run measured
// (its times, throughput, latency, retries, errors, the server) stays as run has it.
// run is not changed.
func Onto(run, judged *results.Results) *results.Results {
	out := *run
	out.Verdict, out.Summary = judged.Verdict, judged.Summary
	out.Anomalies, out.AnomalyCount, out.AnomalyKinds = judged.Anomalies, judged.AnomalyCount, judged.AnomalyKinds
	out.LostWrites, out.Txn, out.Ops = judged.LostWrites, judged.Txn, judged.Ops
	out.Faults.ByKind, out.Faults.ByTruth, out.Faults.Commits = judged.Faults.ByKind, judged.Faults.ByTruth, judged.Faults.Commits
	out.Evidence, out.Proxied = judged.Evidence, judged.Proxied
	if judged.Final != nil {
		// A directory written before check.json held the final state keeps the one
		// results.json has.
		out.Final = judged.Final
	}
	out.ProcessFaults, out.Partitions, out.SplitBrain = judged.ProcessFaults, judged.Partitions, judged.SplitBrain
	out.Leaders = judged.Leaders
	return &out
}
