package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/atomicfile"
	"github.com/indoubt/indoubt/internal/console"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/judge"
	"github.com/indoubt/indoubt/internal/redact"
	"github.com/indoubt/indoubt/internal/report"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/internal/servers"
	"github.com/indoubt/indoubt/internal/supervise"
	"github.com/indoubt/indoubt/workloads"
)

// ExecConfig is one `indoubt exec`: a program of the user's run against a store through
// the commit-aware proxy, its history judged. The CLI parses and checks it (flags
// against each other, the program found); Exec trusts it.
type ExecConfig struct {
	Store    Store
	DSN      string // the user's server; "" to launch one (or with Upstream)
	Upstream string // host:port the proxy goes in front of; "" unless given
	Schedule schedule.Schedule
	Seed     int64
	Out      string // parent directory of run directories
	Model    string // the header exec writes before the program starts; "" for none
	Params   map[string]json.RawMessage
	FinalSQL string // the final read: a query on the server ("" for none), or
	FinalCmd string // a shell command printing it as JSON ("" for none)
	Match    string // statements that count as commit points; "" for every one
	Grace    time.Duration
	Keep     bool // a launched server keeps its data directory
	Argv     []string

	// Progress receives progress lines; nil for none.
	Progress io.Writer
	// Console receives the lines beside the verdict as the run goes: how the program
	// ended, what Keep kept, proxy events that joined no operation.
	Console io.Writer
	// Warn receives warnings (a report not written).
	Warn io.Writer
	// ProgramOut and ProgramErr are the program's standard output and error (and
	// --final-cmd's error).
	ProgramOut, ProgramErr io.Writer
}

// ExecResult is what an exec found: what the CLI prints after the run.
type ExecResult struct {
	Results *results.Results
	// Code is the exit code: the verdict's, and 2 (unknown) for a valid history of a
	// program that did not end by itself with status 0.
	Code int
	// Notes go beside the verdict: whether an acknowledged write was lost.
	Notes []string
}

// Exec serves the program its store and proxy, runs it under a supervisor (package
// supervise) with the fault schedule armed from its start, reads its history and the
// final state, judges them and publishes the run directory under cfg.Out. An error is
// a run that could not be made; its directory is removed.
func Exec(ctx context.Context, cfg ExecConfig) (*ExecResult, error) {
	for _, w := range []*io.Writer{&cfg.Console, &cfg.Warn, &cfg.ProgramOut, &cfg.ProgramErr} {
		if *w == nil {
			*w = io.Discard
		}
	}
	r := &execRun{a: cfg, start: time.Now()}
	return r.run(ctx)
}

// execRun is one exec while it runs: what it launched, in the order to stop it.
type execRun struct {
	notes   []string // beside the verdict: whether an acknowledged write was lost
	a       ExecConfig
	dir     string // the run directory, .partial until published
	name    string
	start   time.Time
	direct  string // the server's own DSN; "" with --upstream
	desc    string // the server, for the report
	proxied string // the DSN through the proxy; "" with --upstream
	px      *faults.Proxy
	pxOnce  sync.Once
	env     []string
	history string   // the program's history file
	kept    []string // --keep: what to tell the user about the kept data, line by line

	mu     sync.Mutex
	events []rundir.FaultLine // faults.jsonl, written when the run ends
	pstart time.Time          // the program's start: the run clock's zero
}

func (r *execRun) progressf(format string, a ...any) {
	if r.a.Progress != nil {
		console.Fprintf(r.a.Progress, "indoubt exec: "+format+"\n", a...)
	}
}

// run does the whole exec in a run directory of its own.
func (r *execRun) run(ctx context.Context) (*ExecResult, error) {
	a := r.a
	r.name = strings.NewReplacer(":", "_", "/", "_").Replace(fmt.Sprintf("%s-exec-%s-%s", r.start.Format("20060102-150405.000"), a.Store.Name(), faultNames(a.Schedule)))
	if err := os.MkdirAll(a.Out, 0o755); err != nil {
		return nil, fmt.Errorf("exec: create %s: %v", a.Out, err)
	}
	r.dir = filepath.Join(a.Out, "."+r.name+".partial")
	if err := os.Mkdir(r.dir, 0o700); err != nil {
		return nil, fmt.Errorf("exec: create run directory: %v", err)
	}
	// A run killed before it publishes leaves its .partial directory: the marker lets
	// indoubt clean tell it from a live run's.
	if err := servers.MarkOwned(r.dir); err != nil {
		os.RemoveAll(r.dir)
		return nil, fmt.Errorf("exec: create run directory: %v", err)
	}
	res, code, err := r.do(ctx)
	if err != nil {
		os.RemoveAll(r.dir)
		return nil, err
	}
	final := filepath.Join(a.Out, r.name)
	res.RunDir = final
	res.Trim(results.DefaultMaxAnomalies)
	// Nothing is published half-written: every file whole or not at all (atomicfile),
	// the directory fsynced before its rename. The report is a view of results.json:
	// one that does not fit (a full disk) is left out and said in not_written.
	if err := report.WriteHTML(filepath.Join(r.dir, "report.html"), res); err != nil {
		why := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error()
		}
		res.NotWritten = append(res.NotWritten, "report.html: "+why)
		console.Fprintf(a.Warn, "indoubt exec: warning: report.html not written (%s): the run is published without it, results.json says so in not_written; indoubt report %s writes it\n", why, final)
	}
	if err := writeJSON(filepath.Join(r.dir, "results.json"), res); err != nil {
		os.RemoveAll(r.dir)
		return nil, fmt.Errorf("exec: write results: %v", err)
	}
	if err := atomicfile.SyncDir(r.dir); err != nil {
		os.RemoveAll(r.dir)
		return nil, fmt.Errorf("exec: publish run directory: %v", err)
	}
	if err := os.Rename(r.dir, final); err != nil {
		os.RemoveAll(r.dir)
		return nil, fmt.Errorf("exec: publish run directory: %v", err)
	}
	_ = servers.Unmark(final)
	_ = atomicfile.SyncDir(a.Out)
	return &ExecResult{Results: res, Code: code, Notes: r.notes}, nil
}

// do serves the program its server and proxy, runs it, and judges what it recorded.
func (r *execRun) do(ctx context.Context) (*results.Results, int, error) {
	stop, err := r.serve(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("exec: interrupted before the program started")
		}
		return nil, 0, fmt.Errorf("exec: %v", err)
	}
	defer stop()
	if err := r.prepareHistory(); err != nil {
		return nil, 0, err
	}
	if err := r.writeConfig(); err != nil {
		return nil, 0, err
	}
	exit, interrupted, err := r.runProgram(ctx)
	if err != nil {
		return nil, 0, err
	}
	elapsed := time.Since(r.pstart)
	// No fault after the program: its events are complete.
	r.closeProxy()
	var final json.RawMessage
	if r.a.FinalSQL != "" || r.a.FinalCmd != "" {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		final, err = r.readFinal(fctx)
		cancel()
		if err != nil {
			return nil, 0, fmt.Errorf("exec: final read: %v", err)
		}
	}
	stop()
	if err := r.ended(exit, interrupted, elapsed); err != nil {
		return nil, 0, err
	}
	h, ops, err := r.readProgramHistory(!exit.OK() || interrupted, exit, final, elapsed)
	if err != nil {
		return nil, 0, err
	}
	res, unjoined, err := r.judge(ctx, h, ops, elapsed, interrupted)
	if err != nil {
		return nil, 0, err
	}
	r.notes = report.LostWriteNotes(res, ops)
	for _, s := range unjoined {
		console.Fprintf(r.a.Console, "not joined: %s\n", s)
	}
	code := res.Verdict.ExitCode()
	if code == 0 && (!exit.OK() || interrupted) {
		console.Fprintf(r.a.Console, "indoubt exec: the program %s: the verdict covers only what it recorded (exit 2)\n", exit)
		code = 2 // unknown: the verdict covers what the program recorded
	}
	return res, code, nil
}

// ended says how the program ended (and what --keep kept) and writes program.json.
func (r *execRun) ended(exit supervise.Exit, interrupted bool, elapsed time.Duration) error {
	console.Fprintf(r.a.Console, "indoubt exec: %s %s after %.1fs\n", programName(r.a.Argv), exit, elapsed.Seconds())
	for _, l := range r.kept {
		console.Fprintf(r.a.Console, "indoubt exec: %s\n", l)
	}
	if err := writeJSON(filepath.Join(r.dir, "program.json"), struct {
		Argv        []string `json:"argv"`
		Interrupted bool     `json:"interrupted"`
		DurationS   float64  `json:"duration_s"`
		supervise.Exit
	}{r.a.Argv, interrupted, elapsed.Seconds(), exit}); err != nil {
		return fmt.Errorf("exec: write program.json: %v", err)
	}
	return nil
}

// serve launches the server (or takes --dsn or --upstream) and starts the proxy in
// front of it. The function it returns stops both; it may be called more than once.
func (r *execRun) serve(ctx context.Context) (func(), error) {
	stopServer, err := r.server(ctx)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			r.closeProxy()
			stopServer()
		})
	}
	if err := r.startProxy(); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// server launches the server, or takes --dsn (holding its run lock) or --upstream, and
// returns what stops it (or releases the lock).
func (r *execRun) server(ctx context.Context) (func() error, error) {
	a := r.a
	switch {
	case a.DSN != "":
		r.direct, r.desc = a.DSN, "external"
		// The program's database is its own while it runs (LockDSN).
		unlock, err := LockDSN(ctx, a.Store.Name(), a.DSN)
		if err != nil {
			return nil, err
		}
		return func() error { unlock(); return nil }, nil
	case a.Upstream != "":
		r.desc = "external at " + a.Upstream
		return func() error { return nil }, nil
	}
	r.progressf("launching a local %s ...", a.Store.Name())
	srv, err := a.Store.Launch(ctx, r.dir, a.Keep)
	if err != nil {
		return nil, err
	}
	r.direct, r.desc, r.kept = srv.DSN, srv.Desc, srv.Kept
	return srv.Stop, nil
}

// startProxy starts the proxy in front of the server, and rewrites the server's DSN to
// go through it.
func (r *execRun) startProxy() error {
	a := r.a
	upstream := a.Upstream
	if r.direct != "" {
		if u, err := url.Parse(r.direct); err != nil || u.Port() == "" {
			return fmt.Errorf("--dsn must be a URL with host:port, to put the proxy in front of it")
		}
		var err error
		if upstream, err = a.Store.Upstream(r.direct); err != nil {
			return err
		}
	}
	opt := faults.Options{Upstream: upstream, Protocol: a.Store.Protocol(), Seed: a.Seed, Events: r.onEvent}
	if a.Match != "" {
		opt.Match = regexp.MustCompile(a.Match).MatchString
	}
	px, err := faults.Start(opt)
	if err != nil {
		return err
	}
	r.px = px
	if r.direct != "" {
		if r.proxied, err = a.Store.ProxyDSN(r.direct, px.Addr()); err != nil {
			return err
		}
		if tls := a.Store.Encrypted(r.proxied); tls != "" {
			r.progressf("warning: %s: the proxy cannot see commits inside TLS, so commit faults may not fire", tls)
		}
	}
	r.progressf("%s; fault proxy on %s (seed %d, faults: %s)", r.desc, px.Addr(), a.Seed, orNone(execSpecs(a.Schedule)))
	return nil
}

// closeProxy stops the proxy, once.
func (r *execRun) closeProxy() {
	r.pxOnce.Do(func() {
		if r.px != nil {
			r.px.Close()
		}
	})
}

// onEvent receives a commit fault from the proxy's goroutines.
func (r *execRun) onEvent(e toxics.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, rundir.EventLine(e, int64(e.Time.Sub(r.pstart))))
}

// onWindow records a fault window opening or closing.
func (r *execRun) onWindow(w schedule.Window) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, rundir.WindowLine(w, int64(w.Time.Sub(r.pstart)), nil))
}

// prepareHistory creates the program's history file (program.jsonl in the run
// directory), with the header when --model gave it, and the program's environment.
func (r *execRun) prepareHistory() error {
	r.history = filepath.Join(r.dir, "program.jsonl")
	f, err := os.OpenFile(r.history, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("exec: create the program's history: %v", err)
	}
	if r.a.Model != "" {
		hdr := histories.Header{Format: histories.FormatV1, Workload: r.a.Model, Model: r.a.Model, Store: string(r.a.Store.Name()), Seed: r.a.Seed, Params: r.a.Params}
		line, _ := json.Marshal(struct {
			Header histories.Header `json:"header"`
		}{hdr})
		_, err = f.Write(append(line, '\n'))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("exec: write the history's header: %v", err)
	}
	abs, err := filepath.Abs(r.history)
	if err != nil {
		return err
	}
	storeEnv, err := r.a.Store.Env(r.proxied, r.px.Addr())
	if err != nil {
		return fmt.Errorf("exec: %v", err)
	}
	ours := append(storeEnv,
		"INDOUBT_HISTORY="+abs, "INDOUBT_PROXY_ADDR="+r.px.Addr(), "INDOUBT_SEED="+strconv.FormatInt(r.a.Seed, 10),
		"INDOUBT_STORE="+string(r.a.Store.Name()))
	if r.direct != "" {
		ours = append(ours, "INDOUBT_DIRECT_URL="+r.direct)
	}
	drop := []string{"PGHOSTADDR", "PGSERVICE", "INDOUBT_DIRECT_URL", supervise.Env}
	for _, kv := range ours {
		k, _, _ := strings.Cut(kv, "=")
		drop = append(drop, k)
	}
	r.env = append(supervise.WithoutVars(os.Environ(), drop...), ours...)
	return nil
}

// writeConfig writes config.json: what exec was asked, the DSN's secrets masked.
func (r *execRun) writeConfig() error {
	a := r.a
	cfg := rundir.ExecConfig{
		Command: "exec", Argv: a.Argv, Store: string(a.Store.Name()), DSN: redact.DSN(a.DSN), Upstream: a.Upstream,
		Faults: execSpecs(a.Schedule), Seed: a.Seed, Model: a.Model, Params: a.Params,
		FinalSQL: a.FinalSQL, FinalCmd: a.FinalCmd, Match: a.Match, Grace: a.Grace.String(),
	}
	if err := writeJSON(filepath.Join(r.dir, rundir.ConfigFile), cfg); err != nil {
		return fmt.Errorf("exec: write config: %v", err)
	}
	return nil
}

// runProgram runs the program with the fault schedule armed from its start, until it
// ends. The first SIGINT or SIGTERM (ctx) is sent on to its process group; after
// --grace it is killed.
func (r *execRun) runProgram(ctx context.Context) (supervise.Exit, bool, error) {
	r.mu.Lock()
	r.pstart = time.Now()
	r.mu.Unlock()
	p, err := supervise.Start(r.a.Argv, r.env, r.a.ProgramOut, r.a.ProgramErr)
	if err != nil {
		return supervise.Exit{}, false, fmt.Errorf("exec: %v", err)
	}
	r.mu.Lock()
	r.pstart = p.Started
	r.mu.Unlock()
	sctx, cancel := context.WithCancel(context.Background())
	sched := make(chan error, 1)
	go func() { sched <- r.a.Schedule.Run(sctx, r.px, p.Started, r.onWindow) }()
	var exit supervise.Exit
	interrupted := false
	select {
	case exit = <-p.Done:
	case <-ctx.Done():
		interrupted = true
		sig := syscall.SIGINT
		if c := context.Cause(ctx); c != nil && strings.Contains(c.Error(), syscall.SIGTERM.String()) {
			sig = syscall.SIGTERM
		}
		r.progressf("%s: sent to the program; waiting up to %v for it to stop", supervise.SignalName(sig), r.a.Grace)
		p.Interrupt(sig)
		select {
		case exit = <-p.Done:
		case <-time.After(r.a.Grace):
			r.progressf("the program did not stop within %v: killing it", r.a.Grace)
			p.Kill()
			exit = <-p.Done
		}
	}
	cancel()
	if err := <-sched; err != nil {
		return exit, interrupted, fmt.Errorf("exec: fault schedule: %v", err)
	}
	return exit, interrupted, nil
}

// readFinal reads the final state after the program ended, by --final-sql or
// --final-cmd.
func (r *execRun) readFinal(ctx context.Context) (json.RawMessage, error) {
	if r.a.FinalSQL != "" {
		return r.a.Store.FinalSQL(ctx, r.direct, r.a.FinalSQL, r.modelName())
	}
	var size int64
	if fi, err := os.Stat(r.history); err == nil {
		size = fi.Size()
	}
	return runFinalCmd(ctx, r.a.FinalCmd, r.env, r.a.ProgramErr, finalCmdMost(size))
}

// modelName is the model the history will be checked with: --model, else the header's.
func (r *execRun) modelName() string {
	if r.a.Model != "" {
		return r.a.Model
	}
	if regularHistory(r.history) != nil {
		return "" // refused when the history is read
	}
	f, err := os.Open(r.history)
	if err != nil {
		return ""
	}
	defer f.Close()
	rd, err := histories.NewReader(f, r.history)
	if err != nil || rd.Header() == nil {
		return ""
	}
	return rd.Header().Model
}

// readProgramHistory reads what the program recorded, shifts its times (Unix
// nanoseconds) to the run clock (nanoseconds since the program started), appends the
// final read when exec made one, and writes history.jsonl; program.jsonl is then
// removed. partial accepts a last line cut short, when the program did not end by itself.
func (r *execRun) readProgramHistory(partial bool, exit supervise.Exit, final json.RawMessage, elapsed time.Duration) (*histories.Header, []histories.Op, error) {
	if err := regularHistory(r.history); err != nil {
		return nil, nil, err
	}
	h, ops, err := histories.ReadFile(r.history, partial)
	if errors.Is(err, histories.ErrEmpty) || err == nil && !slices.ContainsFunc(ops, histories.Op.IsClient) {
		return nil, nil, fmt.Errorf("exec: the program (%s) wrote no history to INDOUBT_HISTORY: nothing to check (docs/history-format.md; recorders/ has writers for Python and Node)", exit)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("exec: the program's history: %v", err)
	}
	if h == nil {
		return nil, nil, fmt.Errorf("exec: the program's history has no header naming its model: give --model, or write the header (docs/history-format.md)")
	}
	if err := checkProgramHistory(r.a.Model, h, ops); err != nil {
		return nil, nil, err
	}
	if err := evidence.CheckClock(ops, evidence.WallClock); err != nil {
		return nil, nil, fmt.Errorf("exec: the program's history: %v", err)
	}
	zero := r.pstart.UnixNano()
	proc := 0
	for i := range ops {
		ops[i].Time -= zero
		for k := range ops[i].Failed {
			ops[i].Failed[k].Start -= zero
			ops[i].Failed[k].End -= zero
		}
		proc = max(proc, ops[i].Process+1)
	}
	if final != nil {
		t := int64(elapsed)
		for _, op := range ops {
			t = max(t, op.Time+1)
		}
		ops = append(ops,
			histories.Op{Time: t, Process: proc, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)},
			histories.Op{Time: t + 1, Process: proc, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: final})
	}
	hdr := *h
	if hdr.Store == "" {
		hdr.Store = string(r.a.Store.Name())
	}
	hdr.Seed = r.a.Seed
	if err := rundir.WriteHistory(r.dir, hdr, ops); err != nil {
		return nil, nil, fmt.Errorf("exec: write history.jsonl: %v", err)
	}
	os.Remove(r.history)
	// Read back as `indoubt check` will, so that the verdict is of the file.
	h, ops, err = histories.ReadFile(filepath.Join(r.dir, "history.jsonl"), false)
	if err != nil {
		return nil, nil, fmt.Errorf("exec: reread history.jsonl: %v", err)
	}
	return h, ops, nil
}

// judge writes faults.jsonl, checks the history and joins the proxy's events to it.
func (r *execRun) judge(ctx context.Context, h *histories.Header, ops []histories.Op, elapsed time.Duration, interrupted bool) (*results.Results, []string, error) {
	r.mu.Lock()
	lines, err := rundir.MarshalFaults(r.events)
	r.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("exec: write faults.jsonl: %v", err)
	}
	faultsPath := filepath.Join(r.dir, rundir.FaultsFile)
	if err := atomicfile.Write(faultsPath, lines, 0o644); err != nil {
		return nil, nil, fmt.Errorf("exec: write faults.jsonl: %v", err)
	}
	if err := rundir.WriteCheck(r.dir, rundir.Check{Limits: execLimits, Proxied: true}); err != nil {
		return nil, nil, fmt.Errorf("exec: write %s: %v", rundir.CheckFile, err)
	}
	opt := judge.Options{}
	if h.Model == checker.RegisterModel || h.Model == checker.CASRegisterModel {
		opt.VisualizePath = filepath.Join(r.dir, "linearizability.html")
	}
	j, err := judge.History(context.WithoutCancel(ctx), r.dir, h, ops, opt)
	if err != nil {
		if strings.Contains(err.Error(), "no final read") {
			return nil, nil, fmt.Errorf("exec: check: the history has no final read: record one, or give --final-sql or --final-cmd")
		}
		return nil, nil, fmt.Errorf("exec: %v", strings.TrimPrefix(err.Error(), "exec: "))
	}
	res := j.Results
	judge.Figures(res, ops, elapsed)
	res.Retry, res.StartedAt = "program", r.pstart.UTC()
	res.Workload = execWorkload
	res.Store, res.Seed, res.Server, res.Interrupted = string(r.a.Store.Name()), r.a.Seed, r.desc, interrupted
	res.Mechanism = shorten(programName(r.a.Argv), 48)
	res.Faults.Schedule = execSpecs(r.a.Schedule)
	return res, evidence.Unjoined(j.Events, j.Spans, ops), nil
}

// execLimits bound exec's check: the register models' search stops after a minute.
var execLimits = rundir.Limits{Timeout: time.Minute}

// programName is the program's command line as the report shows it: paths by their
// last element.
func programName(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = a
		if strings.Contains(a, "/") && !strings.HasPrefix(a, "-") && !strings.ContainsAny(a, " =") {
			out[i] = filepath.Base(a)
		}
	}
	return strings.Join(out, " ")
}

// execWorkload is results.json's workload of an exec: the program's own workload is in
// its history's header.
const execWorkload workloads.Name = "exec"

// shorten cuts s to at most n bytes, on a rune boundary, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// execSpecs returns the schedule's entries as written, [] (not null) for none.
func execSpecs(s schedule.Schedule) []string { return append([]string{}, specs(s)...) }

func faultNames(s schedule.Schedule) string {
	if len(s) == 0 {
		return "nofault"
	}
	var ns []string
	for _, f := range s {
		ns = append(ns, f.Name)
	}
	return strings.Join(ns, "+")
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	return strings.Join(ss, ", ")
}

// checkProgramHistory refuses what a program's history may not hold, before it is
// checked: an op id reserved for the final read (final, final-N) on an operation that
// is not a read (the check would take it for the final state, and the operations it
// stood for would go unchecked), and a header whose model is not the --model exec
// wrote there (a program that rewrote the header would choose its own checker).
func checkProgramHistory(model string, h *histories.Header, ops []histories.Op) error {
	if model != "" && h != nil && h.Model != model {
		return fmt.Errorf("exec: the program's history names model %q, but --model is %s: the program rewrote the header exec wrote; leave it as it is", shorten(h.Model, 80), model)
	}
	for _, op := range ops {
		if !op.IsClient() || op.F == "read" {
			continue
		}
		if op.OpID == "final" || strings.HasPrefix(op.OpID, "final-") {
			return fmt.Errorf("exec: the program's history line of index %d: op id %q is reserved for the final read, and this is a %s: give the operation another op id", op.Index, shorten(op.OpID, 80), shorten(op.F, 40))
		}
	}
	return nil
}

// regularHistory errs unless the program's history at path is a regular file: one it
// replaced by a FIFO (which no one writes once it has ended), a device or a link to
// one would hold exec forever or never end.
func regularHistory(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().IsRegular() {
		return nil // a missing history is the reading's to report
	}
	return fmt.Errorf("exec: the program's history INDOUBT_HISTORY is %s, not a regular file: write the history to the file exec names", rundir.FileKind(fi.Mode()))
}
