package rundir

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
	"github.com/indoubt/indoubt/internal/results"
	"github.com/indoubt/indoubt/internal/schedule"
)

// FaultLine is one line of faults.jsonl. Exactly one of its fields is set: the kind of
// the line.
type FaultLine struct {
	// Event is a commit fault the proxy fired, with its ground truth.
	Event *Event
	// Window is a fault of the schedule armed (start) or disarmed (stop).
	Window *Window
	// Process is a step of a process or node fault (kill, start, pause, continue, a
	// partition or link opened or closed, a role report): the history's nemesis event.
	Process *ProcessFault
	// Coordinator is the crash of a two-phase commit run's coordinator.
	Coordinator *CoordinatorFault
}

// Event is a commit fault's line: the proxy's event (toxics.Event) and its time on the
// history's clock. RunTime is nil in a file of `indoubt proxy --events`, which knows
// no run: its events carry their wall time only.
//
// A file read may come from another indoubt, or from elsewhere: a kind or a truth this
// build does not know is kept as its name (KindName, TruthName; Kind or Truth is then
// zero), shown as data, never refused.
type Event struct {
	toxics.Event
	RunTime *int64 `json:"run_time,omitempty"`

	// kind and truth are the names as read.
	kind, truth string
}

// KindName is the fault's kind as the line names it (commit-cut, commit-drop, ...).
func (e *Event) KindName() string {
	if e.kind != "" {
		return e.kind
	}
	return e.Kind.String()
}

// TruthName is the fault's ground truth as the line names it (applied, not-applied),
// "" when it names none.
func (e *Event) TruthName() string {
	if e.kind != "" {
		return e.truth
	}
	return e.Truth.String()
}

// UnmarshalJSON reads an event line, keeping the names of its kind and truth.
func (e *Event) UnmarshalJSON(b []byte) error {
	type plain Event
	aux := struct {
		*plain
		Kind  string `json:"kind"`
		Truth string `json:"truth"`
	}{plain: (*plain)(e)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	e.kind, e.truth = aux.Kind, aux.Truth
	if err := e.Event.Kind.UnmarshalText([]byte(aux.Kind)); err != nil {
		e.Event.Kind = 0
	}
	if err := e.Event.Truth.UnmarshalText([]byte(aux.Truth)); err != nil {
		e.Event.Truth = 0
	}
	if aux.Kind == "" {
		return errors.New("a fault event needs a kind")
	}
	return nil
}

// Window is a fault window's line: Window is "start" when the fault was armed, "stop"
// when its disarming began.
type Window struct {
	Window  string    `json:"window"`
	Fault   string    `json:"fault"`
	RunTime int64     `json:"run_time"`
	Time    time.Time `json:"time"`
	// Points is how many commit points the proxy had counted when the window opened:
	// where the numbers of the points after it begin (listed faults, indoubt shrink).
	// Nil on a stop, and in a run without a proxy.
	Points *uint64 `json:"points,omitempty"`
}

// ProcessFault is a process or node fault's step as the history's nemesis event holds
// it: the step (ProcessFault, the event's f) and its value.
type ProcessFault struct {
	ProcessFault string          `json:"process_fault"`
	Value        json.RawMessage `json:"value"`
	RunTime      int64           `json:"run_time"`
}

// CoordinatorFault is the crash of a two-phase commit coordinator: its fault's name
// and the schedule entry as written.
type CoordinatorFault struct {
	CoordinatorFault string    `json:"coordinator_fault"`
	Fault            string    `json:"fault"`
	RunTime          int64     `json:"run_time"`
	Time             time.Time `json:"time"`
}

// EventLine is the line of the proxy's event e, at run time at.
func EventLine(e toxics.Event, at int64) FaultLine {
	return FaultLine{Event: &Event{Event: e, RunTime: &at}}
}

// WindowLine is the line of a fault window w, at run time at; points is the proxy's
// count of commit points when it opened, nil when not known.
func WindowLine(w schedule.Window, at int64, points *uint64) FaultLine {
	f := "start"
	if !w.Open {
		f, points = "stop", nil
	}
	return FaultLine{Window: &Window{Window: f, Fault: w.Fault, RunTime: at, Time: w.Time, Points: points}}
}

// ProcessLine is the line of a process or node fault's nemesis event op.
func ProcessLine(op histories.Op) FaultLine {
	return FaultLine{Process: &ProcessFault{ProcessFault: op.F, Value: json.RawMessage(op.Value), RunTime: op.Time}}
}

// CoordinatorLine is the line of a coordinator's crash: its fault's name, the entry
// as written, and when (run time at, wall time t).
func CoordinatorLine(name, spec string, at int64, t time.Time) FaultLine {
	return FaultLine{Coordinator: &CoordinatorFault{CoordinatorFault: name, Fault: spec, RunTime: at, Time: t}}
}

// RunTime is the line's time on the history's clock; for an event without one (a file
// of `indoubt proxy --events`), 0.
func (l FaultLine) RunTime() int64 {
	switch {
	case l.Event != nil && l.Event.RunTime != nil:
		return *l.Event.RunTime
	case l.Window != nil:
		return l.Window.RunTime
	case l.Process != nil:
		return l.Process.RunTime
	case l.Coordinator != nil:
		return l.Coordinator.RunTime
	}
	return 0
}

// MarshalJSON writes the line's one kind.
func (l FaultLine) MarshalJSON() ([]byte, error) {
	switch {
	case l.Event != nil:
		return json.Marshal(l.Event)
	case l.Window != nil:
		return json.Marshal(l.Window)
	case l.Process != nil:
		if l.Process.Value == nil {
			p := *l.Process
			p.Value = json.RawMessage("null")
			return json.Marshal(p)
		}
		return json.Marshal(l.Process)
	case l.Coordinator != nil:
		return json.Marshal(l.Coordinator)
	}
	return nil, errors.New("rundir: a fault line of no kind")
}

// errNoKind is a JSON object of none of the kinds of line.
var errNoKind = errors.New("not a fault event, window, process fault or coordinator fault")

// UnmarshalJSON reads a line, its kind told by the key that only it has: window,
// process_fault, coordinator_fault or kind (an event).
func (l *FaultLine) UnmarshalJSON(b []byte) error {
	var probe struct {
		Window           *json.RawMessage `json:"window"`
		ProcessFault     *json.RawMessage `json:"process_fault"`
		CoordinatorFault *json.RawMessage `json:"coordinator_fault"`
		Kind             *json.RawMessage `json:"kind"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	*l = FaultLine{}
	switch {
	case probe.Window != nil:
		l.Window = &Window{}
		return json.Unmarshal(b, l.Window)
	case probe.ProcessFault != nil:
		l.Process = &ProcessFault{}
		return json.Unmarshal(b, l.Process)
	case probe.CoordinatorFault != nil:
		l.Coordinator = &CoordinatorFault{}
		return json.Unmarshal(b, l.Coordinator)
	case probe.Kind != nil:
		l.Event = &Event{}
		if err := json.Unmarshal(b, l.Event); err != nil {
			return err
		}
		if l.Event.Conn == "" || l.Event.Time.IsZero() && l.Event.RunTime == nil {
			return errors.New("a fault event needs conn and time")
		}
		return nil
	}
	return errNoKind
}

// FaultWriter writes faults.jsonl, one line at a time. Its first error is kept
// (sticky, as bufio's): Flush and Close return it, so that a file that could not be
// written whole is never taken for the run's ground truth. It is not safe for
// concurrent use.
type FaultWriter struct {
	w   *bufio.Writer
	f   *os.File // nil when it writes to an io.Writer
	err error
}

// NewFaultWriter writes lines to w.
func NewFaultWriter(w io.Writer) *FaultWriter { return &FaultWriter{w: bufio.NewWriter(w)} }

// CreateFaults creates (or truncates) the faults.jsonl file at path.
func CreateFaults(path string) (*FaultWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &FaultWriter{w: bufio.NewWriter(f), f: f}, nil
}

// Write appends one line; its error is also kept for Flush and Close.
func (w *FaultWriter) Write(l FaultLine) error {
	if w.err != nil {
		return w.err
	}
	b, err := json.Marshal(l)
	if err == nil {
		_, err = w.w.Write(append(b, '\n'))
	}
	if err != nil {
		w.err = err
	}
	return err
}

// Flush writes out what is buffered (and fsyncs a file) and returns the first error
// any write met.
func (w *FaultWriter) Flush() error {
	if err := w.w.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if w.f != nil {
		if err := w.f.Sync(); err != nil && w.err == nil {
			w.err = err
		}
	}
	return w.err
}

// Close flushes and closes the file; its error is the first any write met.
func (w *FaultWriter) Close() error {
	err := w.Flush()
	if w.f != nil {
		if cerr := w.f.Close(); err == nil {
			err = cerr
		}
		w.f = nil
	}
	return err
}

// MarshalFaults is the text of a faults.jsonl holding lines.
func MarshalFaults(lines []FaultLine) ([]byte, error) {
	var b bytes.Buffer
	w := NewFaultWriter(&b)
	for _, l := range lines {
		w.Write(l)
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// ReadFaults reads faults.jsonl from r (name is for errors). Blank lines are skipped,
// and so is a JSON object of no kind this reader knows (a line a later indoubt added);
// a line that is not a JSON object, or not a valid line of its kind, is an error naming
// the file and line, returned with the lines read before it.
func ReadFaults(r io.Reader, name string) ([]FaultLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), histories.MaxLine)
	var out []FaultLine
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var l FaultLine
		if err := json.Unmarshal(b, &l); err != nil {
			if errors.Is(err, errNoKind) {
				continue
			}
			return out, fmt.Errorf("%s line %d: not a fault line: %w", name, n, results.JSONError(err))
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// ReadFaultsFile reads the faults.jsonl at path; a missing file is a run without a
// nemesis (no lines, no error).
func ReadFaultsFile(path string) ([]FaultLine, error) {
	f, err := OpenRegular(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadFaults(f, path)
}
