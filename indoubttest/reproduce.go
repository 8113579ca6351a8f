package indoubttest

import (
	"fmt"
	"strings"

	"github.com/indoubt/indoubt/faults/toxics"
)

// listedFaults is what a failed check adds after its re-run command, so that the failure
// can be made again without the seed's decisions: the commit faults it met written as
// listed faults (faults' commit-cut@commit:N), which the test's Arm takes in place of its
// probabilities to fire at exactly those commit points on every run, as long as the
// test's code sends the same commits in the same order. Empty when no commit fault
// fired.
func listedFaults(events []toxics.Event) string {
	var listed []string
	seen := map[uint64]bool{}
	for _, e := range events {
		if e.Point == 0 || seen[e.Point] {
			continue
		}
		seen[e.Point] = true
		listed = append(listed, fmt.Sprintf("%q", toxics.Pin{Kind: e.Kind, Point: e.Point}.String()))
	}
	if len(listed) == 0 {
		return ""
	}
	return fmt.Sprintf("the faults it met, listed (Arm them in place of the test's own to fire exactly these): srv.Arm(%s)", strings.Join(listed, ", "))
}
