package checker

import (
	"encoding/json"
	"fmt"

	"github.com/indoubt/indoubt/histories"
)

// maxAnomalies bounds the anomalies an exact checker's Result lists; its
// Details["anomalies"] counts all it found.
const maxAnomalies = 100

// findings collects what an exact check finds wrong: every anomaly is counted in found,
// the first maxAnomalies are kept, so that a history wrong everywhere costs no more
// memory than one wrong once.
type findings struct {
	anomalies []Anomaly
	found     int
}

// add counts a and keeps it while there is room.
func (f *findings) add(a Anomaly) {
	f.found++
	if len(f.anomalies) < maxAnomalies {
		f.anomalies = append(f.anomalies, a)
	}
}

// anomaly is add for an anomaly of kind over the history indices ops, explained by why.
func (f *findings) anomaly(kind string, ops []int64, why string) {
	f.add(Anomaly{Kind: kind, Ops: ops, Explanation: why})
}

// firstOf is the summary of an invalid Result: the explanation of the anomaly listed
// first, and how many more were found.
func firstOf(first Anomaly, found int) string {
	if found > 1 {
		return first.Explanation + fmt.Sprintf(" (and %d more anomalies)", found-1)
	}
	return first.Explanation
}

// encodeDetails encodes a Result's Details, each figure as its JSON value.
func encodeDetails(d map[string]any) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(d))
	for k, v := range d {
		out[k] = histories.Value(v)
	}
	return out
}

// opRef is what an exact checker keeps to name one operation to a person: its op id,
// process and the history indices of its invocation and completion.
type opRef struct {
	opID     string
	process  int
	invIndex int64
	retIndex int64 // -1 when never completed
}

// invoked is the reference of the operation op invokes, not yet completed.
func invoked(op histories.Op) opRef {
	return opRef{opID: op.OpID, process: op.Process, invIndex: op.Index, retIndex: -1}
}

// events returns the history indices of the operation's events.
func (r *opRef) events() []int64 {
	if r.retIndex < 0 {
		return []int64{r.invIndex}
	}
	return []int64{r.invIndex, r.retIndex}
}

// nameAs names the operation, whose function is f, as a person would look it up: by
// op id when it has one, else by process and index.
func (r *opRef) nameAs(f string) string {
	if r.opID != "" {
		return f + " " + r.opID
	}
	return fmt.Sprintf("%s of process %d (index %d)", f, r.process, r.invIndex)
}
