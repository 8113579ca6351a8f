package shrink

import (
	"testing"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/internal/results"
)

func TestFingerprint(t *testing.T) {
	lost := func(fault string) checker.LostWrite { return checker.LostWrite{OpID: "1-2", Fault: fault} }
	for _, tt := range []struct {
		name string
		run  results.Results
		want string
		ok   bool
	}{
		{"a valid run has none", results.Results{Verdict: checker.Valid}, "", false},
		{"an unknown run has none", results.Results{Verdict: checker.Unknown, Anomalies: []checker.Anomaly{{Kind: "overdraft"}}}, "", false},
		{"the first anomaly", results.Results{Verdict: checker.Invalid, Anomalies: []checker.Anomaly{{Kind: "premature-rejection"}, {Kind: "overdraft"}}}, "premature-rejection", true},
		{"a lost write leads, with its fault's kind", results.Results{Verdict: checker.Invalid,
			Anomalies: []checker.Anomaly{{Kind: "not-linearizable"}, {Kind: checker.LostWriteKind}}, LostWrites: []checker.LostWrite{lost("kill@1s-2s")}}, "lost-write after kill", true},
		{"a write lost with no fault", results.Results{Verdict: checker.Invalid, LostWrites: []checker.LostWrite{lost("")}}, "lost-write with no fault before it", true},
		{"anomalies trimmed: the counts by kind", results.Results{Verdict: checker.Invalid, AnomalyKinds: map[string]int{"stale-read": 2, "overdraft": 1}}, "overdraft", true},
		{"invalid and nothing named", results.Results{Verdict: checker.Invalid}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fp, ok := FingerprintOf(&tt.run)
			if ok != tt.ok || (ok && fp.String() != tt.want) {
				t.Fatalf("got %q, %v; want %q, %v", fp, ok, tt.want, tt.ok)
			}
			if ok && !fp.In(&tt.run) {
				t.Errorf("%s is not in the run it was taken from", fp)
			}
		})
	}
}

func TestFingerprintIn(t *testing.T) {
	kill := Fingerprint{Kind: checker.LostWriteKind, Fault: "kill"}
	rejection := Fingerprint{Kind: "premature-rejection"}
	for _, tt := range []struct {
		name string
		fp   Fingerprint
		run  results.Results
		want bool
	}{
		{"the kind, not first", rejection, results.Results{Verdict: checker.Invalid, Anomalies: []checker.Anomaly{{Kind: "overdraft"}, {Kind: "premature-rejection"}}}, true},
		{"the kind, counted only", rejection, results.Results{Verdict: checker.Invalid, AnomalyKinds: map[string]int{"premature-rejection": 3}}, true},
		{"another kind", rejection, results.Results{Verdict: checker.Invalid, Anomalies: []checker.Anomaly{{Kind: "overdraft"}}}, false},
		{"the kind in a run that is not invalid", rejection, results.Results{Verdict: checker.Unknown, Anomalies: []checker.Anomaly{{Kind: "premature-rejection"}}}, false},
		{"lost after a kill of another window", kill, results.Results{Verdict: checker.Invalid, LostWrites: []checker.LostWrite{{Fault: "kill@0.5s-0.6s"}}}, true},
		{"lost after a failover is another bug", kill, results.Results{Verdict: checker.Invalid, LostWrites: []checker.LostWrite{{Fault: "failover@2s"}}}, false},
		{"lost writes absent", kill, results.Results{Verdict: checker.Invalid, Anomalies: []checker.Anomaly{{Kind: "not-linearizable"}}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fp.In(&tt.run); got != tt.want {
				t.Fatalf("%s in %+v: %v, want %v", tt.fp, tt.run, got, tt.want)
			}
		})
	}
}
