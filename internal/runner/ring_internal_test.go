package runner

import (
	"math"
	"strconv"
	"testing"
)

// The tokens of a ring cut the Murmur3 range in equal arcs, the first at its start.
func TestRingTokens(t *testing.T) {
	want := []string{"-9223372036854775808", "-3074457345618258603", "3074457345618258602"}
	for i, w := range want {
		if got := ringToken(i, 3); got != w {
			t.Errorf("token %d of 3: %s, want %s", i, got, w)
		}
	}
	if got := ringToken(0, 1); got != strconv.FormatInt(math.MinInt64, 10) {
		t.Errorf("token of a ring of one: %s", got)
	}
}
