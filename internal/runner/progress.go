package runner

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/indoubt/indoubt/internal/schedule"
)

// Progress is a snapshot of a run while its workers drive it, for a live progress line.
type Progress struct {
	Elapsed time.Duration
	// Completed counts the operations completed so far (ok, fail and info).
	Completed int64
	// Faults counts the faults the proxy has fired so far; Proxied says whether the run
	// goes through the proxy at all (a schedule of process faults only does not).
	Faults  int64
	Proxied bool
	// ProcessFaults counts the process faults (kill, pause, restart, failover, power
	// loss) applied to the server so far.
	ProcessFaults int64
	// Total is the number of operations the run makes with Ops, 0 with Duration.
	Total int64
	// Duration is the run's length with Duration, 0 with Ops.
	Duration time.Duration
	// Server says what a process fault is doing to the server right now ("down:
	// kill@2s-5s", "paused: pause@1s-2s"); empty while it runs undisturbed.
	Server string
}

// progressEvery is how often OnProgress is called.
const progressEvery = 250 * time.Millisecond

// watch calls cfg.OnProgress every progressEvery until the returned stop is called.
func (r *run) watch(nem *nemesis) (stop func()) {
	if r.cfg.OnProgress == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			p := Progress{Elapsed: time.Since(r.start), Duration: r.cfg.Duration}
			if r.cfg.Duration == 0 {
				p.Total = int64(r.cfg.Ops) * int64(r.cfg.Workers)
			}
			p.Completed = r.completed.Load()
			if nem != nil {
				p.Faults, p.Proxied = nem.fired(), nem.proxied()
				if nem.procs != nil {
					p.Server, p.ProcessFaults = nem.procs.state.get()
				}
			}
			r.cfg.OnProgress(p)
		}
	}()
	return func() { close(done); <-finished }
}

// serverState is what a process fault is doing to the server, for the progress line.
type serverState struct {
	mu      sync.Mutex
	now     string
	applied int64
}

// during says that fault f is being applied; the returned func says it is over.
func (s *serverState) during(f schedule.Fault) (over func()) {
	what := "down"
	switch f.Name {
	case "pause":
		what = "paused"
	case "restart":
		what = "restarting"
	case "failover":
		what = "failing over"
	}
	s.mu.Lock()
	s.applied++
	s.mu.Unlock()
	s.set(what + ": " + f.Spec)
	return func() { s.set("") }
}

func (s *serverState) set(v string) {
	s.mu.Lock()
	s.now = v
	s.mu.Unlock()
}

// get returns what is being done to the server now and how many faults were applied.
func (s *serverState) get() (string, int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now, s.applied
}

// fired counts the faults the proxy has fired.
func (n *nemesis) fired() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	var s int64
	for _, v := range n.byKind {
		s += v
	}
	return s
}

// runName names a run directory by its time and what it ran:
// <time>-<workload>-<store>-<faults>-<retry>, with "nofault" when no fault was asked
// for and several faults joined by "+".
func runName(cfg Config, start time.Time) string {
	fault := "nofault"
	if len(cfg.Faults) > 0 {
		var ns []string
		for _, f := range cfg.Faults {
			// Each name once: a list of many faults of one kind still names a
			// directory the filesystem takes.
			if !slices.Contains(ns, f.Name) {
				ns = append(ns, f.Name)
			}
		}
		fault = strings.Join(ns, "+")
	}
	clean := strings.NewReplacer("/", "_", " ", "_", ":", "_")
	return clean.Replace(fmt.Sprintf("%s-%s-%s-%s-%s", start.Format("20060102-150405.000"), cfg.Workload, cfg.Store, fault, cfg.Retry.Name))
}
