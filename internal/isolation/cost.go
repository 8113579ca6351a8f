package isolation

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/txn"
)

// Cost is the random list-append workload's price at one level: every level runs the
// same transactions (same seed, workers and count), conflicts retried by the conflict
// policy, and the history checked for the level's own model.
type Cost struct {
	Level Level `json:"level"`
	// CommittedPerSecond is committed transactions per second of the run.
	CommittedPerSecond float64 `json:"committed_per_second"`
	// LatencyP50 and LatencyP99 are a transaction's, retries included, in ms.
	LatencyP50 float64 `json:"latency_p50_ms"`
	LatencyP99 float64 `json:"latency_p99_ms"`
	// Aborts are the retried conflicts by reason (serialization-failure, deadlock);
	// AbortsPerCommit their total over the committed transactions.
	Aborts          map[string]int64 `json:"aborts"`
	AbortsPerCommit float64          `json:"aborts_per_commit"`
	Committed       int64            `json:"committed"`
	// Transactions the checker judged, and its verdict for the level's model.
	Transactions int             `json:"transactions"`
	Verdict      checker.Verdict `json:"verdict"`
	Summary      string          `json:"summary"`
	// Out is the run directory.
	Out string `json:"out"`
}

func (c Cost) abortsText() string {
	if len(c.Aborts) == 0 {
		return "none"
	}
	var keys []string
	for k := range c.Aborts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, c.Aborts[k]))
	}
	return strings.Join(parts, ", ")
}

// CostOptions size the random workload.
type CostOptions struct {
	Workers, TxnsPerWorker int
	Seed                   int64
	// Out is a directory under which each level's run directory is made.
	Out string
}

// MeasureCost runs the random list-append workload at each level on the server dsn
// names.
func MeasureCost(ctx context.Context, dsn string, levels []Level, opt CostOptions) ([]Cost, error) {
	var costs []Cost
	for _, l := range levels {
		out := fmt.Sprintf("%s/cost-%s", opt.Out, l)
		res, p, err := runAt(ctx, dsn, l, opt, out, txn.Options{})
		if err != nil {
			return nil, fmt.Errorf("random workload at %s: %w", l, err)
		}
		c := Cost{Level: l, LatencyP50: res.LatencyMs.P50, LatencyP99: res.LatencyMs.P99, Aborts: res.Retries.ByReason,
			Committed: p.committed, Verdict: res.Verdict, Summary: res.Summary, Out: out,
			CommittedPerSecond: p.perSecond, AbortsPerCommit: p.abortsPerCommit}
		if res.Txn != nil {
			c.Transactions = res.Txn.Transactions
		}
		costs = append(costs, c)
	}
	return costs, nil
}

// Contention is the articles' contention row as isolation: read-modify-write
// transactions on one hot key at a level, the history checked for serializability, so
// that what the level lets through is named (lost updates and the cycles behind them
// at READ COMMITTED) and what it prevents is priced (serialization-failure aborts per
// committed transaction, retried).
type Contention struct {
	Level Level `json:"level"`
	// Verdict is the serializability check's; Anomalies counts what it found by kind.
	Verdict   checker.Verdict  `json:"verdict"`
	Summary   string           `json:"summary"`
	Anomalies map[string]int   `json:"anomalies,omitempty"`
	Committed int64            `json:"committed"`
	Aborts    map[string]int64 `json:"aborts"`
	// AbortsPerCommit and CommittedPerSecond price the prevention.
	AbortsPerCommit    float64 `json:"aborts_per_commit"`
	CommittedPerSecond float64 `json:"committed_per_second"`
	// Cycle is the first cycle's explanation, when the check found one.
	Cycle string `json:"cycle,omitempty"`
}

// MeasureContention runs read-modify-write transactions on one hot key at each level
// on the server dsn names, each history checked for serializability.
func MeasureContention(ctx context.Context, dsn string, levels []Level, opt CostOptions) ([]Contention, error) {
	var out []Contention
	for _, l := range levels {
		res, p, err := runAt(ctx, dsn, l, opt, fmt.Sprintf("%s/contention-%s", opt.Out, l),
			txn.Options{Keys: 1, Pattern: txn.ReadModifyWrite, MaxWritesPerKey: 1 << 20, ConsistencyModels: []string{"serializable"}})
		if err != nil {
			return nil, fmt.Errorf("hot-key read-modify-write at %s: %w", l, err)
		}
		c := Contention{Level: l, Verdict: res.Verdict, Summary: res.Summary, Anomalies: res.AnomalyKinds, Committed: p.committed, Aborts: res.Retries.ByReason,
			CommittedPerSecond: p.perSecond, AbortsPerCommit: p.abortsPerCommit}
		for _, a := range res.Anomalies {
			if strings.Contains(a.Explanation, "a cycle of") {
				c.Cycle = a.Kind + ": " + a.Explanation
				break
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// price is what a run at a level committed, and at what rate and cost in aborts.
type price struct {
	committed                  int64
	perSecond, abortsPerCommit float64
}

// runAt runs list-append transactions with opts at level l on the server dsn names,
// retried under the conflict policy, into the directory out, and prices the run.
func runAt(ctx context.Context, dsn string, l Level, opt CostOptions, out string, opts txn.Options) (*results.Results, price, error) {
	pol, err := runner.ParsePolicy("conflict")
	if err != nil {
		return nil, price{}, err
	}
	res, err := runner.Run(ctx, runner.Config{
		Workload: workloads.ListAppend, Store: runner.Postgres, DSN: dsn, Isolation: string(l),
		Workers: opt.Workers, Ops: opt.TxnsPerWorker, Seed: opt.Seed, Retry: pol, Out: out, Txn: opts,
	})
	if err != nil {
		return nil, price{}, err
	}
	f, _ := res.Final.(txn.Final)
	p := price{committed: f.Committed}
	if res.DurationS > 0 {
		p.perSecond = float64(f.Committed) / res.DurationS
	}
	if f.Committed > 0 {
		p.abortsPerCommit = float64(res.Retries.Total) / float64(f.Committed)
	}
	return res, p, nil
}

func (c Contention) text() string {
	if c.Verdict == checker.Valid {
		return fmt.Sprintf("serializable; %.2f aborts/commit", c.AbortsPerCommit)
	}
	var kinds []string
	for k, n := range c.Anomalies {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	return fmt.Sprintf("%s: %s; %.2f aborts/commit", c.Verdict, strings.Join(kinds, ", "), c.AbortsPerCommit)
}
