package runner_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
)

func faultRun(t *testing.T, retry string, specs ...string) *results.Results {
	t.Helper()
	cfg := budgetConfig(t)
	cfg.Retry = policy(t, retry)
	cfg.Faults = parseSchedule(t, specs...)
	res, err := runner.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recheck(t, res)
	return res
}

// A naive retry after a cut that the server had committed applies the decrement twice:
// the checker sees a rejection while budget remains, and the ground truth names the
// operations.
func TestNaiveRetryAfterCommitCutIsCaught(t *testing.T) {
	res := faultRun(t, "naive", "commit-cut:0.2")
	if res.Verdict != checker.Invalid {
		t.Fatalf("verdict %v, want invalid: %s", res.Verdict, res.Summary)
	}
	if res.Faults.ByKind["commit-cut"] == 0 || res.Faults.ByTruth["applied"] != res.Faults.ByKind["commit-cut"] {
		t.Fatalf("faults %+v", res.Faults)
	}
	if res.Evidence == nil || len(res.Evidence.AppliedTwice) == 0 {
		t.Fatalf("no operation proven applied twice: %+v", res.Evidence)
	}
	commitsAddUp(t, res)
	oneReason(t, res)
	f := finalOf(t, res.Final)
	if f.Applied >= 1000 || *f.Balance != 0 {
		t.Errorf("applied %d balance %d: double application should leave fewer than 1000 acknowledged", f.Applied, *f.Balance)
	}
	// Every operation the truth proves applied twice was acknowledged once: the gap
	// between acknowledged and taken is what the duplicates took.
	var extra int
	for _, a := range res.Evidence.AppliedTwice {
		if a.OpID == "" || a.Invoke < 0 {
			t.Errorf("applied-twice entry without its operation: %+v", a)
		}
		extra++
	}
	if extra == 0 || len(res.Evidence.Disagreements) != 0 {
		t.Errorf("disagreements: %v", res.Evidence.Disagreements)
	}
}

func TestIdempotentRetryReconcilesExactly(t *testing.T) {
	for _, mech := range []string{"autocommit", "transaction"} {
		t.Run(mech, func(t *testing.T) {
			cfg := budgetConfig(t)
			cfg.Retry, cfg.Faults, cfg.Mechanism = policy(t, "idempotent"), parseSchedule(t, "commit-cut:0.2"), mech
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Verdict != checker.Valid {
				t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
			}
			f := finalOf(t, res.Final)
			if f.Applied != 1000 || f.Rejected != 600 || *f.Balance != 0 {
				t.Fatalf("applied %d rejected %d balance %d", f.Applied, f.Rejected, *f.Balance)
			}
			if res.Faults.ByKind["commit-cut"] == 0 || res.Retries.Total == 0 || f.Replayed == 0 {
				t.Fatalf("no cut was retried and replayed: faults %+v retries %d replayed %d", res.Faults, res.Retries.Total, f.Replayed)
			}
			if len(res.Evidence.AppliedTwice) != 0 || len(res.Evidence.Disagreements) != 0 {
				t.Fatalf("evidence: %+v", res.Evidence)
			}
			commitsAddUp(t, res)
			oneReason(t, res)
		})
	}
}

func TestMixedFaultsWithoutRetryLeaveInfoOperations(t *testing.T) {
	res := faultRun(t, "none", "commit-mixed:0.2")
	if res.Verdict != checker.Valid {
		t.Fatalf("verdict %v: %s", res.Verdict, res.Summary)
	}
	if res.Ops.Info == 0 || res.Faults.ByKind["commit-cut"] == 0 || res.Faults.ByKind["commit-drop"] == 0 {
		t.Fatalf("ops %+v faults %+v", res.Ops, res.Faults)
	}
	if res.Ops.Info != res.Faults.ByKind["commit-cut"]+res.Faults.ByKind["commit-drop"] {
		t.Errorf("%d info operations for %d faults", res.Ops.Info, res.Faults.ByKind["commit-cut"]+res.Faults.ByKind["commit-drop"])
	}
	// Each info operation is joined to what the proxy did to it.
	if int64(res.Evidence.AmbiguousTotal()) != res.Ops.Info {
		t.Errorf("%d ambiguous operations explained for %d info", res.Evidence.AmbiguousTotal(), res.Ops.Info)
	}
	f := finalOf(t, res.Final)
	cutApplied := res.Faults.ByTruth["applied"]
	// The balance fell by the acknowledged decrements plus the cuts that changed a row.
	if taken := f.Budget - *f.Balance; taken < f.Applied || taken > f.Applied+cutApplied {
		t.Errorf("balance fell by %d; acknowledged %d, cut after commit %d", taken, f.Applied, cutApplied)
	}
	if len(res.Evidence.Disagreements) != 0 {
		t.Errorf("disagreements: %v", res.Evidence.Disagreements)
	}
}

// commit-cut: committed, the client got an error, the op is info. commit-drop: not
// committed, the same error class.
func TestEachCommitFaultHasItsTruth(t *testing.T) {
	for _, tc := range []struct {
		fault, truth string
		taken        int64
	}{
		{"commit-cut:1,max=1", "applied", 1},
		{"commit-drop:1,max=1", "not-applied", 0},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			cfg := budgetConfig(t)
			cfg.Workers, cfg.Ops, cfg.Budget, cfg.Faults = 1, 1, 5, parseSchedule(t, tc.fault)
			res, err := runner.Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			recheck(t, res)
			if res.Ops.Info != 1 || res.Faults.ByTruth[tc.truth] != 1 {
				t.Fatalf("ops %+v faults %+v", res.Ops, res.Faults)
			}
			f := finalOf(t, res.Final)
			if got := f.Budget - *f.Balance; got != tc.taken {
				t.Fatalf("balance fell by %d, want %d", got, tc.taken)
			}
			if res.Errors["conn-closed"] != 1 {
				t.Errorf("client-visible errors %v", res.Errors)
			}
		})
	}
}

// One worker and the same seed give the same fault decisions, run after run.
func TestSameSeedSameFaultDecisions(t *testing.T) {
	decisions := func(seed int64) []string {
		cfg := budgetConfig(t)
		cfg.Workers, cfg.Ops, cfg.Budget, cfg.Seed = 1, 60, 1000, seed
		cfg.Retry, cfg.Faults = policy(t, "naive"), parseSchedule(t, "commit-mixed:0.3")
		res, err := runner.Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		recheck(t, res)
		_, ops, err := histories.ReadFile(filepath.Join(res.RunDir, "history.jsonl"), false)
		if err != nil {
			t.Fatal(err)
		}
		// The sequence of (operation, attempt count, fault kinds between) is the trace of
		// the decisions.
		var trace []string
		for _, op := range ops {
			switch {
			case op.Process == histories.Nemesis && (op.F == "commit-cut" || op.F == "commit-drop"):
				trace = append(trace, op.F)
			case op.Type != histories.Invoke && op.IsClient():
				b, _ := json.Marshal([]any{op.OpID, op.Type.String(), op.Attempt})
				trace = append(trace, string(b))
			}
		}
		return trace
	}
	a, b := decisions(7), decisions(7)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different decisions:\n%v\n%v", a, b)
	}
	faultsIn := func(tr []string) int {
		n := 0
		for _, s := range tr {
			if s == "commit-cut" || s == "commit-drop" {
				n++
			}
		}
		return n
	}
	if faultsIn(a) == 0 {
		t.Fatal("no fault fired in 60 operations at P=0.3")
	}
	if c := decisions(8); reflect.DeepEqual(a, c) {
		t.Errorf("seeds 7 and 8 made the same %d decisions", faultsIn(a))
	}
}

// commitsAddUp checks the plain-words split of the commit faults: every cut after
// commit is counted once as having changed rows, changed nothing, or not said.
func commitsAddUp(t *testing.T, res *results.Results) {
	t.Helper()
	c := res.Faults.Commits
	if c == nil {
		t.Fatal("results have no faults.commits")
	}
	if c.Committed != res.Faults.ByTruth["applied"] || c.NotCommitted != res.Faults.ByTruth["not-applied"] ||
		c.ChangedRows+c.Unchanged+c.EffectUnseen != c.Committed {
		t.Errorf("commits %+v do not add up to the truth %v", *c, res.Faults.ByTruth)
	}
}

// oneReason checks that a commit cut is retried under one reason whatever the policy
// and the statement: the connection closed.
func oneReason(t *testing.T, res *results.Results) {
	t.Helper()
	for reason := range res.Retries.ByReason {
		if reason != "conn-closed" {
			t.Errorf("retries by reason %v: want conn-closed alone after commit cuts", res.Retries.ByReason)
		}
	}
}
