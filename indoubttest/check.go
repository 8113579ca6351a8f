package indoubttest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/schedule"
)

// Report is what Evaluate and Check found: the checker's verdict and anomalies, what
// the proxy's ground truth proves of the operations, and where the run directory is.
// Everything in it is computed from the run directory, as `indoubt check --faults
// RUNDIR/faults.jsonl RUNDIR/history.jsonl` computes it.
type Report struct {
	// Verdict is the checker's: valid, invalid, or unknown (it could not decide, or
	// nothing was checked). It is zero when the history could not be checked at all
	// (the test then fails with what to fix).
	Verdict checker.Verdict
	// Summary is the checker's one sentence.
	Summary string
	// Anomalies are what the checker found wrong, each naming the history events that
	// show it.
	Anomalies []checker.Anomaly
	// Claims are what the proxy's ground truth proves of single operations: applied
	// more than once, replayed, or committed by a cut and retried with nothing proven.
	Claims []Claim
	// Faults counts the commit faults the proxy fired.
	Faults int
	// Seed is the seed of the proxy's fault decisions.
	Seed int64
	// RunDir is the run directory: history.jsonl, faults.jsonl, results.json and
	// report.html. It is removed when the test passes, unless INDOUBT_OUT is set.
	RunDir string
	// Text is the explanation, as Check prints it when the verdict is not valid.
	Text string
}

// Found reports whether the checker found an anomaly of kind ("duplicate",
// "overdraft", "lost-update" ...: each checker of package checker names its kinds).
func (r *Report) Found(kind string) bool {
	return slices.ContainsFunc(r.Anomalies, func(a checker.Anomaly) bool { return a.Kind == kind })
}

// Claim is one thing the proxy's ground truth proves of one operation, in a sentence
// that claims no more than its proof.
type Claim struct {
	// Op is the operation's id.
	Op string
	// Kind says what is claimed.
	Kind ClaimKind
	// Times is, for ClaimApplied, how many times the operation took effect: counted in
	// the final state, or a lower bound from the proxy's truth for each attempt.
	Times int
	// Sentence says it, with its proof.
	Sentence string
}

// ClaimKind is what a Claim says of its operation.
type ClaimKind string

const (
	// ClaimApplied: the operation took effect more than once.
	ClaimApplied ClaimKind = "applied-more-than-once"
	// ClaimReplay: a commit of the operation was cut, it was retried and acknowledged,
	// and the retry is proven to have changed nothing.
	ClaimReplay ClaimKind = "replay"
	// ClaimCommitted: a commit of the operation was cut and it was retried; a second
	// application is possible and not proven either way.
	ClaimCommitted ClaimKind = "committed-and-retried"
)

// Check holds the recorder's history to model (Evaluate) and fails the test
// (tb.Errorf) unless the verdict is valid, with the explanation: the checker's
// anomalies first, each with what the proxy's ground truth proves of the operations it
// names, then the faults no operation could be tied to, the fault seed with the
// command that runs the test again with it, and the run directory. Record nothing on
// rec after Check.
func Check(tb testing.TB, rec *Recorder, model Model) *Report {
	tb.Helper()
	r := evaluate(tb, rec, model)
	switch r.Verdict {
	case 0: // not checked: evaluate said what to fix
	case checker.Valid:
		tb.Logf("%s", r.Text)
	default:
		tb.Errorf("%s", r.Text)
	}
	return r
}

// Evaluate holds the recorder's history to model and returns what it found, without
// failing the test for the verdict: a test that pins a known-bad version of its code
// asserts that the report is invalid and names the anomaly (Report.Found). It writes
// the run directory: history.jsonl (the operations with their failed attempts, and
// the proxy's events), faults.jsonl, check.json, results.json (the schema of indoubt
// run's) and report.html; `indoubt check RUNDIR` reproduces the verdict and the claims. A history the model cannot read (a value of
// the wrong type, a final state it needs and did not get) fails the test with what to
// record instead. Record nothing on rec after Evaluate.
func Evaluate(tb testing.TB, rec *Recorder, model Model) *Report {
	tb.Helper()
	r := evaluate(tb, rec, model)
	if r.Verdict != 0 {
		tb.Logf("%s", r.Text)
	}
	return r
}

// evaluate writes the run directory, reads it back and judges it; a history that
// cannot be checked fails tb.
func evaluate(tb testing.TB, rec *Recorder, model Model) *Report {
	tb.Helper()
	rec.mu.Lock()
	rec.closed = true
	client := append([]histories.Op(nil), rec.ops...)
	rec.mu.Unlock()
	var (
		events  []toxics.Event
		windows []schedule.Window
		specs   []string
		schErr  error
		store   string
		sd      seed
	)
	if rec.srv != nil {
		events, windows, specs, schErr = rec.srv.armed()
		store, sd = rec.srv.Store, rec.srv.seed
	}
	if schErr != nil {
		tb.Errorf("indoubttest: a fault schedule could not run: %v", schErr)
	}
	rep := &Report{Seed: sd.n, Faults: len(events)}
	dir, keep, err := runDir(tb)
	if err != nil {
		tb.Fatalf("indoubttest: run directory: %v", err)
	}
	rep.RunDir = dir
	tb.Cleanup(func() {
		if !keep && !tb.Failed() {
			os.RemoveAll(dir)
		}
	})
	hdr := model.withAmounts(client).header(store, sd.n)
	if err := rundir.WriteHistory(dir, hdr, merge(client, events, windows, rec.start)); err != nil {
		tb.Fatalf("indoubttest: write %s: %v", dir, err)
	}
	if err := writeFaults(dir, events, windows, rec.start); err != nil {
		tb.Fatalf("indoubttest: write %s: %v", dir, err)
	}
	if err := rundir.WriteCheck(dir, rundir.Check{Limits: rundir.Limits{Timeout: checkTimeout(tb)}, Proxied: rec.srv != nil}); err != nil {
		tb.Fatalf("indoubttest: write %s: %v", dir, err)
	}
	// From here on, everything comes from the run directory.
	h, ops, err := histories.ReadFile(filepath.Join(dir, rundir.HistoryFile), false)
	if err != nil {
		tb.Fatalf("indoubttest: read back %s: %v", dir, err)
	}
	if bad := model.misuse(ops, 5); len(bad) > 0 {
		rep.Text = fmt.Sprintf("indoubttest: the %s model cannot read this history:\n  %s\nrun directory: %s", model.name, strings.Join(bad, "\n  "), dir)
		tb.Errorf("%s", rep.Text)
		return rep
	}
	opt := judge.Options{}
	if model.name == checker.RegisterModel || model.name == checker.CASRegisterModel {
		opt.VisualizePath = filepath.Join(dir, "linearizability.html")
	}
	j, cerr := judge.History(context.Background(), dir, h, ops, opt)
	if cerr != nil {
		why := strings.TrimPrefix(cerr.Error(), "check: ")
		if strings.Contains(why, "no final read") && model.final != "" {
			// The checker's words name indoubt check's flags; a test records the read.
			why = fmt.Sprintf("no final read begins after every operation ended: once the workers are done (every operation completed), record the final state with %s", model.final)
		}
		rep.Text = fmt.Sprintf("indoubttest: the history cannot be checked as %s: %s\nrun directory: %s", model.name, why, dir)
		tb.Errorf("%s", rep.Text)
		return rep
	}
	r := fill(j, rec.srv, specs, dir, tb.Name())
	res := j.Checked
	if err := writeResults(dir, r); err != nil {
		tb.Errorf("indoubttest: write %s: %v", dir, err)
	}
	rep.Verdict, rep.Summary, rep.Anomalies = res.Verdict, res.Summary, res.Anomalies
	rep.Claims = claims(r.Evidence)
	rep.Text = explain(tb, model, r, ops, sd, events, rec.srv != nil, keep)
	if keep {
		tb.Logf("indoubttest: run directory %s", dir)
	}
	return rep
}

// checkTimeout bounds the checker: two minutes, or less when the test's deadline is
// nearer. A search that runs out gives an unknown verdict.
func checkTimeout(tb testing.TB) time.Duration {
	d := 2 * time.Minute
	if t, ok := tb.(interface{ Deadline() (time.Time, bool) }); ok {
		if end, ok := t.Deadline(); ok {
			d = min(d, max(time.Until(end)*9/10, time.Second))
		}
	}
	return d
}

// merge puts the client's events and the proxy's in one history, in time order, and
// numbers them, as indoubt run's nemesis records them: fault windows opened and
// closed, and each fault with its ground truth.
func merge(client []histories.Op, events []toxics.Event, windows []schedule.Window, start time.Time) []histories.Op {
	ops := make([]histories.Op, 0, len(client)+len(events)+len(windows))
	ops = append(ops, client...)
	for _, w := range windows {
		f := "start"
		if !w.Open {
			f = "stop"
		}
		ops = append(ops, histories.Op{Time: w.Time.Sub(start).Nanoseconds(), Process: histories.Nemesis, Type: histories.Info, F: f, Value: histories.Value(map[string]string{"fault": w.Fault})})
	}
	for _, e := range events {
		ops = append(ops, histories.Op{
			Time: e.Time.Sub(start).Nanoseconds(), Process: histories.Nemesis, Type: histories.Info,
			F: e.Kind.String(), Conn: e.Conn,
			Value: histories.Value(map[string]string{"truth": e.Truth.String(), "statement": e.Statement, "tag": e.Tag}),
		})
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Time < ops[j].Time })
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops
}

// runDir makes the test's run directory and says whether to keep it when the test passes.
func runDir(tb testing.TB) (dir string, keep bool, err error) {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, tb.Name())
	if out := os.Getenv("INDOUBT_OUT"); out != "" {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return "", false, err
		}
		dir, err = os.MkdirTemp(out, name+"-"+time.Now().UTC().Format("20060102T150405")+"-")
		return dir, true, err
	}
	dir, err = os.MkdirTemp("", "indoubttest-"+name+"-")
	return dir, false, err
}

// writeFaults writes faults.jsonl as indoubt run does: each event with run_time, its
// time on the history's clock, so that `indoubt check --faults` joins it, and the
// fault windows.
func writeFaults(dir string, events []toxics.Event, windows []schedule.Window, start time.Time) error {
	var lines []rundir.FaultLine
	for _, e := range events {
		lines = append(lines, rundir.EventLine(e, e.Time.Sub(start).Nanoseconds()))
	}
	for _, w := range windows {
		lines = append(lines, rundir.WindowLine(w, w.Time.Sub(start).Nanoseconds(), nil))
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].RunTime() < lines[j].RunTime() })
	b, err := rundir.MarshalFaults(lines)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, rundir.FaultsFile), b, 0o644)
}

func writeResults(dir string, r *results.Results) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return report.WriteHTML(filepath.Join(dir, "report.html"), r)
}

// claims lists the evidence's claims about single operations.
func claims(e *results.Evidence) []Claim {
	if e == nil {
		return nil
	}
	var out []Claim
	for _, g := range []struct {
		kind ClaimKind
		list []results.AmbiguousOp
	}{{ClaimApplied, e.AppliedTwice}, {ClaimReplay, e.Replays}, {ClaimCommitted, e.CommittedTwice}} {
		for _, a := range g.list {
			out = append(out, Claim{Op: a.OpID, Kind: g.kind, Times: a.Times, Sentence: a.Sentence})
		}
	}
	return out
}
