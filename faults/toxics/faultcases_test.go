package toxics

import (
	"bytes"
	"fmt"
	"testing"
)

// faultCase is a scripted conversation in which one commit point is faulted.
type faultCase struct {
	name  string
	arm   func(*Faults)
	steps []step
	// the faulted step: its request is forwarded up to upTo bytes, its reply up to
	// dnTo bytes (-1: whole); the event expected.
	at         int
	upTo, dnTo int
	kind       Kind
	stmt, tag  string
}

// faultRun is how runFaultCases drives one protocol.
type faultRun struct {
	proto Protocol
	name  string                           // the protocol's name in events
	hello func(*harness) (cli, srv []byte) // the handshake before the steps, nil: none; returns the bytes it sent each way
	maxes []int                            // the largest chunks to try, nil: 1, 5 and 32 KiB
}

// runFaultCases runs each case through a fresh harness of r.proto in chunks of at most
// each of r.maxes bytes. Each case must forward everything before its faulted step and
// the faulted step's bytes up to upTo and dnTo, close the half its fault closes, and
// report one event of its kind, statement and tag, with the truth the kind implies.
func runFaultCases(t *testing.T, r faultRun, cases []faultCase) {
	t.Helper()
	maxes := r.maxes
	if maxes == nil {
		maxes = []int{1, 5, 32 << 10}
	}
	for _, tt := range cases {
		for _, max := range maxes {
			t.Run(fmt.Sprintf("%s/chunks %d", tt.name, max), func(t *testing.T) {
				c, evs := newProtoCommits(t, r.proto, 1, nil)
				tt.arm(&c.Faults)
				h := newHarness(t, c, uint64(max), max)
				var cli, srv []byte
				if r.hello != nil {
					cli, srv = r.hello(h)
				}
				for _, s := range tt.steps {
					s.run(h)
				}
				s := tt.steps[tt.at]
				upTo, dnTo := tt.upTo, tt.dnTo
				if upTo < 0 {
					upTo = len(s.req)
				}
				if dnTo < 0 {
					dnTo = len(s.rep)
				}
				wantUp := append(append(cli, join(tt.steps[:tt.at], false)...), s.req[:upTo]...)
				wantDn := append(append(srv, join(tt.steps[:tt.at], true)...), s.rep[:dnTo]...)
				gotUp, _ := drain(h.upOut)
				gotDn, dnClosed := drain(h.dnOut)
				if !bytes.Equal(gotUp, wantUp) {
					t.Errorf("upstream forwarded %d bytes %q, want %d %q", len(gotUp), tail(gotUp), len(wantUp), tail(wantUp))
				}
				if !bytes.Equal(gotDn, wantDn) {
					t.Errorf("downstream forwarded %d bytes %q, want %d %q", len(gotDn), tail(gotDn), len(wantDn), tail(wantDn))
				}
				if tt.kind == CommitCut && !dnClosed {
					t.Errorf("downstream not closed after a cut")
				}
				if tt.kind == CommitDrop && !h.up.closed {
					t.Errorf("upstream not closed after a drop")
				}
				if len(*evs) != 1 {
					t.Fatalf("events %+v, want one", *evs)
				}
				e := (*evs)[0]
				wantTruth := Applied
				if tt.kind == CommitDrop {
					wantTruth = NotApplied
				}
				if e.Kind != tt.kind || e.Truth != wantTruth || e.Tag != tt.tag || e.Statement != tt.stmt || e.Protocol != r.name {
					t.Errorf("event %+v, want kind %v truth %v statement %q tag %q protocol %q", e, tt.kind, wantTruth, tt.stmt, tt.tag, r.name)
				}
			})
		}
	}
}

// checkSeededDecisions checks that decisions, which runs n connections of two commit
// points each under mixed faults at 0.6 with a seed, decides the same for the same
// seed, otherwise for another, and splits about evenly between cuts and drops.
func checkSeededDecisions(t *testing.T, decisions func(seed int64, n int) []Kind) {
	t.Helper()
	a, b, other := decisions(42, 200), decisions(42, 200), decisions(43, 200)
	count := map[Kind]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, connection %d: %v then %v", i, a[i], b[i])
		}
		count[a[i]]++
	}
	if equalKinds(a, other) {
		t.Errorf("seeds 42 and 43 made the same %d decisions", len(a))
	}
	// Each connection has two points at 0.6: P(no fire) = 0.16; fires split evenly.
	if count[0] < 10 || count[0] > 60 || count[CommitCut] < 50 || count[CommitDrop] < 50 {
		t.Errorf("decisions %v: want about 32 none and 84 of each fault", count)
	}
}
