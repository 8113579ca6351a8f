package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
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
		inv := o.Invoke
		if c := o.Complete; c != nil && len(c.Failed) > 0 {
			for _, a := range c.Failed {
				out = append(out, Span{OpID: inv.OpID, Process: inv.Process, Invoke: inv.Index, Conn: a.Conn, From: a.Start, To: a.End, Class: classOf(a.Class), Err: a.Error})
			}
			continue
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
				second := s
				second.Conn = c.Conn
				extra = append(extra, second)
			}
		}
		switch {
		case s.OpID == "":
		case s.Conn != "":
			out = append(out, s)
		default:
			connless = append(connless, s)
		}
	}
	return append(out, extra...), connless
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

// eventLine is one line of a faults file: a toxics.Event as indoubt proxy --events
// writes it, with run_time when indoubt run wrote it. Lines of fault windows ("window")
// carry no kind and are skipped.
type eventLine struct {
	Time    time.Time `json:"time"`
	RunTime *int64    `json:"run_time"`
	Conn    string    `json:"conn"`
	Kind    string    `json:"kind"`
	Truth   string    `json:"truth"`
	Stmt    string    `json:"statement"`
	Tag     string    `json:"tag"`
	Txn     *struct {
		Seq     uint64   `json:"seq"`
		Wrote   bool     `json:"wrote"`
		Tags    []string `json:"tags"`
		Changed *bool    `json:"changed"`
	} `json:"txn"`
}

// ReadEvents reads the proxy's fault events from r (JSON lines, as `indoubt proxy
// --events` and a run's faults.jsonl hold them; name is for errors). When every event
// carries run_time the clock is RunClock and Time is run_time; otherwise it is
// WallClock and Time is the event's wall time in Unix nanoseconds. A line that is not a
// JSON object is an error naming the file and line.
func ReadEvents(r io.Reader, name string) ([]FaultEvent, Clock, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), histories.MaxLine)
	var evs []FaultEvent
	run := true
	var lines []eventLine
	n := 0
	for sc.Scan() {
		n++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l eventLine
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, 0, fmt.Errorf("%s line %d: not a fault event: %v", name, n, results.JSONError(err))
		}
		if l.Kind == "" {
			continue
		}
		if l.Conn == "" || l.Time.IsZero() && l.RunTime == nil {
			return nil, 0, fmt.Errorf("%s line %d: a fault event needs conn and time", name, n)
		}
		run = run && l.RunTime != nil
		lines = append(lines, l)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", name, err)
	}
	clock := WallClock
	if run && len(lines) > 0 {
		clock = RunClock
	}
	for _, l := range lines {
		t := l.Time.UnixNano()
		if clock == RunClock {
			t = *l.RunTime
		}
		e := FaultEvent{Time: t, Conn: l.Conn, Kind: l.Kind, Truth: l.Truth, What: l.Stmt, Tag: l.Tag}
		if l.Txn != nil {
			w := l.Txn.Wrote
			e.Wrote, e.TxnSeq = &w, l.Txn.Seq
			e.Tags, e.Changed = l.Txn.Tags, l.Txn.Changed
		}
		evs = append(evs, e)
	}
	return evs, clock, nil
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
