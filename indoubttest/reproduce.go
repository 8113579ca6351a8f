package indoubttest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
)

// reproduction is what a failed Check adds to its message so the failure can be made
// again: the go test command that re-runs the test alone, and the commit faults it met
// written as listed faults (faults' commit-cut@commit:N), which the test's Arm takes in
// place of its probabilities to fire at exactly those commit points on every run. The
// seed of the decisions comes from the test's name, so the re-run alone makes the same
// decisions when the test's code sends the same messages in the same order; the listed
// faults do not depend on it.
func reproduction(tb testing.TB, events []toxics.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nre-run (from the module's root): go test -run '%s' -count=1 %s", runPattern(tb.Name()), packagePath())
	var listed []string
	seen := map[uint64]bool{}
	for _, e := range events {
		if e.Point == 0 || seen[e.Point] {
			continue
		}
		seen[e.Point] = true
		listed = append(listed, fmt.Sprintf("%q", toxics.Pin{Kind: e.Kind, Point: e.Point}.String()))
	}
	if len(listed) > 0 {
		fmt.Fprintf(&b, "\nthe faults it met, listed (Arm them in place of the test's own to fire exactly these): srv.Arm(%s)", strings.Join(listed, ", "))
	}
	return b.String()
}

// runPattern is the -run pattern that selects exactly the test named name: each level
// of a subtest anchored on its own.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.ReplaceAll(strings.Join(parts, "/"), "'", `'\''`)
}

// packagePath is the test's package as go test names it from the module's root
// ("./examples/payments"), or "." when no go.mod is above the working directory (a
// test runs in its package's directory).
func packagePath() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "."
		}
		dir = up
	}
}
