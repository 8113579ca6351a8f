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
}

type openTime struct {
	time, line int64
	open       bool
}

const denseProcesses = 1 << 16

// invoke records an invocation of process p at time t on line line.
func (o *openTimes) invoke(p int, t, line int64) {
	if p < 0 {
		return
	}
	if p < denseProcesses {
		if p >= len(o.dense) {
			o.dense = append(o.dense, make([]openTime, p+1-len(o.dense))...)
		}
		o.dense[p] = openTime{t, line, true}
		return
	}
	if o.sparse == nil {
		o.sparse = map[int]openTime{}
	}
	o.sparse[p] = openTime{t, line, true}
}

// complete closes process p's open invocation, and errs when the completion's time t
// is before the invocation's. A completion without an open invocation is the
// checker's to refuse (histories.Pairer): it says nothing about time.
func (o *openTimes) complete(p int, t int64) error {
	var inv openTime
	switch {
	case p < 0:
		return nil
	case p < len(o.dense):
		inv = o.dense[p]
		o.dense[p].open = false
	case p >= denseProcesses:
		inv = o.sparse[p]
		delete(o.sparse, p)
	}
	if inv.open && t < inv.time {
		return fmt.Errorf("completion of process %d at time %d is earlier than its invocation at time %d on line %d", p, t, inv.time, inv.line)
	}
	return nil
}
