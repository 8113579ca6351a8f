// Package faultstest holds what the tests of package faults and of its end-to-end suites
// (faults/cqle2e) share: they live in different packages, so cannot share test files.
package faultstest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
)

// Log collects fault events in the order they are told; Add, as a proxy's
// Options.Events, is safe for the proxy's goroutines.
type Log struct {
	mu  sync.Mutex
	evs []toxics.Event
}

// Add records one event.
func (l *Log) Add(ev toxics.Event) {
	l.mu.Lock()
	l.evs = append(l.evs, ev)
	l.mu.Unlock()
}

// All returns a copy of the events recorded so far.
func (l *Log) All() []toxics.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]toxics.Event(nil), l.evs...)
}

// CutConnections runs conns clients, 8 at a time: client i runs dial(i), which opens a
// connection through a proxy that cuts it and returns the connection's local address.
// It fails the test at a client's error and returns the clients by local address.
func CutConnections(t *testing.T, conns int, dial func(i int) (local string, err error)) map[string]int {
	t.Helper()
	const workers = 8
	var mu sync.Mutex
	lost := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	next := make(chan int, conns)
	for i := 0; i < conns; i++ {
		next <- i
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				local, err := dial(i)
				if err != nil {
					errs <- fmt.Errorf("connection %d: %w", i, err)
					return
				}
				mu.Lock()
				lost[local] = i
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return lost
}

// CountCuts checks that evs, the events of conns connections run by CutConnections
// under mixed faults, are one a connection, each naming a client in lost, and about
// half cuts. It returns the number of cuts, the faults the server applied.
func CountCuts(t *testing.T, evs []toxics.Event, lost map[string]int, conns int) int {
	t.Helper()
	if len(evs) != conns {
		t.Errorf("%d events for %d faulted connections", len(evs), conns)
	}
	applied := 0
	for _, e := range evs {
		if _, ok := lost[e.Conn]; !ok {
			t.Fatalf("event %+v names no client that lost its connection", e)
		}
		if e.Truth == toxics.Applied {
			applied++
		}
	}
	if applied < conns/3 || applied > 2*conns/3 {
		t.Errorf("%d of %d mixed faults were cuts, want about half", applied, conns)
	}
	return applied
}
