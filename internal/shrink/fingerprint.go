package shrink

import (
	"slices"
	"strings"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/schedule"
)

// Fingerprint is what a failure must keep to count as the same failure while it
// shrinks: the kind of anomaly the checker found and, for a lost write, the kind of
// fault it followed (a write lost after a kill is not the same bug as one lost after
// a failover).
type Fingerprint struct {
	// Kind is an anomaly kind as the checker names it: premature-rejection, overdraft,
	// not-linearizable, lost-write, ...
	Kind string `json:"kind"`
	// Fault is the kind of fault a lost write followed (kill, failover, power-loss,
	// restart), or "" when the write was lost with no fault before it; set for
	// lost-write only.
	Fault string `json:"fault,omitempty"`
}

// String says it: "premature-rejection", "lost-write after kill".
func (f Fingerprint) String() string {
	switch {
	case f.Kind == checker.LostWriteKind && f.Fault != "":
		return f.Kind + " after " + f.Fault
	case f.Kind == checker.LostWriteKind:
		return f.Kind + " with no fault before it"
	}
	return f.Kind
}

// FingerprintOf is the fingerprint of an invalid run: a lost write's when the run lost
// one (the first listed), else the kind of the anomaly the checker names first. ok is
// false for a run that is not invalid or names no anomaly.
func FingerprintOf(r *results.Results) (Fingerprint, bool) {
	if r == nil || r.Verdict != checker.Invalid {
		return Fingerprint{}, false
	}
	if len(r.LostWrites) > 0 {
		return Fingerprint{Kind: checker.LostWriteKind, Fault: faultKind(r.LostWrites[0].Fault)}, true
	}
	if len(r.Anomalies) > 0 {
		return Fingerprint{Kind: r.Anomalies[0].Kind}, true
	}
	// Listed anomalies trimmed to none: the counts by kind remain.
	kinds := make([]string, 0, len(r.AnomalyKinds))
	for k := range r.AnomalyKinds {
		kinds = append(kinds, k)
	}
	if len(kinds) == 0 {
		return Fingerprint{}, false
	}
	slices.Sort(kinds)
	return Fingerprint{Kind: kinds[0]}, true
}

// In reports whether an invalid run shows the failure f names: an anomaly of f's kind,
// or for a lost write one lost after a fault of f's fault kind. The anomaly need not be
// the one the run names first.
func (f Fingerprint) In(r *results.Results) bool {
	if r == nil || r.Verdict != checker.Invalid {
		return false
	}
	if f.Kind == checker.LostWriteKind {
		for _, l := range r.LostWrites {
			if faultKind(l.Fault) == f.Fault {
				return true
			}
		}
		return false
	}
	if r.AnomalyKinds[f.Kind] > 0 {
		return true
	}
	for _, a := range r.Anomalies {
		if a.Kind == f.Kind {
			return true
		}
	}
	return false
}

// faultKind is the name of a schedule entry as written ("kill@1s-2s" → kill), "" for
// none.
func faultKind(spec string) string {
	if spec == "" {
		return ""
	}
	if f, err := schedule.ParseFault(spec); err == nil {
		return f.Name
	}
	name, _, _ := strings.Cut(spec, "@")
	name, _, _ = strings.Cut(name, ":")
	return strings.TrimSpace(name)
}
