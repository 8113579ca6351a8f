// Package choice checks and lists the values of a typed name (a coordinator mode, a
// key shape, a store's mechanism), so that every refusal of an unknown value reads the
// same way: `unknown placement "x" (want local or distributed)`.
package choice

import (
	"fmt"
	"slices"
	"strings"
)

// Parse returns v if it is one of known, and otherwise an error that names what v is
// meant to be and lists known: `unknown coordinator "x" (want logged or naive)`.
func Parse[N ~string](what string, v N, known ...N) (N, error) {
	if slices.Contains(known, v) {
		return v, nil
	}
	return "", fmt.Errorf("unknown %s %q (want %s)", what, string(v), Or(known))
}

// List lists names as "a, b, c".
func List[N ~string](names []N) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// Or lists names as "a, b or c": "a or b" for two, "a" for one.
func Or[N ~string](names []N) string {
	if len(names) < 2 {
		return List(names)
	}
	return List(names[:len(names)-1]) + " or " + string(names[len(names)-1])
}
