package toxics

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
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

// checkSeededDecisions runs connections of proto through conn, two commit points each,
// under mixed faults at 0.6: the same seed must decide the same, another seed
// otherwise, and the faults split about evenly between cuts and drops.
func checkSeededDecisions(t *testing.T, proto Protocol, conn func(*harness)) {
	t.Helper()
	mixed := func(f *Faults) { f.Mixed.Set(0.6, 0) }
	a, b, other := decisionsOf(t, proto, 42, mixed, 200, conn), decisionsOf(t, proto, 42, mixed, 200, conn), decisionsOf(t, proto, 43, mixed, 200, conn)
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

// decisionsOf runs n connections of proto, each through conn (its handshake and two
// commit points), under the faults arm sets, and returns the kind of the last fault
// each got (0: none).
func decisionsOf(t *testing.T, proto Protocol, seed int64, arm func(*Faults), n int, conn func(*harness)) []Kind {
	t.Helper()
	c, evs := newProtoCommits(t, proto, seed, nil)
	arm(&c.Faults)
	var out []Kind
	for i := 0; i < n; i++ {
		h := newHarness(t, c, uint64(i), 1<<10)
		before := len(*evs)
		conn(h)
		k := Kind(0)
		if len(*evs) > before {
			e := (*evs)[len(*evs)-1]
			if e.ConnIndex != uint64(i) {
				t.Fatalf("event of connection %d says %d", i, e.ConnIndex)
			}
			k = e.Kind
		}
		out = append(out, k)
	}
	return out
}

// garbageRun is how checkGarbage drives one protocol.
type garbageRun struct {
	proto      Protocol
	seed       uint64
	iterations int
	// hello runs the handshake, if any, of the i-th garbage connection.
	hello func(h *harness, i int)
	// garbage returns the j-th piece of garbage of a connection, and whether it is a
	// damaged valid message (which may still be a real commit point).
	garbage func(rng *rand.Rand, j int) (b []byte, damaged bool)
	// good runs a valid exchange with one write on a new connection and returns a
	// word its event's statement must hold.
	good func(h *harness) string
}

// checkGarbage feeds each of r.iterations connections random bytes in both directions,
// in random chunks, with every commit fault armed. Nothing may panic, and a connection
// of pure garbage records no event: garbage is never a commit point. Then the same
// proxy must still serve a good client: a write on a new connection is dropped, with
// one event that names it.
func checkGarbage(t *testing.T, r garbageRun) {
	t.Helper()
	rng := rand.New(rand.NewPCG(r.seed, r.seed))
	for i := 0; i < r.iterations; i++ {
		c, evs := newProtoCommits(t, r.proto, int64(i), nil)
		c.Faults.Mixed.Set(1, 0)
		h := newHarness(t, c, uint64(i), 1+rng.IntN(64))
		if r.hello != nil {
			r.hello(h, i)
		}
		damaged := false
		for j := 0; j < 4; j++ {
			b, d := r.garbage(rng, j)
			damaged = damaged || d
			if rng.IntN(2) == 0 {
				h.client(b)
			} else {
				h.server(b)
			}
		}
		if !damaged && len(*evs) > 0 {
			t.Fatalf("connection %d: garbage made events %+v", i, *evs)
		}

		c.Faults.Mixed.Disarm()
		c.Faults.Drop.Set(1, 0)
		before := len(*evs)
		g := newHarness(t, c, uint64(i)+1<<32, 1+rng.IntN(64))
		want := r.good(g)
		if len(*evs) != before+1 || !g.up.closed {
			t.Fatalf("connection %d: after garbage, a good write made events %+v (closed %v), want one drop", i, (*evs)[before:], g.up.closed)
		}
		if e := (*evs)[before]; e.Kind != CommitDrop || !strings.Contains(e.Statement, want) || e.ConnIndex != uint64(1) {
			t.Fatalf("connection %d: after garbage, event %+v, want a drop of %q on the proxy's second connection", i, e, want)
		}
	}
}

// randomBytes returns up to max random bytes.
func randomBytes(rng *rand.Rand, max int) []byte {
	b := make([]byte, rng.IntN(max))
	for k := range b {
		b[k] = byte(rng.IntN(256))
	}
	return b
}

// checkPassesDisarmed runs hello and then steps through fresh halves of proto with no
// fault armed, in chunks of at most each of maxes bytes: both directions must forward
// every byte, close nothing, and report no event.
func checkPassesDisarmed(t *testing.T, proto Protocol, maxes []int, hello func(*harness) (cli, srv []byte), steps []step) {
	t.Helper()
	for _, max := range maxes {
		c, evs := newProtoCommits(t, proto, 1, nil)
		h := newHarness(t, c, uint64(max), max)
		cli, srv := hello(h)
		for _, s := range steps {
			s.run(h)
		}
		gotUp, upClosed := drain(h.upOut)
		gotDn, dnClosed := drain(h.dnOut)
		if wantUp := append(cli, join(steps, false)...); !bytes.Equal(gotUp, wantUp) || upClosed {
			t.Errorf("chunks %d: upstream forwarded %d bytes (closed %v), want %d", max, len(gotUp), upClosed, len(wantUp))
		}
		if wantDn := append(srv, join(steps, true)...); !bytes.Equal(gotDn, wantDn) || dnClosed {
			t.Errorf("chunks %d: downstream forwarded %d bytes (closed %v), want %d", max, len(gotDn), dnClosed, len(wantDn))
		}
		if len(*evs) != 0 {
			t.Errorf("events %v, want none", *evs)
		}
	}
}

// feed passes chunks to step the way a toxic half does: it keeps what step cannot
// consume yet, appends the next chunk, and calls step again from where it stopped.
// step returns how many bytes it consumed, 0 or less for none; more than it was given
// is a bug, and panics.
func feed(chunks [][]byte, step func(b []byte) int) {
	var buf []byte
	for _, ch := range chunks {
		buf = append(buf, ch...)
		off := 0
		for off < len(buf) {
			n := step(buf[off:])
			if n <= 0 {
				break
			}
			if n > len(buf)-off {
				panic(fmt.Sprintf("consumed %d of %d", n, len(buf)-off))
			}
			off += n
		}
		buf = buf[off:]
	}
}

// traceReplies feeds chunks to c's Reply the way the downstream toxic does and returns
// its verdicts other than Pass: "hold" for a Hold, and what say makes of a Release or a
// Cut.
func traceReplies(c Conn, chunks [][]byte, say func(Verdict) string) []string {
	var out []string
	feed(chunks, func(b []byte) int {
		n, v := c.Reply(b)
		if n <= 0 || n > len(b) {
			return n
		}
		switch v.Action {
		case Hold:
			out = append(out, "hold")
		case Release, Cut:
			out = append(out, say(v))
		}
		return n
	})
	return out
}

// checkReleased arms one cut, runs failed, a write whose reply says it failed, and
// checks that the reply went to the client untouched with no event; the reservation then
// came back, so next, a write that succeeds, is cut.
func checkReleased(t *testing.T, proto Protocol, failed, next step) {
	t.Helper()
	c, evs := newProtoCommits(t, proto, 1, nil)
	c.Faults.Cut.Set(1, 1)
	h := newHarness(t, c, 1, 1<<10)
	failed.run(h)
	got, closed := drain(h.dnOut)
	if !bytes.Equal(got, failed.rep) || closed || len(*evs) != 0 {
		t.Fatalf("forwarded %d bytes closed %v events %v; want the reply forwarded, no event", len(got), closed, *evs)
	}
	next.run(h)
	if _, closed := drain(h.dnOut); !closed || len(*evs) != 1 {
		t.Fatalf("after the release: closed %v events %v, want a cut", closed, *evs)
	}
}
