package results

import (
	"testing"
)

func TestBounds(t *testing.T) {
	for _, tc := range []struct {
		bound string
		v     float64
		holds bool
	}{
		{"> 0", 1, true}, {"> 0", 0, false}, {"== 0", 0, true}, {"==0", 0.5, false}, {"!= 3", 3, false},
		{"<= 2.5", 2.5, true}, {"< 2.5", 2.5, false}, {">= -1", -1, true}, {"> 0 and < 500", 499, true}, {"> 0 and < 500", 500, false},
	} {
		b, err := ParseBound(tc.bound)
		if err != nil {
			t.Fatalf("%q: %v", tc.bound, err)
		}
		if got := b.Holds(tc.v); got != tc.holds {
			t.Errorf("%q holds for %v: %v, want %v", tc.bound, tc.v, got, tc.holds)
		}
	}
	for _, bad := range []string{"", "0", "> x", "=> 1", "> 1 or < 2", "about 3"} {
		if _, err := ParseBound(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
