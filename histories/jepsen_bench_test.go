package histories

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

// jepsenBenchEDN returns n events of a Jepsen history in EDN, as Jepsen writes them:
// register reads, writes and cas (shape "register"), or list-append transactions of one
// to four micro-ops (shape "txn", what Elle reads).
func jepsenBenchEDN(shape string, n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.WriteString("[")
	lists := make([]int, 32)
	for i := 0; i < n; i += 2 {
		p := r.IntN(16)
		var inv, ok string
		f := "txn"
		switch shape {
		case "register":
			switch r.IntN(3) {
			case 0:
				f, inv, ok = "read", "nil", fmt.Sprint(r.IntN(5))
			case 1:
				f = "write"
				inv = fmt.Sprint(r.IntN(5))
				ok = inv
			default:
				f = "cas"
				inv = fmt.Sprintf("[%d %d]", r.IntN(5), r.IntN(5))
				ok = inv
			}
		default:
			var iv, ov strings.Builder
			iv.WriteByte('[')
			ov.WriteByte('[')
			for m := range 1 + r.IntN(4) {
				if m > 0 {
					iv.WriteByte(' ')
					ov.WriteByte(' ')
				}
				k := r.IntN(len(lists))
				if r.IntN(2) == 0 {
					lists[k]++
					fmt.Fprintf(&iv, "[:append %d %d]", k, lists[k])
					fmt.Fprintf(&ov, "[:append %d %d]", k, lists[k])
					continue
				}
				fmt.Fprintf(&iv, "[:r %d nil]", k)
				fmt.Fprintf(&ov, "[:r %d [", k)
				for v := max(1, lists[k]-4); v <= lists[k]; v++ {
					if v > max(1, lists[k]-4) {
						ov.WriteByte(' ')
					}
					fmt.Fprint(&ov, v)
				}
				ov.WriteString("]]")
			}
			iv.WriteByte(']')
			ov.WriteByte(']')
			inv, ok = iv.String(), ov.String()
		}
		t := int64(i) * 1000
		fmt.Fprintf(&b, "{:type :invoke, :f :%s, :value %s, :time %d, :process %d, :index %d}\n", f, inv, t, p, i)
		fmt.Fprintf(&b, " {:type :ok, :f :%s, :value %s, :time %d, :process %d, :index %d}\n", f, ok, t+500, p, i+1)
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// BenchmarkReadJepsenEDN reads EDN histories of 100,000 events and reports events per
// second and bytes per second.
func BenchmarkReadJepsenEDN(b *testing.B) {
	for _, shape := range []string{"register", "txn"} {
		src := jepsenBenchEDN(shape, 100_000)
		b.Run(shape, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				ops, err := ReadJepsenEDN(io.NopCloser(bytes.NewReader(src)), "bench.edn", JepsenOptions{})
				if err != nil || len(ops) != 100_000 {
					b.Fatalf("%d ops, %v", len(ops), err)
				}
			}
			b.ReportMetric(float64(b.N)*100_000/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkJepsenEDNReader reads the same histories one op at a time, as the checkers
// that stream do, keeping none.
func BenchmarkJepsenEDNReader(b *testing.B) {
	for _, shape := range []string{"register", "txn"} {
		src := jepsenBenchEDN(shape, 100_000)
		b.Run(shape, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				r := NewJepsenEDNReader(bytes.NewReader(src), "bench.edn", JepsenOptions{})
				n := 0
				for {
					_, err := r.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != 100_000 {
					b.Fatalf("%d ops", n)
				}
			}
			b.ReportMetric(float64(b.N)*100_000/b.Elapsed().Seconds(), "events/s")
		})
	}
}
