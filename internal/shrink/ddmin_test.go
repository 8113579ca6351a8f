package shrink

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestDDMinFindsTheCause: a failure caused by one fault, by a pair, or by any of
// several, among up to 64 faults. ddmin returns a failing subset that is 1-minimal
// (removing any one of its faults makes it pass), and for a single cause, that cause.
func TestDDMinFindsTheCause(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.IntN(64)
		a, b := rng.IntN(n), rng.IntN(n)
		var name string
		var fails func(s []int) bool
		switch trial % 3 {
		case 0:
			name = fmt.Sprintf("fault %d of %d", a, n)
			fails = func(s []int) bool { return slices.Contains(s, a) }
		case 1:
			name = fmt.Sprintf("faults %d and %d of %d", a, b, n)
			fails = func(s []int) bool { return slices.Contains(s, a) && slices.Contains(s, b) }
		default:
			name = fmt.Sprintf("any 3 of %d", n)
			fails = func(s []int) bool { return len(s) >= min(3, n) }
		}
		tests := 0
		got := ddmin(n, func(s []int) (bool, bool) {
			tests++
			return fails(s), false
		})
		if !fails(got) {
			t.Fatalf("%s: ddmin returned %v, which passes", name, got)
		}
		if !slices.IsSorted(got) {
			t.Errorf("%s: %v is not in the faults' order", name, got)
		}
		for i := range got {
			less := slices.Delete(slices.Clone(got), i, i+1)
			if len(got) > 1 && fails(less) {
				t.Errorf("%s: %v is not 1-minimal: %v fails too", name, got, less)
			}
		}
		if trial%3 == 0 && !slices.Equal(got, []int{a}) {
			t.Errorf("%s: got %v", name, got)
		}
		if trial%3 == 0 && n > 1 && tests > 4*bitLen(n)+2 {
			t.Errorf("%s: %d tests for a single cause, want O(log n)", name, tests)
		}
	}
}

// TestDDMinStops: a search told to stop returns the smallest failing subset so far.
func TestDDMinStops(t *testing.T) {
	tests := 0
	got := ddmin(32, func(s []int) (bool, bool) {
		tests++
		if tests == 3 {
			return false, true
		}
		return slices.Contains(s, 5), false
	})
	// The first test kept 0..15, the second 0..7; the third stopped the search.
	if !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) || tests != 3 {
		t.Fatalf("got %v after %d tests", got, tests)
	}
}

func bitLen(n int) int {
	b := 0
	for ; n > 0; n >>= 1 {
		b++
	}
	return b
}

// TestBisectFindsASmallValue: for a failure that needs the value to be at least t, the
// search ends within an eighth above t, in a number of tries that grows with the
// logarithm of the logarithm of a wide range.
func TestBisectFindsASmallValue(t *testing.T) {
	s := &shrinker{ctx: context.Background(), deadline: time.Now().Add(time.Hour)}
	for _, tt := range []struct{ cur, lo, gran, threshold int64 }{
		{1000000000, 1, 1, 2000}, {16, 1, 1, 2}, {16, 1, 1, 1}, {16, 1, 1, 16}, {100, 1, 1, 37},
		{int64(4 * time.Second), int64(200 * time.Millisecond), int64(10 * time.Millisecond), int64(1230 * time.Millisecond)},
	} {
		cur, tries := tt.cur, 0
		s.bisect(tt.cur, tt.lo, tt.gran, func(v int64) bool {
			tries++
			if v < tt.lo || v >= cur || (v-tt.lo)%tt.gran != 0 {
				t.Fatalf("%+v: tried %d, outside [lo, %d) or off the grain", tt, v, cur)
			}
			if v >= tt.threshold {
				cur = v
				return true
			}
			return false
		})
		if cur < tt.threshold || cur > max(tt.threshold+tt.threshold/7+tt.gran, tt.lo) && cur != tt.cur {
			t.Errorf("%+v: ended at %d", tt, cur)
		}
		t.Logf("%+v: ended at %d after %d tries", tt, cur, tries)
		if tries > 20 {
			t.Errorf("%+v: %d tries", tt, tries)
		}
	}
}
