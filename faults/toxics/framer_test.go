package toxics

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// testSize reads a 5-byte header: a type ('M' matters, anything else does not, 'X'
// does not parse) and a big-endian length of the whole message.
func testSize(h []byte) (int, bool, bool) {
	return int(binary.BigEndian.Uint32(h[1:])), h[0] == 'M', h[0] != 'X'
}

func testMsg(typ byte, n int) []byte {
	b := append([]byte{typ}, binary.BigEndian.AppendUint32(nil, uint32(n))...)
	return append(b, bytes.Repeat([]byte{typ}, n-5)...)
}

// runLengthFramer feeds chunks to a lengthFramer as the toxics do and returns its units
// as "kind:bytes", pieces of one streamed message summed.
func runLengthFramer(chunks [][]byte) []string {
	var f lengthFramer
	var out []string
	var buf []byte
	streamed := 0
	for _, c := range chunks {
		buf = append(buf, c...)
		for len(buf) > 0 {
			k, n, ok := f.next(buf, 5, testSize)
			if !ok {
				break
			}
			switch k {
			case unitWhole:
				out = append(out, fmt.Sprintf("whole:%d", n))
			case unitOpaque:
				out = append(out, fmt.Sprintf("opaque:%d", n))
			default:
				streamed += n
				if f.skip == 0 {
					out = append(out, fmt.Sprintf("streamed:%d", streamed))
					streamed = 0
				}
			}
			buf = buf[n:]
		}
	}
	return out
}

// TestLengthFramerRule: the one rule for long messages, the same whatever the chunking.
func TestLengthFramerRule(t *testing.T) {
	tests := []struct {
		name   string
		stream []byte
		want   []string
	}{
		{"short messages are whole", append(testMsg('M', 10), testMsg('d', 5)...), []string{"whole:10", "whole:5"}},
		{"at streamAbove a message that does not matter is still whole", testMsg('d', streamAbove), []string{fmt.Sprintf("whole:%d", streamAbove)}},
		{"past streamAbove it streams", append(testMsg('d', streamAbove+1), testMsg('M', 6)...), []string{fmt.Sprintf("streamed:%d", streamAbove+1), "whole:6"}},
		{"a message that matters is whole past streamAbove", testMsg('M', 3*streamAbove), []string{fmt.Sprintf("whole:%d", 3*streamAbove)}},
		{"a length shorter than the header goes opaque", append([]byte{'M', 0, 0, 0, 4}, testMsg('M', 6)...), []string{"opaque:11"}},
		{"a header that does not parse goes opaque for good", append(testMsg('M', 6), append([]byte{'X', 0, 0, 0, 6, 0}, testMsg('M', 6)...)...), []string{"whole:6", "opaque:12"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := runLengthFramer([][]byte{tt.stream}); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("whole stream: %v, want %v", got, tt.want)
			}
			rng := rand.New(rand.NewPCG(5, 6))
			for i := 0; i < 30; i++ {
				max := []int{1, 2, 7, 100, 4096, 32 << 10}[i%6]
				// Opaque bytes come in as many units as chunks: compare their sum.
				if got := mergeOpaque(runLengthFramer(chunk(rng, tt.stream, max))); !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("chunks up to %d bytes: %v, want %v", max, got, tt.want)
				}
			}
		})
	}
	if !streams(maxWhole+1, true) || streams(maxWhole, true) {
		t.Errorf("a message that matters must stream past maxWhole, and only past it")
	}
}

func mergeOpaque(us []string) []string {
	var out []string
	total := 0
	for _, u := range us {
		var n int
		if _, err := fmt.Sscanf(u, "opaque:%d", &n); err == nil {
			total += n
			continue
		}
		out = append(out, u)
	}
	if total > 0 {
		out = append(out, fmt.Sprintf("opaque:%d", total))
	}
	return out
}

// FuzzLengthFramer: any bytes frame the same whole and in chunks, and the units cover a
// prefix of the input.
func FuzzLengthFramer(f *testing.F) {
	f.Add(append(testMsg('M', 10), testMsg('d', 7)...), uint64(1))
	f.Add(append([]byte{'d', 0, 1, 0, 1}, bytes.Repeat([]byte{1}, 300)...), uint64(2))
	f.Add([]byte{'X', 0, 0, 0, 5}, uint64(3))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		whole := runLengthFramer([][]byte{data})
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		chunked := runLengthFramer(chunk(rng, data, 1+int(seed%(32<<10))))
		if !reflect.DeepEqual(mergeOpaque(whole), mergeOpaque(chunked)) {
			t.Fatalf("whole %v, chunked %v", whole, chunked)
		}
		n := 0
		for _, u := range mergeOpaque(whole) {
			var k int
			_, v, _ := strings.Cut(u, ":")
			fmt.Sscan(v, &k)
			n += k
		}
		if n > len(data) {
			t.Fatalf("units cover %d bytes of %d", n, len(data))
		}
	})
}
