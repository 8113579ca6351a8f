package shrink

import (
	"fmt"
	"strings"
)

// ddmin is Zeller and Hildebrandt's minimizing delta debugging over the indices 0..n-1
// of a failing run's faults: it returns a subset, in order, that still fails and from
// which no single chunk of the last granularity tried can be removed (1-minimal when the
// search ran to the end: removing any one fault makes it pass).
//
// fails tests a subset; it reports whether the subset fails, and stop when the search
// must end now (the time budget is spent, the command interrupted): ddmin then returns
// the smallest failing subset it has found. The whole set is known to fail and is never
// tested. A subset is tested once: the search is over a fixed set, and a retest of a
// flaky failure would only spend runs.
//
// The search splits the current set into n chunks (n = 2 at first) and tries each chunk
// alone, then (for n > 2) each complement: a failing chunk becomes the set (n back to
// 2), a failing complement too (n one less); when neither fails, n doubles, until the
// chunks are single faults.
func ddmin(n int, fails func(subset []int) (failed, stop bool)) []int {
	c := make([]int, n)
	for i := range c {
		c[i] = i
	}
	tried := map[string]bool{}
	test := func(s []int) (bool, bool) {
		k := key(s)
		if tried[k] {
			return false, false
		}
		tried[k] = true
		return fails(s)
	}
	parts := 2
	for len(c) >= 2 {
		chunks := split(c, parts)
		next := []int(nil)
		for _, ch := range chunks {
			failed, stop := test(ch)
			if failed {
				next, parts = ch, 2
				break
			}
			if stop {
				return c
			}
		}
		if next == nil && parts > 2 {
			for i := range chunks {
				comp := complement(chunks, i)
				failed, stop := test(comp)
				if failed {
					next, parts = comp, max(parts-1, 2)
					break
				}
				if stop {
					return c
				}
			}
		}
		if next != nil {
			c = next
			continue
		}
		if parts >= len(c) {
			break
		}
		parts = min(2*parts, len(c))
	}
	return c
}

// split cuts s into n chunks of sizes that differ by at most one, in order.
func split(s []int, n int) [][]int {
	out := make([][]int, 0, n)
	for i := 0; i < n; i++ {
		lo, hi := i*len(s)/n, (i+1)*len(s)/n
		if hi > lo {
			out = append(out, s[lo:hi])
		}
	}
	return out
}

// complement is every chunk but the i-th, in order.
func complement(chunks [][]int, i int) []int {
	var out []int
	for j, ch := range chunks {
		if j != i {
			out = append(out, ch...)
		}
	}
	return out
}

func key(s []int) string {
	var b strings.Builder
	for _, v := range s {
		fmt.Fprintf(&b, "%d,", v)
	}
	return b.String()
}
