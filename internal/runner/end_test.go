package runner

import (
	"testing"
	"time"
)

// A timed run ends at its deadline, unless a process fault has not been seen to end:
// then at the first acknowledgement after the server answered again, or wait past the
// deadline.
func TestRunEndWaitsForRecovery(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	e := newRunEnd(t0, 4*time.Second, 10*time.Second)
	if e.past(at(3.9)) || !e.past(at(4.1)) {
		t.Fatal("without a fault the run ends at its deadline")
	}
	e.faultBegins() // a restart that outlasts the run
	if e.past(at(5)) {
		t.Error("ended while the fault was still being applied")
	}
	e.faultEnds(at(6))
	if e.past(at(7)) {
		t.Error("ended before an acknowledgement after the fault")
	}
	e.acked(at(5.5)) // acknowledged before the server came back: says nothing
	if e.past(at(7)) {
		t.Error("an acknowledgement from before the fault's end counted")
	}
	e.acked(at(7.5))
	if !e.past(at(7.6)) {
		t.Error("did not end after the first acknowledgement after the fault")
	}
	stuck := newRunEnd(t0, 4*time.Second, 10*time.Second)
	stuck.faultBegins()
	if !stuck.past(at(14.1)) {
		t.Error("waited past the bound")
	}
	byOps := newRunEnd(t0, 0, time.Minute)
	if byOps.past(at(1e6)) || byOps.timed() {
		t.Error("a run sized by operations has no deadline")
	}
}
