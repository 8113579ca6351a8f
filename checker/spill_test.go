package checker

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAckTimes: the times read back count and rank as the sorted times do, written out
// to the file every few or kept in memory.
func TestAckTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 1))
	for _, chunk := range []int{8, 1 << 20} {
		counterSmallSlots(t, counterWindow, counterReach, chunk)
		for range 200 {
			var a ackTimes
			var sorted []int64
			var x int64 = rng.Int64N(1000) - 500
			for range rng.IntN(300) {
				switch rng.IntN(20) {
				case 0:
					x = []int64{math.MinInt64, math.MaxInt64, 0, -1}[rng.IntN(4)]
				case 1:
					x -= rng.Int64N(1 << 40)
				default:
					x += rng.Int64N(50)
				}
				a.add(x)
				sorted = append(sorted, x)
			}
			slices.Sort(sorted)
			for range 10 {
				if len(sorted) == 0 {
					break
				}
				at := sorted[0] // an edge, or a time among them
				if rng.IntN(4) > 0 {
					at = sorted[rng.IntN(len(sorted))] + rng.Int64N(3) - 1
				}
				i, _ := slices.BinarySearch(sorted, at)
				n, err := a.countBefore(at)
				if err != nil || n != int64(i) {
					t.Fatalf("before %d: %d, %v; want %d", at, n, err, i)
				}
				if i == 0 {
					continue
				}
				j := rng.IntN(i)
				got, err := a.nthBefore(at, int64(j))
				if err != nil || got != sorted[j] {
					t.Fatalf("the %d-th before %d: %d, %v; want %d", j, at, got, err, sorted[j])
				}
			}
			a.close()
		}
	}
}
