package histories

import "fmt"

// What every reader refuses of an event's numbers, whatever the format: a history
// whose order or processes cannot be trusted cannot be checked, and a number that no
// history holds is a damaged file, not a fact about the system under test.
//
//   - A process is a worker's number (0 or more) or the nemesis's. In indoubt's JSONL
//     the nemesis is -1 (Nemesis); in Jepsen's EDN it is :nemesis. Any other negative
//     number or name is refused: read as the nemesis, its operations would go
//     unchecked.
//   - An index is 0 or more, and increases from event to event.
//   - A completion is not earlier than its invocation: its time is at least the time of
//     the invocation its process has open.
//
// And of its operations, Jepsen's rules of a process (jepsen.history's pair index, and
// the interpreter that gives a crashed worker a new process):
//
//   - A process has at most one operation open: an invocation while its last one is
//     open is refused (jepsen.history's ::double-invoke), unless the reader was asked
//     to pair several in order (JepsenOptions.SeveralOpen): Elle's own unit tests
//     build such histories, and Elle's checkers, which never ask jepsen.history which
//     invocation a completion answers, read them with completions paired in order.
//   - A completion closes the operation its process has open; one with none open is
//     refused, except in a history of completions alone, as Elle's own tests write
//     them ({:process 0, :type :ok, :value [...]}, no invocation anywhere): then every
//     event is a completion, and an invocation after one is refused.
//   - A process whose operation ended in info never invokes again: its outcome is
//     unknown for the rest of the history, so the worker goes on under a new process.

// checkProcess refuses a process number that is neither a worker's nor Nemesis.
func checkProcess(p int64) error {
	if p < Nemesis {
		return fmt.Errorf("process %d: a process is a worker's number (0 or more) or %d for the nemesis", p, Nemesis)
	}
	return nil
}

// openTimes remembers, for each process with an operation open, the time and line of
// its invocation, so that a completion earlier than its invocation is refused at its
// line. Processes are small numbers that grow by one after each operation of unknown
// outcome; those below denseProcesses sit in a slice, the rest in a map, so that a
// hostile process number costs one entry, never a slice of its size.
type openTimes struct {
	dense  []openTime
	sparse map[int]openTime
	// invoked says the history has had an invocation; bare is the line of its first
	// completion without one (a history of completions alone), 0 for none.
	invoked bool
	bare    int64
	// several lets a process have several operations open, its completions closing
	// them oldest first; queued holds each such process's invocations after its
	// oldest open one.
	several bool
	queued  map[int][]openTime
}

// openTime is what is known of a process: its open invocation's time and line, or
// after an info completion, that completion's line (crashed).
type openTime struct {
	time, line    int64
	open, crashed bool
}

const denseProcesses = 1 << 16

// get returns what is known of process p, 0 or more.
func (o *openTimes) get(p int) openTime {
	if p < len(o.dense) {
		return o.dense[p]
	}
	return o.sparse[p]
}

// set records what is known of process p, 0 or more.
func (o *openTimes) set(p int, t openTime) {
	if p < denseProcesses {
		if p >= len(o.dense) {
			if t == (openTime{}) {
				return
			}
			o.dense = append(o.dense, make([]openTime, p+1-len(o.dense))...)
		}
		o.dense[p] = t
		return
	}
	if t == (openTime{}) {
		delete(o.sparse, p)
		return
	}
	if o.sparse == nil {
		o.sparse = map[int]openTime{}
	}
	o.sparse[p] = t
}

// invoke records an invocation of process p at time t on line line, and errs when
// process p may not invoke (see the rules above).
func (o *openTimes) invoke(p int, t, line int64) error {
	if p < 0 {
		return nil
	}
	prev := o.get(p)
	switch {
	case o.bare > 0:
		return fmt.Errorf("invocation of process %d in a history whose completion on line %d had none: a history pairs every completion with its invocation, or is of completions alone", p, o.bare)
	case prev.open && o.several:
		if o.queued == nil {
			o.queued = map[int][]openTime{}
		}
		o.queued[p] = append(o.queued[p], openTime{time: t, line: line, open: true})
		return nil
	case prev.open:
		return fmt.Errorf("process %d invokes while its operation invoked on line %d is open: a process runs one operation at a time", p, prev.line)
	case prev.crashed:
		return fmt.Errorf("process %d invokes after its operation ended in info on line %d: a process whose outcome is unknown never invokes again (its worker goes on as a new process)", p, prev.line)
	}
	o.invoked = true
	o.set(p, openTime{time: t, line: line, open: true})
	return nil
}

// complete closes process p's open invocation with a completion of type typ on line
// line at time t, and errs when it has none (in a history with invocations) or when
// the completion's time is before the invocation's.
func (o *openTimes) complete(p int, typ Type, t, line int64) error {
	if p < 0 {
		return nil
	}
	inv := o.get(p)
	if !inv.open {
		if o.invoked {
			return fmt.Errorf("%s completion of process %d without an open invocation: each completion follows its process's invocation", typ, p)
		}
		if o.bare == 0 {
			o.bare = line
		}
		return nil
	}
	if t < inv.time {
		return fmt.Errorf("completion of process %d at time %d is earlier than its invocation at time %d on line %d", p, t, inv.time, inv.line)
	}
	next := openTime{}
	if q := o.queued[p]; len(q) > 0 {
		next = q[0]
		if len(q) == 1 {
			delete(o.queued, p)
		} else {
			o.queued[p] = q[1:]
		}
	} else if typ == Info {
		next = openTime{line: line, crashed: true}
	}
	o.set(p, next)
	return nil
}
