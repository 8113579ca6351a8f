package report

import "math"

// maxBins bounds the bins of the charts over time. A history's times are data: one
// that spans 1e9 seconds (times of 1e17 to 1e18 ns) made a bin per second, 5.4 GB of
// them; past maxBins the bins widen instead.
const maxBins = 10_000

// widerBin returns bin, or for a run of end seconds that would need more than maxBins
// bins of it, the smallest bin of 1, 2 or 5 times a power of ten that needs at most
// maxBins.
func widerBin(bin, end float64) float64 {
	if !(end/bin > maxBins) || math.IsInf(end, 0) {
		return bin
	}
	want := end / maxBins
	p := math.Pow(10, math.Floor(math.Log10(want)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= want {
			return m * p
		}
	}
	return 10 * p
}
