package twopc

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FaultKind names a fault of the two-phase commit runs.
type FaultKind string

// The faults. The cuts and drops are the commit-aware proxy's, restricted to one phase
// of the protocol; the crash is the coordinator's own.
const (
	PrepareCut       FaultKind = "prepare-cut"       // PREPARE TRANSACTION happens, its reply is lost
	PrepareDrop      FaultKind = "prepare-drop"      // PREPARE TRANSACTION never reaches the server
	CommitCut        FaultKind = "commit-cut"        // COMMIT PREPARED happens, its reply is lost
	CommitDrop       FaultKind = "commit-drop"       // COMMIT PREPARED never reaches the server
	CoordinatorCrash FaultKind = "coordinator-crash" // the coordinator dies between phases at a time
)

// Fault is one parsed --fault: NAME[:P] for the proxy's faults (P per commit point of
// that phase, default 0.1), coordinator-crash@T (T after the start, default 1s).
type Fault struct {
	Kind FaultKind
	P    float64
	At   time.Duration
	Spec string
}

// ParseFault parses one --fault of a two-phase commit run.
func ParseFault(spec string) (Fault, error) {
	name, at, hasAt := strings.Cut(spec, "@")
	name, p, hasP := strings.Cut(name, ":")
	f := Fault{Kind: FaultKind(name), P: 0.1, At: time.Second, Spec: spec}
	switch f.Kind {
	case PrepareCut, PrepareDrop, CommitCut, CommitDrop:
		if hasAt {
			return f, fmt.Errorf("fault %q: %s applies for the whole run, without @", spec, name)
		}
		if hasP {
			v, err := strconv.ParseFloat(p, 64)
			if err != nil || v <= 0 || v > 1 {
				return f, fmt.Errorf("fault %q: probability must be in (0, 1]", spec)
			}
			f.P = v
		}
	case CoordinatorCrash:
		if hasP {
			return f, fmt.Errorf("fault %q: coordinator-crash takes @T, not a probability", spec)
		}
		if hasAt {
			d, err := time.ParseDuration(at)
			if err != nil || d < 0 {
				return f, fmt.Errorf("fault %q: @T must be a duration such as 2s", spec)
			}
			f.At = d
		}
	default:
		return f, fmt.Errorf("unknown fault %q for two-phase commit runs (want prepare-cut, prepare-drop, commit-cut, commit-drop, coordinator-crash@T)", name)
	}
	return f, nil
}

// statement is the protocol statement a proxy fault targets.
func (k FaultKind) statement() string {
	switch k {
	case PrepareCut, PrepareDrop:
		return "PREPARE TRANSACTION"
	case CommitCut, CommitDrop:
		return "COMMIT PREPARED"
	}
	return ""
}

func (k FaultKind) cut() bool { return k == PrepareCut || k == CommitCut }
