package histories

import (
	"strconv"
	"strings"
)

// The final reads are the reads a recorder makes after its workers stopped, to learn
// the state the operations left: indoubt run, indoubt exec, the test helper
// (indoubttest) and `indoubt check --final` record them as operations of a process of
// their own, with op ids FinalReadID(0), FinalReadID(1), ... A checker counts them apart
// from the workers' operations: they begin when the workers have stopped.
//
// This is the one rule for a final read's op id; every reader and writer of histories
// in this module calls it.

// finalReadPrefix starts every final read's op id but the bare "final".
const finalReadPrefix = "final-"

// FinalReadID returns the op id of the i-th final read (from 0): "final-0", "final-1".
func FinalReadID(i int) string { return finalReadPrefix + strconv.Itoa(i) }

// IsFinalReadID reports whether an op id names a final read: "final", as a history
// written before FinalReadID may name its one final read, or "final-" followed by
// anything ("final-0", "final-1", ...).
func IsFinalReadID(id string) bool {
	return id == "final" || strings.HasPrefix(id, finalReadPrefix)
}

// IsFinalRead reports whether the event belongs to a final read: a client event whose
// op id IsFinalReadID.
func (o Op) IsFinalRead() bool { return o.IsClient() && IsFinalReadID(o.OpID) }
