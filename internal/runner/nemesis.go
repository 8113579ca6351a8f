package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/evidence"
	"github.com/indoubt/indoubt/internal/results"
)

// nemesis owns the fault proxy of a run and its schedule. It writes every fault event
// and every window to faults.jsonl and, as nemesis events, to the history; it keeps the
// events to join them to operations when the run ends. The ground truth never reaches
// the checker: nemesis events are skipped by every checker.
type nemesis struct {
	// px is nil when the schedule has process faults only: those need no proxy, and
	// through one a refused connection would look like a cut one.
	px    *faults.Proxy
	sched faults.Schedule
	// procs applies the process faults to the launched server; nil when there are none.
	procs *procNemesis
	// nodes applies the partitions and links between the nodes of a topology with a
	// network of its own, and records their roles; nil otherwise (partitions.go).
	nodes *nodeNemesis

	mu     sync.Mutex
	file   *os.File
	w      *bufio.Writer
	r      *run
	events []evidence.FaultEvent
	byKind map[string]int64
	byTr   map[string]int64

	cancel context.CancelFunc
	done   chan error
	// opened receives each window as it opens, so begin can wait for the windows that
	// open at the start of the run before the workers send anything.
	opened chan struct{}
}

func startNemesis(ctx context.Context, cfg Config, b backend, dsn, dir string, srv launched) (*nemesis, string, error) {
	sched := cfg.Faults
	f, err := os.Create(filepath.Join(dir, "faults.jsonl"))
	if err != nil {
		return nil, "", err
	}
	n := &nemesis{sched: sched, file: f, w: bufio.NewWriter(f), byKind: map[string]int64{}, byTr: map[string]int64{}}
	if len(sched.Processes()) > 0 {
		if srv.ctl == nil {
			f.Close()
			return nil, "", fmt.Errorf("process faults: the %s server cannot be killed, paused or restarted", b.name)
		}
		n.procs = newProcNemesis(cfg, srv.ctl, srv.desc)
	}
	if srv.topo != nil {
		n.nodes = newNodeNemesis(cfg, srv.topo)
	}
	if !cfg.proxied() {
		return n, dsn, nil
	}
	upstream, err := b.addr(dsn)
	if err != nil {
		f.Close()
		return nil, "", err
	}
	// Every store has its protocol's toxics; disarmed, they cost nothing measurable.
	proto := b.protocol
	n.px, err = faults.Start(faults.Options{
		Upstream: upstream, Protocol: proto, Seed: cfg.Seed, Events: n.onEvent,
	})
	if err != nil {
		f.Close()
		return nil, "", err
	}
	pdsn, err := b.rewrite(dsn, n.px.Addr())
	if err != nil {
		n.close()
		return nil, "", err
	}
	cfg.progressf("fault proxy %s -> %s, schedule: %v", n.px.Addr(), upstream, specs(cfg.Faults))
	return n, pdsn, nil
}

// onEvent receives a commit fault from the proxy's goroutines.
func (n *nemesis) onEvent(e toxics.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kind, truth := e.Kind.String(), e.Truth.String()
	n.byKind[kind]++
	n.byTr[truth]++
	var at int64
	if n.r != nil {
		at = int64(e.Time.Sub(n.r.start))
	}
	n.events = append(n.events, evidence.FaultEvent{Time: at, Conn: e.Conn, Kind: kind, Truth: truth, What: e.Statement, Tag: e.Tag})
	line, _ := json.Marshal(struct {
		toxics.Event
		RunTime int64 `json:"run_time"`
	}{e, at})
	n.w.Write(append(line, '\n'))
	if n.r != nil {
		n.r.hw.Write(histories.Op{
			Time: at, Process: histories.Nemesis, Type: histories.Info, F: kind, Conn: e.Conn,
			Value: histories.Value(map[string]string{"truth": truth, "statement": e.Statement, "tag": e.Tag}),
		})
	}
}

// onWindow records a fault window opening or closing.
func (n *nemesis) onWindow(w faults.Window) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at := int64(w.Time.Sub(n.r.start))
	f := "start"
	if !w.Open {
		f = "stop"
	}
	line, _ := json.Marshal(map[string]any{"window": f, "fault": w.Fault, "run_time": at, "time": w.Time})
	n.w.Write(append(line, '\n'))
	n.r.hw.Write(histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: f, Value: histories.Value(map[string]string{"fault": w.Fault})})
	if w.Open {
		select {
		case n.opened <- struct{}{}:
		default:
		}
	}
}

// begin arms the schedule against the run's clock.
func (n *nemesis) begin(r *run) {
	n.mu.Lock()
	n.r = r
	n.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.done = make(chan error, 1)
	if n.procs != nil {
		n.procs.begin(r, n.onProcess)
	}
	if n.nodes != nil {
		n.nodes.begin(r, n.onProcess)
	}
	if n.px == nil {
		n.done <- nil
		return
	}
	atStart := 0
	for _, f := range n.sched {
		if f.Start == 0 {
			atStart++
		}
	}
	n.opened = make(chan struct{}, len(n.sched))
	go func() { n.done <- n.sched.Run(ctx, n.px, r.start, n.onWindow) }()
	// A fault armed for the whole run must be armed before the first operation: with
	// one worker and one operation, a race here would decide whether it fires at all.
	timeout := time.After(5 * time.Second)
	for i := 0; i < atStart; i++ {
		select {
		case <-n.opened:
		case <-timeout:
			return
		}
	}
}

// end disarms every fault; the workers have stopped.
func (n *nemesis) end() error {
	if n.cancel == nil {
		return nil
	}
	n.cancel()
	err := <-n.done
	if n.procs != nil {
		n.procs.end()
	}
	if n.nodes != nil {
		n.nodes.end()
	}
	n.cancel = nil
	return err
}

// onProcess records a process fault's event in the history and in faults.jsonl.
func (n *nemesis) onProcess(op histories.Op) {
	n.mu.Lock()
	defer n.mu.Unlock()
	line, _ := json.Marshal(map[string]any{"process_fault": op.F, "value": op.Value, "run_time": op.Time})
	n.w.Write(append(line, '\n'))
	n.r.hw.Write(op)
}

func (n *nemesis) close() {
	n.end()
	if n.px != nil {
		n.px.Close()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.w.Flush()
	n.file.Sync()
	n.file.Close()
}

// account adds the fault counts and the evidence to the results, and reconciles the
// workload's final state with the ground truth.
func (n *nemesis) account(res *results.Results, ops []histories.Op) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.procs != nil {
		n.procs.account(res, ops)
	}
	if n.nodes != nil {
		n.nodes.account(res, ops)
	}
	if n.px == nil {
		return
	}
	for k, v := range n.byKind {
		res.Faults.ByKind[k] = v
	}
	for k, v := range n.byTr {
		res.Faults.ByTruth[k] = v
	}
	events := append([]evidence.FaultEvent(nil), n.events...)
	commits := evidence.Tally(events)
	res.Faults.Commits = &commits
	// The attempts the events join are the history's (failed_attempts): what `indoubt
	// check --faults` joins from the run directory is the same.
	res.Evidence, res.Final = evidence.Join(events, evidence.SpansFromHistory(ops, events), ops, res.Final, res.Verdict == checker.Invalid)
}
