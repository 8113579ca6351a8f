package console

import (
	"fmt"
	"strings"
)

// The most of an explanation a terminal is shown: a cycle of 20,000 transactions
// explained one step a line printed 2.25 MB. The whole of it is in results.json (and
// indoubt check --json).
const (
	shownHead = 40   // lines from the start
	shownTail = 5    // lines from the end
	shownLine = 1000 // bytes of one line
)

// BoundedLines is Lines for a text that may be of any length: at most shownHead lines
// from its start and shownTail from its end, each cut at shownLine bytes, with a line
// between that says how many were left out and where they are.
func BoundedLines(s, indent, where string) Escaped {
	lines := strings.Split(s, "\n")
	if len(lines) > shownHead+shownTail+1 {
		left := len(lines) - shownHead - shownTail
		mid := fmt.Sprintf("... %d lines more (%s has them all)", left, where)
		lines = append(append(lines[:shownHead:shownHead], mid), lines[len(lines)-shownTail:]...)
	}
	for i, l := range lines {
		if len(l) > shownLine {
			lines[i] = l[:shownLine] + fmt.Sprintf("... (%d bytes more)", len(l)-shownLine)
		}
	}
	return Lines(strings.Join(lines, "\n"), indent)
}
