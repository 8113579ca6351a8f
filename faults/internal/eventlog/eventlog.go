// Package eventlog collects a proxy's fault events for the tests of package faults and
// of its end-to-end suites (faults/cqltest), which live in other packages and so cannot
// share test files.
package eventlog

import (
	"sync"

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
