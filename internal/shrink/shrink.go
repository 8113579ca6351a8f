// Package shrink reduces a failing run to the smallest run that still fails the same
// way, and says how to make it again.
//
// A run directory holds what is needed: config.json (the configuration, secrets
// masked), faults.jsonl (every commit fault that fired, with the commit point it hit)
// and the history (every process fault applied). Shrink re-runs the configuration with
// the recorded faults made explicit, one listed fault per event (faults' listed faults:
// commit-cut@commit:57 fires at that commit point and nowhere else, whatever the seed),
// then reduces it in this order, keeping a candidate only when it fails with the same
// Fingerprint in at least half of K runs:
//
//  1. the faults, by delta debugging (ddmin, Zeller and Hildebrandt's minimizing
//     algorithm, as DEMi applies it to the external events of a distributed run): no
//     fault at all first, then halves, quarters, ... and their complements;
//  2. each fault left, made simpler: a listed commit fault at an earlier point, a
//     process fault or a window shorter and earlier;
//  3. the run: fewer registers (a smaller budget for the budget workload), fewer
//     workers, fewer operations per worker, a shorter duration. The state goes first:
//     a smaller budget is exhausted by fewer operations, so the others can shrink
//     after it; a smaller state whose run invokes more operations (a run of a
//     duration, whose workers then spend it on quick rejections) is not kept.
//
// Phases 2 and 3 are repeated while one of them still gains. K is chosen from how
// flaky the failure is: the explicit baseline runs until it fails once, and K is 3
// when it failed at the first run, more when it took several (so that a candidate that
// fails as often as the baseline is missed less than one time in twenty), at most 10.
// A candidate stops at its runs as soon as the half is reached or out of reach.
// Half, not one: a failure that is a race (an acknowledged write lost on failover to
// an asynchronous standby) fails one run in three at a size where it fails every run
// at a larger one, and a search that kept each candidate on one failing run in K went
// down a path of such candidates, none of which reproduced the failure afterwards.
//
// The smallest candidate is then confirmed: run K more times, it must fail with the
// fingerprint in at least half of them again, else the candidate kept before it is
// tried the same way, down to the baseline. shrink.json says how often the reproducer
// failed again.
//
// A time budget bounds the search: no run starts once it is spent (the run in flight
// finishes). Every run is a normal run directory under Options.Out; the runs that did
// not become the smallest failing one are removed as the search goes, so Out ends with
// that one and shrink.json (Result), written when the search ends.
package shrink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/register"
)

// SchemaVersion is the version of shrink.json's layout.
const SchemaVersion = 1

// DefaultBudget is the time budget when Options gives none.
const DefaultBudget = 10 * time.Minute

// Bounds of K, the runs a candidate gets to fail.
const (
	defaultReruns = 3
	maxReruns     = 10
	// baselineRuns is how many runs the explicit baseline gets to fail once.
	baselineRuns = 2 * defaultReruns
)

// ErrNothingToShrink is returned for a run that did not fail: valid, or unknown.
var ErrNothingToShrink = errors.New("nothing to shrink")

// ErrNotReproduced is returned when the run's configuration with its faults made
// explicit did not fail again with the run's fingerprint.
var ErrNotReproduced = errors.New("did not fail again")

// Options configures a shrink.
type Options struct {
	// Out is the directory the runs and shrink.json go to. It is created, and must not
	// exist already.
	Out string
	// Budget bounds the search's wall time (DefaultBudget when 0).
	Budget time.Duration
	// Reruns is K, the runs a candidate gets to fail with the fingerprint; 0 chooses
	// it from the baseline.
	Reruns int
	// DSN, when set, is the server to run against in place of the run's: config.json
	// masks a DSN's password, so a run made with --dsn needs it given again.
	DSN string
	// Progress receives a line for the baseline, each accepted step and the end; nil
	// for none.
	Progress io.Writer
}

// Result is shrink.json: where the search started, what it kept, and each step.
type Result struct {
	SchemaVersion int `json:"schema_version"`
	// Fingerprint is the failure every kept run shows.
	Fingerprint Fingerprint `json:"fingerprint"`
	// Original is the run shrunk, as recorded; Explicit its faults made explicit.
	Original Size    `json:"original"`
	Explicit []Fault `json:"explicit"`
	// Notes say what could not be made explicit.
	Notes []string `json:"notes,omitempty"`
	// Smallest is the smallest failing run: its directory, the command that makes it,
	// and the faults it needs.
	Smallest Size `json:"smallest"`
	// Confirmed says how the smallest run's configuration failed again when run once
	// more after the search (see the package documentation).
	Confirmed string `json:"confirmed,omitempty"`
	// Reruns is K; Baseline how many runs the explicit baseline took to fail once.
	Reruns   int `json:"reruns"`
	Baseline int `json:"baseline_runs"`
	// Steps are the candidates tried, in order.
	Steps []Step `json:"steps"`
	// Runs counts every run made; WallS is the search's wall time in seconds.
	Runs  int     `json:"runs"`
	WallS float64 `json:"wall_s"`
	// Stopped says why the search ended: done (nothing smaller failed), budget (the
	// time budget was spent) or interrupted.
	Stopped string `json:"stopped"`
}

// Size is one run's size and how to make it again.
type Size struct {
	RunDir string `json:"run_dir"`
	// Command is the one-line indoubt run command (Command) that makes the run.
	Command string `json:"command,omitempty"`
	Workers int    `json:"workers"`
	// OpsPerWorker is the run's operations per worker, 0 for a run of a duration.
	OpsPerWorker int     `json:"ops_per_worker"`
	DurationS    float64 `json:"duration_s"`
	// Keys is the register workload's number of registers; Budget the budget
	// workload's initial balance.
	Keys   int   `json:"keys,omitempty"`
	Budget int64 `json:"budget,omitempty"`
	// Operations is how many operations the run invoked, its final reads included.
	Operations int64 `json:"operations"`
	// Schedule is the fault schedule as written; Faults the faults that fired, one
	// each (for the smallest run: the explicit list it needs).
	Schedule []string `json:"schedule"`
	Faults   []Fault  `json:"faults"`
	Verdict  string   `json:"verdict"`
	Summary  string   `json:"summary"`
}

// Step is one candidate tried.
type Step struct {
	// Phase is faults, simplify or size (or baseline).
	Phase string `json:"phase"`
	// Change says what the candidate changed: "kept 209 of 418 faults", "workers 16 → 8".
	Change string `json:"change"`
	// Kept is true when the candidate failed with the fingerprint and became the
	// smallest so far.
	Kept bool `json:"kept"`
	// Runs is how many runs it took; Note why it took none (not a valid run) or what
	// kept a run from a verdict.
	Runs     int     `json:"runs"`
	ElapsedS float64 `json:"elapsed_s"`
	Note     string  `json:"note,omitempty"`
}

// LoadRun reads a run directory's configuration and results. It refuses, with one line,
// a run that did not fail (ErrNothingToShrink) and one whose configuration cannot be run
// again: a DSN whose password config.json masks, unless dsn gives it.
func LoadRun(dir, dsn string) (runner.Config, *results.Results, error) {
	var res results.Results
	if err := readJSON(filepath.Join(dir, "results.json"), &res); err != nil {
		return runner.Config{}, nil, err
	}
	switch res.Verdict {
	case checker.Invalid:
	case checker.Valid:
		return runner.Config{}, nil, fmt.Errorf("%w: the run was valid", ErrNothingToShrink)
	default:
		return runner.Config{}, nil, fmt.Errorf("%w: the run's verdict was %s (%s)", ErrNothingToShrink, res.Verdict, res.Summary)
	}
	if _, ok := FingerprintOf(&res); !ok {
		return runner.Config{}, nil, fmt.Errorf("%w: the run is invalid but names no anomaly", ErrNothingToShrink)
	}
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return runner.Config{}, nil, err
	}
	cfg, err := runner.ReadConfig(b)
	if err != nil {
		return runner.Config{}, nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := refuseInstructions(cfg, dsn); err != nil {
		return runner.Config{}, nil, err
	}
	if dsn != "" {
		if len(cfg.DSNs) > 0 {
			return runner.Config{}, nil, fmt.Errorf("the run was over %d servers (DSNs): one DSN cannot stand for them", len(cfg.DSNs))
		}
		if cfg.DSN == "" {
			return runner.Config{}, nil, fmt.Errorf("the run launched its own server; it takes no DSN")
		}
		cfg.DSN = dsn
	}
	for _, d := range append([]string{cfg.DSN}, cfg.DSNs...) {
		if masked(d) {
			return runner.Config{}, nil, fmt.Errorf("the run's DSN %s has its password masked in config.json: give it again with --dsn", d)
		}
	}
	return cfg, &res, nil
}

// masked reports whether a DSN carries a secret that redact masked: it holds the Mask
// where a secret goes (any other text there is masked the same way), not merely
// somewhere else (a host of that name would show).
func masked(dsn string) bool {
	if !strings.Contains(dsn, redact.Mask) {
		return false
	}
	return redact.DSN(strings.ReplaceAll(dsn, redact.Mask, "p")) == redact.DSN(dsn)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

// shrinker is one search's state.
type shrinker struct {
	ctx      context.Context
	opt      Options
	fp       Fingerprint
	k        int
	start    time.Time
	deadline time.Time
	stopped  string

	// cur is the smallest failing configuration so far, with its faults as a list and
	// its run; base is the list at the start of the search (its faults' positions are
	// ddmin's indices).
	cur    runner.Config
	curFs  []Fault
	curRes *results.Results
	res    *Result
	// rejected holds the candidates that did not fail (by their command): a later pass
	// that comes back to one does not run it again.
	rejected map[string]bool
	// needsFaults is set once the run without any fault was tried and passed: later
	// passes do not try it again.
	needsFaults bool
	// kept are the candidates kept, the baseline first, for confirm to fall back on;
	// baseRes is the baseline's failing run, kept until the end for the same reason.
	kept    []candidate
	baseRes *results.Results
}

// candidate is a configuration the search kept, with its faults as a list.
type candidate struct {
	cfg    runner.Config
	list   []Fault
	change string
}

// Shrink shrinks the failing run in dir (see the package documentation). It returns
// the result, also written to Out/shrink.json; with an error nothing is left in Out.
// The errors: ErrNothingToShrink and a configuration that cannot be run again (from
// LoadRun), ErrNotReproduced, runner.ErrCouldNotRun when no run of the baseline reached
// a verdict, and a directory that cannot be written. When ctx ends, the search stops
// and the result so far is written (Stopped: interrupted).
func Shrink(ctx context.Context, dir string, opt Options) (*Result, error) {
	cfg, orig, err := LoadRun(dir, opt.DSN)
	if err != nil {
		return nil, err
	}
	if opt.Budget <= 0 {
		opt.Budget = DefaultBudget
	}
	if opt.Reruns < 0 || opt.Reruns > maxReruns {
		return nil, fmt.Errorf("reruns %d: want 1 to %d, or 0 to choose from the baseline", opt.Reruns, maxReruns)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("the run's configuration: %w", err)
	}
	_, ops, err := histories.ReadFile(filepath.Join(dir, "history.jsonl"), false)
	if err != nil {
		return nil, err
	}
	list, notes, err := explicit(dir, cfg, ops)
	if err != nil {
		return nil, err
	}
	out, err := filepath.Abs(opt.Out)
	if err != nil {
		return nil, err
	}
	opt.Out = out
	left, err := prepareOut(out)
	if err != nil {
		return nil, err
	}
	if left != "" {
		notes = append(notes, left)
	}
	fp, _ := FingerprintOf(orig)
	s := &shrinker{ctx: ctx, opt: opt, fp: fp, start: time.Now(), rejected: map[string]bool{}}
	s.deadline = s.start.Add(opt.Budget)
	s.res = &Result{SchemaVersion: SchemaVersion, Fingerprint: fp, Original: sizeOf(dir, cfg, orig, list), Explicit: list, Notes: notes, Steps: []Step{}}
	s.res.Original.RunDir = dir
	for _, n := range notes {
		s.progressf("note: %s", n)
	}
	cfg.Progress, cfg.OnProgress, cfg.Out = nil, nil, out
	if err := s.baseline(cfg, list); err != nil {
		os.RemoveAll(out)
		return nil, err
	}
	s.search()
	if s.stopped == "" {
		s.stopped = "done"
	}
	if s.stopped != "interrupted" {
		s.confirm()
	}
	if s.curRes != s.baseRes {
		s.remove(s.baseRes.RunDir)
	}
	if err := s.finish(); err != nil {
		return nil, err
	}
	return s.res, nil
}

// baseline runs the configuration with its faults made explicit until it fails with
// the fingerprint, and chooses K from how many runs that took.
func (s *shrinker) baseline(cfg runner.Config, list []Fault) error {
	c, err := withFaults(cfg, list)
	if err != nil {
		return fmt.Errorf("the run's faults made explicit: %v", err)
	}
	tries := baselineRuns
	if s.opt.Reruns > 0 {
		tries = s.opt.Reruns
	}
	t0 := time.Now()
	var errs []string
	for n := 1; n <= tries; n++ {
		if s.ctx.Err() != nil {
			return s.ctx.Err()
		}
		if s.spent() {
			return fmt.Errorf("%w with %s before the time budget (%v) was spent (%d runs)", ErrNotReproduced, s.fp, s.opt.Budget, n-1)
		}
		res, err := s.run(c)
		s.res.Runs++
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if res.Interrupted {
			s.remove(res.RunDir)
			if s.budgetSpent() {
				return fmt.Errorf("%w with %s before the time budget (%v) was spent (%d runs, the last cut short by it)", ErrNotReproduced, s.fp, s.opt.Budget, n)
			}
			return s.ctx.Err()
		}
		if !s.fp.In(res) {
			s.remove(res.RunDir)
			continue
		}
		s.res.Baseline = n
		s.k = s.opt.Reruns
		if s.k == 0 {
			s.k = rerunsFor(n)
		}
		s.res.Reruns = s.k
		s.cur, s.curFs, s.curRes, s.baseRes = c, list, res, res
		s.kept = append(s.kept, candidate{c, list, "the baseline"})
		s.res.Steps = append(s.res.Steps, Step{Phase: "baseline", Change: fmt.Sprintf("the run with its %d faults made explicit", len(list)), Kept: true, Runs: n, ElapsedS: time.Since(t0).Seconds()})
		s.progressf("baseline: failed with %s at run %d of %d with its %d faults made explicit; a candidate gets %d runs to fail", s.fp, n, tries, len(list), s.k)
		return nil
	}
	if len(errs) == tries {
		return fmt.Errorf("%w: the baseline: %s", runner.ErrCouldNotRun, errs[0])
	}
	return fmt.Errorf("%w: with its faults made explicit, the run did not fail with %s in %d runs (a flaky failure: give more with --reruns)", ErrNotReproduced, s.fp, tries)
}

// rerunsFor is K for a baseline that first failed at its n-th run: the failure rate is
// taken as 1/n, and K is the runs that miss a failure of that rate at most one time in
// twenty, from defaultReruns to maxReruns.
func rerunsFor(n int) int {
	if n <= 1 {
		return defaultReruns
	}
	p := 1 / float64(n)
	k := int(math.Ceil(math.Log(0.05) / math.Log(1-p)))
	return min(max(k, defaultReruns), maxReruns)
}

// withFaults is cfg with the schedule list names, parsed as a run would parse it.
func withFaults(cfg runner.Config, list []Fault) (runner.Config, error) {
	specs := make([]string, len(list))
	for i, f := range list {
		specs[i] = f.Spec
	}
	sched, err := schedule.Parse(specs)
	if err != nil {
		return cfg, err
	}
	cfg.Faults = sched
	return cfg, nil
}

// spent reports whether the search must stop: the budget is spent or ctx ended.
func (s *shrinker) spent() bool {
	switch {
	case s.stopped != "":
	case s.ctx.Err() != nil:
		s.stopped = "interrupted"
	case time.Now().After(s.deadline):
		s.stopped = "budget"
	}
	return s.stopped != ""
}

// tally counts a candidate's runs against the rule: of k runs, at least half (rounded
// up) must fail with the fingerprint. It asks for another run only while the half is
// neither reached nor out of reach.
type tally struct{ k, runs, fails int }

func (t tally) need() int { return (t.k + 1) / 2 }

// open reports whether runs are left and the half is still within reach.
func (t tally) open() bool { return t.runs < t.k && t.need()-t.fails <= t.k-t.runs }

// more reports whether another run can still change the outcome: open, and the half
// not reached yet.
func (t tally) more() bool { return t.open() && !t.kept() }

// kept reports whether the runs so far reach the half.
func (t tally) kept() bool { return t.fails >= t.need() }

// try runs a candidate up to K times and keeps it if at least need of them fail with
// the fingerprint; refuse, when not nil, says why a failing run does not count as
// smaller ("" when it does). It reports whether the candidate was kept.
func (s *shrinker) try(phase, change string, cfg runner.Config, list []Fault, refuse func(*results.Results) string) bool {
	if s.spent() {
		return false
	}
	key := Command(cfg)
	if s.rejected[key] {
		return false
	}
	step := Step{Phase: phase, Change: change}
	t0 := time.Now()
	defer func() {
		step.ElapsedS = time.Since(t0).Seconds()
		s.res.Steps = append(s.res.Steps, step)
	}()
	if err := cfg.Validate(); err != nil {
		step.Note = "not a run: " + err.Error()
		return false
	}
	tl := tally{k: s.k}
	var failed *results.Results
	for tl.more() && !s.spent() {
		res, err := s.run(cfg)
		tl.runs++
		step.Runs++
		s.res.Runs++
		if err != nil {
			step.Note = err.Error()
			continue
		}
		if res.Interrupted {
			// Cut short: it says nothing of the whole candidate.
			s.remove(res.RunDir)
			continue
		}
		if !s.fp.In(res) {
			s.remove(res.RunDir)
			continue
		}
		if refuse != nil {
			if why := refuse(res); why != "" {
				s.remove(res.RunDir)
				step.Note = why
				break
			}
		}
		tl.fails++
		if failed != nil {
			s.remove(failed.RunDir)
		}
		failed = res
		if !tl.kept() {
			continue
		}
		if s.curRes != s.baseRes {
			s.remove(s.curRes.RunDir)
		}
		s.cur, s.curFs, s.curRes = cfg, list, res
		s.kept = append(s.kept, candidate{cfg, list, phase + ": " + change})
		step.Kept = true
		s.progressf("%s: %s: fails with %s (%d of %d runs; %d runs, %s so far)", phase, change, s.fp, tl.fails, tl.runs, s.res.Runs, time.Since(s.start).Round(time.Second))
		return true
	}
	if failed != nil {
		s.remove(failed.RunDir)
	}
	if step.Note == "" && tl.fails > 0 {
		step.Note = fmt.Sprintf("failed in %d of %d runs, fewer than %d", tl.fails, tl.runs, tl.need())
	}
	if !s.spent() {
		s.rejected[key] = true
	}
	return false
}

// search runs the phases: the faults once, then simplify and size while they gain.
func (s *shrinker) search() {
	s.reduceFaults()
	for pass := 0; !s.spent(); pass++ {
		before := len(s.res.Steps)
		kept := func() bool {
			for _, st := range s.res.Steps[before:] {
				if st.Kept {
					return true
				}
			}
			return false
		}
		s.simplify()
		s.size()
		if !kept() {
			return
		}
		if len(s.curFs) > 1 || !s.needsFaults {
			s.reduceFaults()
		}
	}
}

// reduceFaults is the first phase: no fault at all, then ddmin over the list.
func (s *shrinker) reduceFaults() {
	base := s.curFs
	if len(base) == 0 {
		return
	}
	if !s.needsFaults {
		c, _ := withFaults(s.cur, nil)
		if s.try("faults", fmt.Sprintf("all %d faults removed", len(base)), c, nil, nil) {
			return
		}
		s.needsFaults = !s.spent()
	}
	if len(base) < 2 {
		return
	}
	ddmin(len(base), func(sub []int) (bool, bool) {
		list := make([]Fault, len(sub))
		for i, j := range sub {
			list[i] = base[j]
		}
		c, err := withFaults(s.cur, list)
		if err != nil {
			return false, false
		}
		kept := s.try("faults", fmt.Sprintf("kept %d of %d faults (%s)", len(sub), len(base), listSpan(base, sub)), c, list, nil)
		return kept, s.spent()
	})
}

// listSpan names a subset of the list briefly: its first and last entries.
func listSpan(base []Fault, sub []int) string {
	switch len(sub) {
	case 0:
		return "none"
	case 1:
		return base[sub[0]].Spec
	}
	return base[sub[0]].Spec + " … " + base[sub[len(sub)-1]].Spec
}

// simplify is the second phase: each fault made simpler, one change at a time.
func (s *shrinker) simplify() {
	for i := 0; i < len(s.curFs) && !s.spent(); i++ {
		f := s.curFs[i].f
		switch {
		case f.Pin != nil && f.Pin.Point > 0:
			s.lower("simplify", int64(f.Pin.Point), int64(firstPoint(s.curRes.RunDir)), 1, func(v int64) (string, bool) {
				p := *f.Pin
				p.Point = uint64(v)
				return p.String(), true
			}, i)
		case f.Pin != nil:
			s.lower("simplify", int64(f.Pin.Txn), 1, 1, func(v int64) (string, bool) {
				p := *f.Pin
				p.Txn = uint64(v)
				return p.String(), true
			}, i)
		case f.Bounded && (f.Process || f.Toxic != nil || f.Name == "partition"):
			const gran = int64(10 * time.Millisecond)
			s.lower("simplify", int64(f.End-f.Start), gran, gran, func(v int64) (string, bool) {
				g := s.curFs[i].f
				return withWindow(g, g.Start, g.Start+time.Duration(v)), true
			}, i)
			s.lower("simplify", int64(s.curFs[i].f.Start), 0, gran, func(v int64) (string, bool) {
				g := s.curFs[i].f
				return withWindow(g, time.Duration(v), time.Duration(v)+g.End-g.Start), true
			}, i)
		case f.Process || f.Coordinator:
			const gran = int64(10 * time.Millisecond)
			s.lower("simplify", int64(f.Start), 0, gran, func(v int64) (string, bool) {
				return withPoint(s.curFs[i].f, time.Duration(v)), true
			}, i)
		}
	}
}

// withWindow writes a fault's entry with the window [start, end).
func withWindow(f schedule.Fault, start, end time.Duration) string {
	return head(f.Spec) + "@" + dur(start) + "-" + dur(end)
}

// withPoint writes a fault of an instant's entry at t.
func withPoint(f schedule.Fault, t time.Duration) string {
	return head(f.Spec) + "@" + dur(t)
}

// head is an entry without its window or time: its name and parameters.
func head(spec string) string {
	if i := strings.LastIndexByte(spec, '@'); i >= 0 {
		return strings.TrimSpace(spec[:i])
	}
	return strings.TrimSpace(spec)
}

// lower shrinks one whole number of the i-th fault toward lo, in steps of gran: lo
// first, then a bisection between lo and the smallest value known to fail. spec writes
// the fault's entry for a value.
func (s *shrinker) lower(phase string, cur, lo, gran int64, spec func(v int64) (string, bool), i int) {
	s.bisect(cur, lo, gran, func(v int64) bool {
		sp, ok := spec(v)
		if !ok {
			return false
		}
		f, err := schedule.ParseFault(sp)
		if err != nil {
			return false
		}
		list := slices.Clone(s.curFs)
		list[i] = newFault(f, 0)
		c, err := withFaults(s.cur, list)
		if err != nil {
			return false
		}
		return s.try(phase, fmt.Sprintf("%s → %s", s.curFs[i].Spec, sp), c, list, nil)
	})
}

// bisect looks for a small value from lo up to cur (known to fail) that still fails, in
// steps of gran: it tries lo, then a value between the largest seen to pass and the
// smallest seen to fail, until they are within gran, or within an eighth of the value
// (a reproducer's figures need not be the very least, and every step is a run). The
// value tried is the gap's geometric middle while the two are orders of magnitude
// apart (a budget of 1000000000 comes down to its order in a few runs, where halving
// would take thirty), its arithmetic middle after. try reports whether a value failed
// (and was kept).
func (s *shrinker) bisect(cur, lo, gran int64, try func(v int64) bool) {
	if cur-lo < gran || s.spent() {
		return
	}
	if try(lo) {
		return
	}
	pass := lo
	for cur-pass > max(gran, cur/8) && !s.spent() {
		mid := pass + (cur-pass)/2
		if base := max(pass, 1); cur/base >= 16 {
			mid = int64(math.Sqrt(float64(base)) * math.Sqrt(float64(cur)))
		}
		mid -= (mid - lo) % gran
		if mid <= pass {
			mid = pass + gran
		}
		if mid >= cur {
			return
		}
		if try(mid) {
			cur = mid
		} else {
			pass = mid
		}
	}
}

// size is the third phase: fewer registers (a smaller budget), workers, operations per
// worker, a shorter duration.
func (s *shrinker) size() {
	sizeOne := func(what string, cur, lo, gran int64, set func(c *runner.Config, v int64), show func(int64) string, refuse func(*results.Results) string) {
		s.bisect(cur, lo, gran, func(v int64) bool {
			c := s.cur
			set(&c, v)
			return s.try("size", fmt.Sprintf("%s %s → %s", what, show(cur), show(v)), c, s.curFs, refuse)
		})
	}
	// A smaller state must mean no more operations: a run of a duration spends it all
	// the same, and a budget exhausted early turns the rest into quick rejections.
	noMoreOps := func(res *results.Results) string {
		if was := s.curRes.Ops.Invoked; res.Ops.Invoked > was {
			return fmt.Sprintf("not smaller: %d operations invoked, %d before", res.Ops.Invoked, was)
		}
		return ""
	}
	num := func(v int64) string { return fmt.Sprint(v) }
	// The state first: a smaller budget is exhausted, and fewer registers contended,
	// by fewer operations, so that the workers and operations can shrink after it.
	switch s.cur.Workload {
	case workloads.Register:
		keys := s.cur.Keys
		if keys == 0 {
			keys = register.DefaultKeys
		}
		sizeOne("registers", int64(keys), 1, 1, func(c *runner.Config, v int64) { c.Keys = int(v) }, num, noMoreOps)
	case workloads.Budget:
		sizeOne("budget", s.cur.Budget, 1, 1, func(c *runner.Config, v int64) { c.Budget = v }, num, noMoreOps)
	}
	sizeOne("workers", int64(s.cur.Workers), 1, 1, func(c *runner.Config, v int64) { c.Workers = int(v) }, num, nil)
	if s.cur.Ops > 0 {
		sizeOne("operations per worker", int64(s.cur.Ops), 1, 1, func(c *runner.Config, v int64) { c.Ops = int(v) }, num, nil)
	}
	if s.cur.Duration > 0 {
		const gran = int64(10 * time.Millisecond)
		var lo time.Duration
		for _, f := range s.curFs {
			lo = max(lo, f.f.Start+10*time.Millisecond)
		}
		lo = max(lo, 100*time.Millisecond)
		lo = lo.Round(10 * time.Millisecond)
		sizeOne("duration", int64(s.cur.Duration), int64(lo), gran, func(c *runner.Config, v int64) { c.Duration = time.Duration(v) },
			func(v int64) string { return dur(time.Duration(v)) }, nil)
	}
}

// finish fills in the smallest run and writes shrink.json.
// Confirmation: the search keeps a candidate on one failing run in K, so the smallest
// one may fail too seldom for its command to reproduce the failure. confirm runs it K
// more times: it must fail the same way in at least half of them (K is 3 for a failure
// the baseline showed at once, more for a flaky one). One that does not is dropped for
// the candidate kept before it, at most maxFallbacks times, and then for the baseline,
// which failed and needs no confirming. It runs once the time budget is spent too (a
// few of the smallest runs), not once interrupted.
const maxFallbacks = 8

func (s *shrinker) confirm() {
	if len(s.kept) <= 1 {
		return // nothing smaller than the baseline was kept
	}
	for back := 0; len(s.kept) > 1; back++ {
		c := s.kept[len(s.kept)-1]
		if back == maxFallbacks {
			break
		}
		step := Step{Phase: "confirm", Change: c.change}
		t0 := time.Now()
		// All K runs while the half is within reach, so that the note says how often
		// the reproducer fails, not only that it reached the half.
		tl := tally{k: s.k}
		var failed *results.Results
		for tl.open() && s.ctx.Err() == nil {
			res, err := runner.Run(s.ctx, c.cfg)
			tl.runs++
			step.Runs++
			s.res.Runs++
			switch {
			case err != nil:
				step.Note = err.Error()
			case res.Interrupted || !s.fp.In(res):
				s.remove(res.RunDir)
			default:
				tl.fails++
				if failed != nil {
					s.remove(failed.RunDir)
				}
				failed = res
			}
		}
		step.ElapsedS = time.Since(t0).Seconds()
		if tl.kept() {
			step.Kept = true
			s.res.Steps = append(s.res.Steps, step)
			if s.curRes != s.baseRes {
				s.remove(s.curRes.RunDir)
			}
			s.cur, s.curFs, s.curRes = c.cfg, c.list, failed
			s.res.Confirmed = fmt.Sprintf("failed again in %d of %d runs", tl.fails, tl.runs)
			s.progressf("confirm: %s: failed again in %d of %d runs", c.change, tl.fails, tl.runs)
			return
		}
		if failed != nil {
			s.remove(failed.RunDir)
		}
		step.Note = fmt.Sprintf("failed in %d of %d runs: too seldom to reproduce", tl.fails, tl.runs)
		s.res.Steps = append(s.res.Steps, step)
		s.progressf("confirm: %s: %s; back to the candidate before it", c.change, step.Note)
		if s.ctx.Err() != nil {
			return
		}
		s.kept = s.kept[:len(s.kept)-1]
	}
	if len(s.kept) > 1 {
		s.kept = s.kept[:1]
	}
	// The baseline: it failed, as the original run did.
	b := s.kept[0]
	if s.curRes != s.baseRes {
		s.remove(s.curRes.RunDir)
	}
	s.cur, s.curFs, s.curRes = b.cfg, b.list, s.baseRes
	s.res.Confirmed = "no smaller candidate failed again: the baseline is the reproducer"
	s.progressf("confirm: %s", s.res.Confirmed)
}

func (s *shrinker) finish() error {
	r := s.res
	r.Stopped = s.stopped
	r.WallS = time.Since(s.start).Seconds()
	list := slices.Clone(s.curFs)
	if at, err := firedAt(s.curRes.RunDir); err == nil {
		for i, f := range list {
			if f.f.Pin != nil {
				if t, ok := at[*f.f.Pin]; ok {
					list[i].AtS = t.Seconds()
				}
			}
		}
	}
	r.Smallest = sizeOf(s.curRes.RunDir, s.cur, s.curRes, list)
	r.Smallest.Command = Command(s.cur)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(s.opt.Out, "shrink.json")
	tmp := path + ".partial"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	s.progressf("%s after %d runs in %s: %s", map[string]string{"done": "done", "budget": "budget spent", "interrupted": "interrupted"}[s.stopped], r.Runs, time.Since(s.start).Round(time.Second), path)
	return nil
}

// sizeOf measures a run.
func sizeOf(dir string, cfg runner.Config, res *results.Results, list []Fault) Size {
	sz := Size{
		RunDir: dir, Workers: cfg.Workers, OpsPerWorker: cfg.Ops, DurationS: cfg.Duration.Seconds(),
		Operations: res.Ops.Invoked, Faults: list, Verdict: res.Verdict.String(), Summary: res.Summary,
	}
	if sz.Faults == nil {
		sz.Faults = []Fault{}
	}
	for _, f := range cfg.Faults {
		sz.Schedule = append(sz.Schedule, f.Spec)
	}
	if sz.Schedule == nil {
		sz.Schedule = []string{}
	}
	switch cfg.Workload {
	case workloads.Register:
		sz.Keys = cfg.Keys
		if sz.Keys == 0 {
			sz.Keys = register.DefaultKeys
		}
	case workloads.Budget:
		sz.Budget = cfg.Budget
	}
	return sz
}

// remove deletes a run directory the search made; never one outside Out.
func (s *shrinker) remove(dir string) {
	if rel, err := filepath.Rel(s.opt.Out, dir); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		os.RemoveAll(dir)
	}
}

func (s *shrinker) progressf(format string, a ...any) {
	if s.opt.Progress != nil {
		fmt.Fprintf(s.opt.Progress, "shrink: "+format+"\n", a...)
	}
}
