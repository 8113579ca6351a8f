package indoubttest

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/workloads"
)

// CheckTimeout bounds the checker of Check; a search that runs out gives an Unknown
// verdict, which fails the test.
var CheckTimeout = 2 * time.Minute

// Check holds the recorder's history to model, joins the proxy's ground truth to it, and
// writes a run directory: history.jsonl (re-check it with `indoubt check`), faults.jsonl
// (the proxy's events), results.json (the verdict and the explanation) and report.html
// (the same for a browser, rendered by internal/report). The
// directory is under $INDOUBT_OUT when set, and kept; else in the system's temporary
// directory, removed when the test passes.
//
// A history that is not valid fails the test (tb.Errorf) with an explanation that leads
// with the cause it can name from the ground truth ("charge 3-7: the proxy cut the reply
// after COMMIT (the commit had applied), your code retried and was told ok: the charge
// applied twice"), then the checker's findings and the run directory's path. A valid one
// is logged with what the faults did. Check returns the checker's Result either way.
// Record nothing on rec after Check.
func Check(tb testing.TB, rec *Recorder, model Model) checker.Result {
	tb.Helper()
	rec.mu.Lock()
	rec.closed = true
	client := append([]histories.Op(nil), rec.ops...)
	tries := rec.attempts
	rec.mu.Unlock()

	var events []toxics.Event
	var windows []faults.Window
	store := ""
	if rec.srv != nil {
		events = rec.srv.Events()
		windows = rec.srv.Windows()
		store = rec.srv.Store
	}
	ops := merge(client, events, windows, rec.start)
	hdr := histories.Header{Format: histories.FormatV1, Workload: "app", Model: model.Name, Store: store, Seed: seedOf(tb.Name()), Params: model.Params}

	dir, keep, err := runDir(tb)
	if err != nil {
		tb.Fatalf("indoubttest: run directory: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckTimeout)
	defer cancel()
	res, cerr := checker.Check(ctx, &hdr, ops, checker.Options{})
	ev := join(ops, events, tries, rec.start)
	nameConns(ops, ev, tries)
	lines := explain(model, res, cerr, ev)
	joinedEv := joinEvidence(ops, ev, res.Verdict == checker.Invalid, rec.start)
	if err := writeRun(dir, rec.start, hdr, ops, events, res, lines, joinedEv); err != nil {
		tb.Errorf("indoubttest: write run directory %s: %v", dir, err)
	}
	if err := writeHTML(dir, hdr, ops, ev, joinedEv, res, lines, rec.start); err != nil {
		tb.Errorf("indoubttest: write run directory %s: %v", dir, err)
	}
	rec.mu.Lock()
	rec.dir = dir
	rec.mu.Unlock()
	failed := cerr != nil || res.Verdict != checker.Valid
	tb.Cleanup(func() {
		if !keep && !tb.Failed() {
			os.RemoveAll(dir)
		}
	})
	if failed {
		tb.Errorf("%s\nrun directory: %s (re-check: indoubt check %s)%s", strings.Join(lines, "\n"), dir, filepath.Join(dir, "history.jsonl"), reproduction(tb, events))
	} else {
		tb.Logf("%s", strings.Join(lines, "\n"))
	}
	return res
}

// merge puts the client's events and the proxy's in one history, in time order, and
// numbers them.
func merge(client []histories.Op, events []toxics.Event, windows []faults.Window, start time.Time) []histories.Op {
	ops := make([]histories.Op, 0, len(client)+len(events)+len(windows))
	ops = append(ops, client...)
	for _, w := range windows {
		// The runner's nemesis events: start and stop of each fault window.
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

// helperResults is the run directory's results.json.
type helperResults struct {
	Verdict     checker.Verdict `json:"verdict"`
	Summary     string          `json:"summary"`
	Model       string          `json:"model"`
	Store       string          `json:"store,omitempty"`
	Explanation []string        `json:"explanation"`
	Check       checker.Result  `json:"check"`
	CheckError  string          `json:"check_error,omitempty"`
	Faults      map[string]int  `json:"faults"`
	// Evidence is the proxy's ground truth joined to the operations (internal/evidence).
	Evidence *results.Evidence `json:"evidence,omitempty"`
}

func writeRun(dir string, start time.Time, hdr histories.Header, ops []histories.Op, events []toxics.Event, res checker.Result, lines []string, ev *results.Evidence) error {
	w, err := histories.Create(filepath.Join(dir, "history.jsonl"), hdr)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if _, err := w.Write(op); err != nil {
			w.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	var fb strings.Builder
	counts := map[string]int{}
	for _, e := range events {
		// run_time puts the event on the history's clock, as indoubt run writes it, so
		// that `indoubt check --faults` joins it.
		b, err := json.Marshal(struct {
			toxics.Event
			RunTime int64 `json:"run_time"`
		}{e, e.Time.Sub(start).Nanoseconds()})
		if err != nil {
			return err
		}
		fb.Write(b)
		fb.WriteByte('\n')
		counts[e.Kind.String()+" "+e.Truth.String()]++
	}
	if err := os.WriteFile(filepath.Join(dir, "faults.jsonl"), []byte(fb.String()), 0o644); err != nil {
		return err
	}
	r := helperResults{Verdict: res.Verdict, Summary: res.Summary, Model: hdr.Model, Store: hdr.Store, Explanation: lines, Check: res, Faults: counts, Evidence: ev}
	if len(lines) > 0 {
		r.Summary = lines[0]
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644)
}

// writeHTML renders report.html with internal/report, from what a test knows: no
// latency or retry accounting of the runner, the verdict, the ground truth joined to the
// operations, and the anomalies.
func writeHTML(dir string, hdr histories.Header, ops []histories.Op, ev []joined, joinedEv *results.Evidence, res checker.Result, lines []string, start time.Time) error {
	r := &results.Results{
		SchemaVersion: results.SchemaVersion, Verdict: res.Verdict, Summary: strings.Join(lines, " "),
		Workload: workloads.Name(hdr.Model), Store: hdr.Store, Mechanism: "the code under test", Retry: "the code under test's",
		Seed: hdr.Seed, StartedAt: start, Anomalies: res.Anomalies, RunDir: dir, Proxied: hdr.Store != "",
		Faults: results.FaultCounts{ByKind: map[string]int64{}, ByTruth: map[string]int64{}},
	}
	procs := map[int]bool{}
	for _, op := range ops {
		if !op.IsClient() {
			continue
		}
		procs[op.Process] = true
		switch op.Type {
		case histories.Invoke:
			r.Ops.Invoked++
		case histories.OK:
			r.Ops.OK++
		case histories.Fail:
			r.Ops.Fail++
		case histories.Info:
			r.Ops.Info++
		}
		if op.Time > 0 {
			r.DurationS = float64(op.Time) / 1e9
		}
	}
	r.Workers = len(procs)
	for _, j := range ev {
		r.Faults.ByKind[j.e.Kind.String()]++
		r.Faults.ByTruth[j.e.Truth.String()]++
	}
	r.Evidence = joinedEv
	return report.WriteHTML(filepath.Join(dir, "report.html"), r)
}

// joinEvidence hands the faults, with the operations join attributed them to, to
// internal/evidence, which judges them as it does for indoubt run: applied twice,
// committed twice, and where the ground truth and the history disagree. An operation
// join attributed a fault to is given the fault's connection for the span of the
// operation, since a pool hides the connection from the recorder.
func joinEvidence(ops []histories.Op, ev []joined, invalid bool, start time.Time) *results.Evidence {
	if len(ev) == 0 {
		return nil
	}
	invokeIdx := map[string]int64{}
	process := map[string]int{}
	for _, op := range ops {
		if op.IsClient() && op.Type == histories.Invoke {
			invokeIdx[op.OpID] = op.Index
			process[op.OpID] = op.Process
		}
	}
	events := make([]evidence.FaultEvent, 0, len(ev))
	var spans []evidence.Span
	for _, j := range ev {
		at := j.e.Time.Sub(start).Nanoseconds()
		events = append(events, evidence.FaultEvent{Time: at, Conn: j.e.Conn, Kind: j.e.Kind.String(), Truth: j.e.Truth.String(), What: j.e.Statement, Tag: j.e.Tag})
		if j.op == nil {
			continue
		}
		to := j.op.end
		if to < 0 {
			to = math.MaxInt64
		}
		spans = append(spans, evidence.Span{OpID: j.op.id, Process: process[j.op.id], Invoke: invokeIdx[j.op.id], Conn: j.e.Conn, From: j.op.invoke, To: to, Class: workloads.ClassUnknown})
	}
	e, _ := evidence.Join(events, spans, ops, nil, invalid)
	return e
}

// nameConns gives each invocation the connection its operation named first (Op.Conn) or,
// failing that, the connection of the first fault join attributed to it, and the
// completion that of the last when it differs, so that
// `indoubt check --faults` joins the proxy's events to the history file as Check did.
func nameConns(ops []histories.Op, ev []joined, tries map[string]*attempts) {
	conn := map[string]string{}
	for id, a := range tries {
		if len(a.conns) > 0 {
			conn[id] = a.conns[0]
		}
	}
	last := map[string]string{}
	for _, j := range ev {
		if j.op != nil && conn[j.op.id] == "" {
			conn[j.op.id] = j.e.Conn
		}
		if j.op != nil {
			last[j.op.id] = j.e.Conn
		}
	}
	for i := range ops {
		if !ops[i].IsClient() || ops[i].Conn != "" {
			continue
		}
		if ops[i].Type == histories.Invoke {
			ops[i].Conn = conn[ops[i].OpID]
		} else if l := last[ops[i].OpID]; l != conn[ops[i].OpID] {
			// A second fault on another connection: the completion names it, which is
			// how a history says that a retry moved to a fresh connection.
			ops[i].Conn = l
		}
	}
}
