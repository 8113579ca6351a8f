package shrink

import (
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/outages"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/internal/runner"
	"github.com/indoubt/indoubt/internal/schedule"
	"github.com/indoubt/indoubt/workloads"
)

// Fault is one fault of an explicit list: one event, with what it is, what it hits,
// when and for how long. Spec is how indoubt run's --fault writes it.
type Fault struct {
	// Spec is the schedule entry: commit-cut@commit:57, kill@1s-1.5s, failover@2s.
	Spec string `json:"spec"`
	// Kind is the fault's name: commit-cut, commit-drop, kill, failover, latency, ...
	Kind string `json:"kind"`
	// Target says what it hits: a commit point, the server, every connection.
	Target string `json:"target"`
	// AtS is when it fired, in seconds from the start of the run it was seen in (a
	// listed commit fault: that run's time of the point), or when it starts.
	AtS float64 `json:"at_s"`
	// DurationS is how long it lasts: a kill's downtime, a window's length; 0 for a
	// fault of an instant.
	DurationS float64 `json:"duration_s"`

	f schedule.Fault
}

// newFault describes a parsed entry; at is when it fired, for a listed commit fault.
func newFault(f schedule.Fault, at time.Duration) Fault {
	out := Fault{Spec: f.Spec, Kind: f.Name, f: f, AtS: f.Start.Seconds()}
	if f.Bounded {
		out.DurationS = (f.End - f.Start).Seconds()
	}
	switch {
	case f.Pin != nil:
		out.AtS = at.Seconds()
		if f.Pin.Point > 0 {
			out.Target = fmt.Sprintf("commit point %d", f.Pin.Point)
		} else {
			out.Target = fmt.Sprintf("transaction %d of connection %d", f.Pin.Txn, f.Pin.Conn)
		}
	case f.Process:
		out.Target = "the server"
	case f.Coordinator:
		out.Target = "the two-phase commit coordinator"
	case f.Toxic != nil && f.Toxic.Upstream:
		out.Target = "every connection, client to server"
	case f.Toxic != nil:
		out.Target = "every connection, server to client"
	case f.Name == "partition":
		out.Target = "every connection"
	default:
		out.Target = fmt.Sprintf("every commit point, with probability %g", f.P)
		if f.Max > 0 {
			out.Target += fmt.Sprintf(", at most %d", f.Max)
		}
	}
	return out
}

// explicit makes the faults of a recorded run explicit, one entry per event: every
// commit fault that fired becomes a listed fault at its point (by number; by connection
// and transaction in a run recorded before points were numbered), every process fault
// and window that was applied stays as written, and entries that never did anything are
// left out. Commit faults of a run over several proxies (two-phase commit) stay as
// written, since an event does not say which proxy fired it; notes says so.
func explicit(dir string, cfg runner.Config, ops []histories.Op) (list []Fault, notes []string, err error) {
	lines, err := readFaultLines(dir)
	if err != nil {
		return nil, nil, err
	}
	opened := map[string]bool{}
	for _, l := range lines {
		if l.Window != nil && l.Window.Window == "start" {
			opened[l.Window.Fault] = true
		}
	}
	applied := map[string]bool{}
	for _, pf := range outages.ProcessFaults(ops) {
		applied[pf.Fault] = true
	}
	severalProxies := cfg.Workload == workloads.Transfer || cfg.Workload == workloads.TwoRows
	pinnable := !severalProxies
	for _, l := range lines {
		if e := l.Event; e != nil && e.Kind != 0 && e.Point == 0 && e.Txn == nil {
			pinnable = false
		}
	}
	for _, f := range cfg.Faults {
		switch {
		case f.Process:
			if applied[f.Spec] {
				list = append(list, newFault(f, 0))
			}
		case f.Coordinator:
			list = append(list, newFault(f, 0))
		case f.Toxic != nil || f.Name == "partition":
			if opened[f.Spec] {
				list = append(list, newFault(f, 0))
			}
		case !pinnable:
			if opened[f.Spec] {
				list = append(list, newFault(f, 0))
			}
		}
	}
	switch {
	case severalProxies && hasCommitFaults(cfg.Faults):
		notes = append(notes, "its commit faults stay as written: a two-phase commit run has a proxy per server, and an event does not say which one fired it")
	case !pinnable:
		notes = append(notes, "its commit faults stay as written: its faults.jsonl names neither the commit point nor the transaction of each fault")
	}
	if pinnable {
		seen := map[toxics.Pin]bool{}
		for _, l := range lines {
			e := l.Event
			if e == nil || e.Kind == 0 {
				continue // a kind this build cannot list again
			}
			pin := toxics.Pin{Kind: e.Kind, Point: e.Point}
			if e.Point == 0 {
				pin.Conn, pin.Txn = e.ConnIndex, e.Txn.Seq
			}
			k := pin
			k.Kind = 0
			if seen[k] {
				continue
			}
			seen[k] = true
			f, err := schedule.ParseFault(pin.String())
			if err != nil {
				return nil, nil, err
			}
			list = append(list, newFault(f, time.Duration(l.RunTime())))
		}
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].AtS < list[j].AtS })
	return list, notes, nil
}

func hasCommitFaults(s schedule.Schedule) bool {
	return slices.ContainsFunc(s, func(f schedule.Fault) bool {
		return f.Toxic == nil && !f.Process && !f.Coordinator && f.Name != "partition"
	})
}

// readFaultLines reads a run's faults.jsonl; a missing file is a run without a proxy or
// a nemesis.
func readFaultLines(dir string) ([]rundir.FaultLine, error) {
	return rundir.ReadFaultsFile(filepath.Join(dir, rundir.FaultsFile))
}

// firedAt returns, for each listed commit fault of a run's schedule, when the run's
// faults.jsonl says it fired; a fault absent from the map did not fire.
func firedAt(dir string) (map[toxics.Pin]time.Duration, error) {
	lines, err := readFaultLines(dir)
	if err != nil {
		return nil, err
	}
	out := map[toxics.Pin]time.Duration{}
	for _, l := range lines {
		e := l.Event
		if e == nil || e.Kind == 0 {
			continue
		}
		at := time.Duration(l.RunTime())
		out[toxics.Pin{Kind: e.Kind, Point: e.Point}] = at
		if e.Txn != nil {
			out[toxics.Pin{Kind: e.Kind, Conn: e.ConnIndex, Txn: e.Txn.Seq}] = at
		}
	}
	return out, nil
}

// firstPoint is the lowest number a listed commit fault can fire at in the run of dir:
// one more than the points the proxy had counted when its schedule started (the
// workload's setup), or 1 when faults.jsonl does not say.
func firstPoint(dir string) uint64 {
	lines, err := readFaultLines(dir)
	if err != nil {
		return 1
	}
	for _, l := range lines {
		if w := l.Window; w != nil && w.Window == "start" && w.Points != nil {
			return *w.Points + 1
		}
	}
	return 1
}
