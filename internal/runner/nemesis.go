package runner

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/schedule"
)

// nemesis owns the fault proxy of a run and its schedule. It writes every fault event
// and every window to faults.jsonl and, as nemesis events, to the history, where the
// judge reads them when the run ends (package judge). The ground truth never reaches
// the checker: nemesis events are skipped by every checker.
type nemesis struct {
	// pxs are the proxies, one per server (several for a two-phase commit run); none
	// when the schedule has process faults or a coordinator crash only: those need no
	// proxy, and through one a refused connection would look like a cut one.
	pxs   []*faults.Proxy
	sched schedule.Schedule
	// procs applies the process faults to the launched server; nil when there are none.
	procs *procNemesis
	// nodes applies the partitions and links between the nodes of a topology with a
	// network of its own, and records their roles; nil otherwise (partitions.go).
	nodes *nodeNemesis

	mu sync.Mutex
	w  *rundir.FaultWriter
	r  *run
	// byKind counts the proxy's events by kind, for the progress line.
	byKind map[string]int64
	// err is the first write to faults.jsonl or to the history that failed: the run
	// fails with it rather than present evidence with a hole in it.
	err error

	cancel context.CancelFunc
	done   chan error
	// opened receives each window as it opens, so begin can wait for the windows that
	// open at the start of the run before the workers send anything.
	opened chan struct{}
}

// startNemesis opens faults.jsonl and, when the run is proxied, starts a proxy in front
// of each of dsns, returning the DSNs that go through them.
func startNemesis(ctx context.Context, cfg Config, b backend, dsns []string, dir string, srv launched) (*nemesis, []string, error) {
	sched := cfg.Faults
	w, err := rundir.CreateFaults(filepath.Join(dir, rundir.FaultsFile))
	if err != nil {
		return nil, nil, err
	}
	n := &nemesis{sched: sched, w: w, byKind: map[string]int64{}}
	if len(sched.Processes()) > 0 {
		if srv.ctl == nil {
			w.Close()
			return nil, nil, fmt.Errorf("process faults: the %s server cannot be killed, paused or restarted", b.name)
		}
		n.procs = newProcNemesis(cfg, srv.ctl, srv.desc)
	}
	if srv.topo != nil {
		n.nodes = newNodeNemesis(cfg, srv.topo)
	} else if srv.roles != nil {
		n.nodes = newNodeNemesis(cfg, srv.roles.roleTopology())
	}
	if !cfg.proxied() {
		return n, dsns, nil
	}
	match := cfg.commitPoint()
	if srv.topo != nil {
		// A proxy in front of each node, for the clients beside it (galera_proxy.go).
		if err := n.proxySides(cfg, b, srv.topo, match); err != nil {
			n.close()
			return nil, nil, err
		}
		return n, dsns, nil
	}
	var out []string
	for i, dsn := range dsns {
		upstream, err := b.addr(dsn)
		if err != nil {
			n.close()
			return nil, nil, err
		}
		// Every store has its protocol's toxics; disarmed, they cost nothing measurable.
		opt := faults.Options{Upstream: upstream, Protocol: b.protocol, Seed: cfg.Seed + int64(i), Events: n.onEvent, Match: match}
		if len(dsns) > 1 {
			opt.Name = "indoubt-" + strconv.Itoa(i)
		}
		px, err := faults.Start(opt)
		if err != nil {
			n.close()
			return nil, nil, err
		}
		n.pxs = append(n.pxs, px)
		pdsn, err := b.rewrite(dsn, px.Addr())
		if err != nil {
			n.close()
			return nil, nil, err
		}
		out = append(out, pdsn)
		cfg.progressf("fault proxy %s -> %s, schedule: %v", px.Addr(), upstream, specs(cfg.Faults))
	}
	return n, out, nil
}

// proxied reports whether the run goes through the proxies; false for a nil nemesis.
func (n *nemesis) proxied() bool { return n != nil && len(n.pxs) > 0 }

// fail keeps the first write error; n.mu is held.
func (n *nemesis) fail(err error) {
	if err != nil && n.err == nil {
		n.err = err
	}
}

// write appends one line to faults.jsonl and op to the history (when the run has begun
// and op is set); n.mu is held. A failed write is kept for flush to report.
func (n *nemesis) write(line rundir.FaultLine, op *histories.Op) {
	n.fail(n.w.Write(line))
	if op != nil && n.r != nil {
		_, err := n.r.hw.Write(*op)
		n.fail(err)
	}
}

// note records an event of the runner's own (the coordinator's crash) in faults.jsonl
// and, as a nemesis event, in the history.
func (n *nemesis) note(line rundir.FaultLine, op histories.Op) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.write(line, &op)
}

// flush writes out faults.jsonl and returns the first error any write of the nemesis
// met, to faults.jsonl or to the history; nil for a nil nemesis. The proxies may still
// report events after it (they stop in close), which a later flush would see.
func (n *nemesis) flush() error {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fail(n.w.Flush())
	return n.err
}

// onEvent receives a commit fault from the proxy's goroutines.
func (n *nemesis) onEvent(e toxics.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	kind, truth := e.Kind.String(), e.Truth.String()
	n.byKind[kind]++
	var at int64
	if n.r != nil {
		at = int64(e.Time.Sub(n.r.start))
	}
	n.write(rundir.EventLine(e, at), &histories.Op{
		Time: at, Process: histories.Nemesis, Type: histories.Info, F: kind, Conn: e.Conn,
		Value: histories.Value(map[string]string{"truth": truth, "statement": e.Statement, "tag": e.Tag}),
	})
}

// onWindow records a fault window opening or closing.
func (n *nemesis) onWindow(w schedule.Window) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at := int64(w.Time.Sub(n.r.start))
	f := "start"
	if !w.Open {
		f = "stop"
	}
	var points *uint64
	if w.Open && len(n.pxs) > 0 {
		// Where the numbers of the points after it begin (listed faults, indoubt shrink).
		p := n.pxs[0].CommitPoints()
		points = &p
	}
	n.write(rundir.WindowLine(w, at, points),
		&histories.Op{Time: at, Process: histories.Nemesis, Type: histories.Info, F: f, Value: histories.Value(map[string]string{"fault": w.Fault})})
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
	n.done = make(chan error, max(1, len(n.pxs)))
	if n.procs != nil {
		n.procs.begin(r, n.onProcess)
	}
	if n.nodes != nil {
		n.nodes.begin(r, n.onProcess)
	}
	if len(n.pxs) == 0 {
		n.done <- nil
		return
	}
	atStart := 0
	for _, f := range n.sched.OnProxy() {
		if f.Start == 0 {
			atStart++
		}
	}
	n.opened = make(chan struct{}, len(n.sched)*len(n.pxs))
	for i, px := range n.pxs {
		// Every proxy follows the one schedule; the first one's windows are recorded.
		report := n.onWindow
		if i > 0 {
			report = func(w schedule.Window) {
				if w.Open {
					select {
					case n.opened <- struct{}{}:
					default:
					}
				}
			}
		}
		go func() { n.done <- n.sched.Run(ctx, px, r.start, report) }()
	}
	// A fault armed for the whole run must be armed before the first operation: with
	// one worker and one operation, a race here would decide whether it fires at all.
	timeout := time.After(5 * time.Second)
	for i := 0; i < atStart*len(n.pxs); i++ {
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
	var err error
	for range max(1, len(n.pxs)) {
		err = errors.Join(err, <-n.done)
	}
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
	n.write(rundir.ProcessLine(op), &op)
}

// close ends the open windows, stops the proxy and closes faults.jsonl. Its error is
// the file's first (bufio's errors are sticky): a faults.jsonl that could not be written
// whole (a full disk) must not be published as the run's ground truth.
func (n *nemesis) close() error {
	n.end()
	for _, px := range n.pxs {
		px.Close()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.w.Close()
}

// account prints the timelines of the process faults and partitions the judge read
// from the history.
func (n *nemesis) account(res *results.Results) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.procs != nil {
		n.procs.account(res)
	}
	if n.nodes != nil {
		n.nodes.account(res)
	}
}
