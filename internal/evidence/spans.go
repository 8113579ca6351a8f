package evidence

import (
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/rundir"
	"github.com/indoubt/indoubt/workloads"
)

// Span is one attempt of an operation on one connection, over a stretch of the
// history's clock, so that fault events join the operation whose connection they cut.
type Span struct {
	OpID     string
	Process  int
	Invoke   int64 // history index of the invocation
	Conn     string
	From, To int64 // the history's clock (monotonic ns since the run started, for the runner)
	Class    workloads.Class
	// Err is the error the attempt saw; empty when the history does not say (an
	// operation that a retry completed ok).
	Err string
}

// SpansFromHistory makes the spans of a history, for joining events to it. Where a
// completion lists the attempts that ended in an error (failed_attempts, as indoubt's
// runs and its test helper record them) each is a span of its own, with its connection,
// times, error and class. A history recorded without them (by a program other than
// indoubt) gets one span per operation that has an op id and a connection, from its
// invocation's time to its completion's (to the end of time when it never completed),
// on the connection its invocation names and, when its completion names another, on
// that one too (a retry on a fresh connection). The class is then what the completion
// says: info or none is unknown, fail is definite, ok is unknown (an attempt before the
// one that succeeded may have failed any way; the history does not say).
//
// Attempts between the first and the last of an operation used connections the history
// does not name. An event on a connection that no operation names joins the operation
// whose span holds its time when exactly one does (one worker, or a moment when only
// one operation was running); when several do, it joins none, since time alone cannot
// tell which. An operation recorded without any connection takes part in that join
// too, so a sequential client that names no connection is joined by time alone;
// Unjoined says why the events that joined nothing did not.
func SpansFromHistory(ops []histories.Op, events []FaultEvent) []Span {
	spans, connless := opSpans(ops)
	named := map[string]bool{}
	for _, s := range spans {
		named[s.Conn] = true
	}
	// Operations recorded with no connection at all take part in the join by time
	// alone: a sequential client that never names its connection is still joined.
	candidates := append(slices.Clip(spans), connless...)
	for _, e := range events {
		if named[e.Conn] {
			continue
		}
		var hit Span
		ids := map[string]bool{}
		for _, s := range candidates {
			if s.From <= e.Time && e.Time <= s.To && !ids[s.OpID] {
				ids[s.OpID] = true
				hit = s
			}
		}
		if len(ids) == 1 {
			hit.Conn, hit.From, hit.To = e.Conn, e.Time, e.Time
			spans = append(spans, hit)
		}
	}
	return spans
}

// opSpans makes the spans of a history's operations: one per attempt that ended in an
// error where the completion lists them (failed_attempts: indoubt's own histories),
// else one per operation and connection the history names. A history that does not
// pair (histories.Pair refuses it) has no spans: its check has already refused it.
// connless are the spans of operations that name no connection, for the join by time.
func opSpans(ops []histories.Op) (spans, connless []Span) {
	all, err := histories.Pair(ops)
	if err != nil {
		return nil, nil
	}
	var out, extra []Span
	for _, o := range all {
		attempts, second := SpansOf(o)
		for _, s := range attempts {
			switch {
			case s.OpID == "":
			case s.Conn != "":
				out = append(out, s)
			default:
				connless = append(connless, s)
			}
		}
		extra = append(extra, second...)
	}
	return append(out, extra...), connless
}

// SpansOf makes the spans of one operation, by the rule SpansFromHistory describes:
// one per failed attempt its completion lists, else one from its invocation to its
// completion on the connection its invocation names (Conn "" when it names none; an
// operation without an op id is never joined), and second, a span on the completion's
// connection when that is another one. A reader that streams a history (the report)
// joins events by the same rule as the evidence.
func SpansOf(o histories.Operation) (spans, second []Span) {
	inv := o.Invoke
	if c := o.Complete; c != nil && len(c.Failed) > 0 {
		for _, a := range c.Failed {
			spans = append(spans, Span{OpID: inv.OpID, Process: inv.Process, Invoke: inv.Index, Conn: a.Conn, From: a.Start, To: a.End, Class: classOf(a.Class), Err: a.Error})
		}
		return spans, nil
	}
	s := Span{OpID: inv.OpID, Process: inv.Process, Invoke: inv.Index, Conn: inv.Conn, From: inv.Time, To: o.End(), Class: workloads.ClassUnknown}
	if c := o.Complete; c != nil {
		s.Err = c.Error
		if c.Type == histories.Fail {
			s.Class = workloads.ClassDefinite
		}
		if s.Conn == "" {
			s.Conn = c.Conn
		} else if c.Conn != "" && c.Conn != s.Conn {
			other := s
			other.Conn = c.Conn
			second = append(second, other)
		}
	}
	return []Span{s}, second
}

// Attempts holds spans by connection, in time order, to find the attempt a fault
// event hit.
type Attempts map[string][]Span

// NewAttempts indexes spans by connection.
func NewAttempts(spans []Span) Attempts {
	byConn := Attempts{}
	for _, s := range spans {
		byConn[s.Conn] = append(byConn[s.Conn], s)
	}
	for _, ss := range byConn {
		sort.Slice(ss, func(i, j int) bool { return ss[i].From < ss[j].From })
	}
	return byConn
}

// Hit returns the attempt e hit: the first, in time order, on e's connection whose span
// holds e's time. The proxy acts before the client sees the error: the event falls
// inside the attempt that saw it. This is the one rule that joins a fault event to an
// operation.
func (a Attempts) Hit(e FaultEvent) (*Span, bool) {
	for i, s := range a[e.Conn] {
		if s.From <= e.Time && e.Time <= s.To {
			return &a[e.Conn][i], true
		}
	}
	return nil, false
}

// classOf reads a failed attempt's class; what it does not name is unknown, as the
// error contract has it when in doubt.
func classOf(name string) workloads.Class {
	switch name {
	case "definite":
		return workloads.ClassDefinite
	case "conflict":
		return workloads.ClassConflict
	}
	return workloads.ClassUnknown
}

// Clock says which time of a fault event lines up with a history's times.
type Clock uint8

const (
	// RunClock: every event carries run_time, nanoseconds since the run started, as
	// indoubt run writes faults.jsonl beside a history on the same clock.
	RunClock Clock = 1 + iota
	// WallClock: the events carry only their wall time (indoubt proxy --events), and
	// the history's times must be Unix nanoseconds (date +%s%N, Python's
	// time.time_ns(), Go's time.Now().UnixNano()).
	WallClock
)

// ReadEvents reads the proxy's fault events from r (faults.jsonl lines, as `indoubt
// proxy --events` and a run's faults.jsonl hold them, read by rundir.ReadFaults; name is
// for errors). Lines of other kinds (fault windows, process faults) are skipped. When
// every event carries run_time the clock is RunClock and Time is run_time; otherwise it
// is WallClock and Time is the event's wall time in Unix nanoseconds. A line that is
// not a JSON object, or an event without conn or time, is an error naming the file and
// line.
func ReadEvents(r io.Reader, name string) ([]FaultEvent, Clock, error) {
	lines, err := rundir.ReadFaults(r, name)
	if err != nil {
		return nil, 0, err
	}
	evs, clock := EventsOf(lines)
	return evs, clock, nil
}

// EventOfLine is the event of a faults.jsonl line at time at on the history's clock, its
// kind and truth as the line names them (a kind this build does not know included).
func EventOfLine(e *rundir.Event, at int64) FaultEvent {
	fe := EventOf(e.Event, at)
	fe.Kind, fe.Truth = e.KindName(), e.TruthName()
	return fe
}

// EventsOf returns the commit-fault events of a faults file's lines, on their clock
// (see ReadEvents).
func EventsOf(lines []rundir.FaultLine) ([]FaultEvent, Clock) {
	var evs []*rundir.Event
	run := true
	for _, l := range lines {
		e := l.Event
		if e == nil {
			continue
		}
		run = run && e.RunTime != nil
		evs = append(evs, e)
	}
	clock := WallClock
	if run && len(evs) > 0 {
		clock = RunClock
	}
	out := make([]FaultEvent, 0, len(evs))
	for _, e := range evs {
		t := e.Time.UnixNano()
		if clock == RunClock {
			t = *e.RunTime
		}
		out = append(out, EventOfLine(e, t))
	}
	return out, clock
}

// unixNanos2001 is 2001-09-09 in Unix nanoseconds: a history time below it is not a
// wall-clock time but a time since some start.
const unixNanos2001 = 1_000_000_000 * 1_000_000_000

// CheckClock says why the history's times cannot be joined with events on clock c, or
// nil when they can: wall-clock events need Unix-nanosecond history times.
func CheckClock(ops []histories.Op, c Clock) error {
	if c != WallClock {
		return nil
	}
	for _, op := range ops {
		if op.IsClient() && op.Time < unixNanos2001 {
			return fmt.Errorf("history index %d: time %d is not Unix nanoseconds, and the fault events carry wall-clock times only: record time as Unix nanoseconds (date +%%s%%N, time.time_ns()) to join them", op.Index, op.Time)
		}
	}
	return nil
}
