package cql_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/workloads"
	"github.com/indoubt/indoubt/workloads/budget"
)

// TestConnJoinsProxyCuts puts the fault proxy in front of the node and cuts the LWTs
// (and the conditional batches of idempotent decrements) of several sessions at once.
// The runner joins each cut event to the attempt that saw it by the Conn the session
// reports right after the call and by time; so every event must name the Conn of
// exactly one call that was running when the cut fired, and that call must have failed
// as unknown. A call on a connection that is still healthy must also be announced by
// Conn before it starts: Conn names the connection about to be used.
func TestConnJoinsProxyCuts(t *testing.T) {
	srv := node.Get(t)
	var mu sync.Mutex
	var events []toxics.Event
	px, err := faults.Start(faults.Options{Upstream: srv.Addr, Protocol: toxics.CQL{}, Seed: 1, Events: func(e toxics.Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	ctx := testContext(t)
	c := open(t, "connjoin", px.Addr())
	if err := c.Reset(ctx, 1000); err != nil {
		t.Fatal(err)
	}

	const sessions, each, maxCuts = 4, 12, 6
	type call struct {
		session       int
		before, after string
		from, to      time.Time
		err           error
		afterFailure  bool // the session's previous call failed
		joined        bool
	}
	var calls []*call
	// Armed after Reset: the admin session's INSERT ... IF NOT EXISTS is a commit point.
	px.Faults().Cut.Set(0.2, maxCuts)
	concurrently(t, ctx, c, sessions, func(w int, s budget.Session) {
		failed := false
		for i := 0; i < each; i++ {
			cl := &call{session: w, before: s.Conn(), from: time.Now(), afterFailure: failed}
			_, cl.err = s.Decrement(ctx, workloads.Request{OpID: fmt.Sprintf("%d-%d", w, i), Idempotent: w%2 == 1})
			cl.after, cl.to = s.Conn(), time.Now()
			mu.Lock()
			calls = append(calls, cl)
			mu.Unlock()
			failed = cl.err != nil
		}
	})
	px.Faults().Cut.Disarm()

	mu.Lock()
	defer mu.Unlock()
	if len(events) == 0 {
		t.Fatalf("no cut in %d decrements with cuts armed at 0.2", sessions*each)
	}
	cutConns := map[string]bool{}
	for _, e := range events {
		cutConns[e.Conn] = true
		var hits []*call
		for _, cl := range calls {
			if cl.after == e.Conn && !e.Time.Before(cl.from) && !e.Time.After(cl.to) {
				hits = append(hits, cl)
			}
		}
		if e.Kind != toxics.CommitCut || len(hits) != 1 {
			t.Errorf("cut %+v: %d calls running then report its connection, want 1", e, len(hits))
			continue
		}
		cl := hits[0]
		cl.joined = true
		if got := workloads.Classify(cl.err); got != workloads.ClassUnknown {
			t.Errorf("session %d: the cut call ended with %v (class %v), want an unknown failure", cl.session, cl.err, got)
		}
	}
	followUps := 0
	for _, cl := range calls {
		switch {
		case cl.err == nil:
			if cl.after == "" {
				t.Errorf("session %d: Conn() is empty after a successful call", cl.session)
			}
			if !cl.afterFailure && cl.before != cl.after {
				t.Errorf("session %d: Conn() was %q before a call on a healthy connection and %q after it", cl.session, cl.before, cl.after)
			}
		case cl.joined:
		case workloads.Classify(cl.err) == workloads.ClassUnknown:
			t.Errorf("session %d: unknown failure %v on Conn() %q, which no cut explains", cl.session, cl.err, cl.after)
		case cl.afterFailure && cutConns[cl.after]:
			// gocql can hand the next request the broken connection before its pool
			// drops it; the request fails without being sent, and is definite.
			followUps++
		default:
			t.Errorf("session %d: %v on Conn() %q, neither a cut nor after one", cl.session, cl.err, cl.after)
		}
	}
	t.Logf("%d cuts over %d calls; %d calls after a cut failed on the broken connection without being sent", len(events), len(calls), followUps)
}
