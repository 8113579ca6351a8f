package checker

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// counterSmallSlots makes the slots freeze after a few, and write every few records out
// to a file, so that small histories go through every path a long one takes.
func counterSmallSlots(t testing.TB, window int, reach int64, chunk int) {
	t.Helper()
	w, r, c, d := counterWindow, counterReach, spillChunk, spillDir
	counterWindow, counterReach, spillChunk, spillDir = window, reach, chunk, t.TempDir()
	t.Cleanup(func() { counterWindow, counterReach, spillChunk, spillDir = w, r, c, d })
}

// counterPlant breaks a history in the ways that reach slots the streaming checker has
// already written out or not yet reached: a late increment that writes a value written
// long before, a late read of an old value, a value far ahead, values at the edges of
// int64, many increments writing one value, an operation that never completes.
func counterPlant(rng *rand.Rand, ops []histories.Op, before int64) []histories.Op {
	out := append([]histories.Op(nil), ops...)
	var oks []int
	for i, op := range out {
		if op.Type == histories.OK {
			oks = append(oks, i)
		}
	}
	if len(oks) < 2 {
		return out
	}
	late := oks[len(oks)/2+rng.IntN(len(oks)-len(oks)/2)]
	early := oks[rng.IntN(len(oks)/2+1)]
	switch rng.IntN(9) {
	case 0: // a late increment or read repeats an early value
		out[late].Value = out[early].Value
		if out[late].F == "read" && out[early].F == "increment" {
			w := counterWrote(out[early])
			out[late].Value = histories.Value(map[string]int64{"value": w})
		}
		if out[late].F == "increment" && out[early].F == "read" {
			out[late].Value = histories.Value(map[string]int64{"wrote": counterWrote(out[early]) + 1})
		}
	case 1: // far ahead
		d := []int64{100, 1 << 20, 1 << 40}[rng.IntN(3)]
		out[early] = counterSetValue(out[early], before+d)
	case 2: // the edges of int64
		out[early] = counterSetValue(out[early], []int64{math.MaxInt64, math.MinInt64, before, before - 1}[rng.IntN(4)])
	case 3: // many increments write one value
		v := out[early]
		n := 0
		for _, i := range oks {
			if out[i].F == "increment" && i != early && n < 30 && rng.IntN(3) == 0 {
				out[i] = counterSetValue(out[i], counterWrote(v))
				n++
			}
		}
	case 4: // an early operation never completes: its process's later events are another's
		p, fresh := out[early].Process, 0
		for _, op := range out {
			fresh = max(fresh, op.Process+1)
		}
		for j := early + 1; j < len(out); j++ {
			if out[j].Process == p {
				out[j].Process = fresh
			}
		}
		out = slices.Delete(out, early, early+1)
	case 5: // an unknown increment, late, that could fill an early hole
		out[late].Type, out[late].Value = histories.Info, nil
		if out[late].F == "read" {
			out[late].Type = histories.Fail
		}
	case 6: // a late increment claims an early hole: writes a value nobody wrote
		out[late] = counterSetValue(out[late], before+1+rng.Int64N(int64(len(oks)/2+1)))
	case 7: // nemesis events in between
		var with []histories.Op
		for i, op := range out {
			if rng.IntN(20) == 0 {
				with = append(with, histories.Op{Index: int64(i), Process: histories.Nemesis, Type: histories.Info, F: "kill"})
			}
			with = append(with, op)
		}
		out = with
	default: // a read or write off by a little, anywhere
		out[late] = counterSetValue(out[late], counterWrote(out[late])+int64(rng.IntN(5))-2)
	}
	for i := range out {
		out[i].Index = int64(i)
	}
	return out
}

// counterWrote is what an ok increment wrote or an ok read returned.
func counterWrote(op histories.Op) int64 {
	v, err := counterParseValue(op.Value)
	if err != nil {
		panic(err)
	}
	if op.F == "read" {
		return v.value
	}
	return v.wrote
}

// counterSetValue makes an ok operation write or return v.
func counterSetValue(op histories.Op, v int64) histories.Op {
	if op.F == "read" {
		op.Value = histories.Value(map[string]int64{"value": v})
	} else {
		op.Value = histories.Value(map[string]int64{"wrote": v})
	}
	return op
}

// counterNamed gives some operations op ids, so that both ways of naming one are
// written out and read back.
func counterNamed(rng *rand.Rand, ops []histories.Op) {
	open := map[int]string{}
	for i := range ops {
		op := &ops[i]
		if op.Type == histories.Invoke {
			open[op.Process] = ""
			if rng.IntN(2) == 0 {
				open[op.Process] = fmt.Sprintf("%d-%d", op.Process, i)
			}
		}
		op.OpID = open[op.Process]
	}
}

// TestCounterStreamEqualsReference holds the streaming checker to the whole-history one
// it replaced (counter_reference_test.go), verdict, figures, anomalies and
// explanations alike, on random histories broken where the streaming checker keeps
// least: with a window of a few slots written out every few records, and as it runs.
func TestCounterStreamEqualsReference(t *testing.T) {
	sizes := []struct {
		window int
		reach  int64
		chunk  int
	}{{2, 8, 16}, {5, 40, 64}, {1 << 13, 1 << 16, 1 << 20}}
	rng := rand.New(rand.NewPCG(31, 3))
	for _, sz := range sizes {
		t.Run(fmt.Sprintf("window %d", sz.window), func(t *testing.T) {
			counterSmallSlots(t, sz.window, sz.reach, sz.chunk)
			verdicts := map[Verdict]int{}
			for i := range 3000 {
				before := []int64{0, 5, -3, math.MaxInt64 - 50, math.MinInt64}[rng.IntN(5)]
				ops := counterSimulate(rng, 2+rng.IntN(6), 1+rng.IntN(40), before,
					[]float64{0, 0.2, 0.4}[rng.IntN(3)], []float64{0, 0.15, 0.3}[rng.IntN(3)], []float64{0, 0.1}[rng.IntN(2)])
				if i%3 > 0 {
					for range 1 + rng.IntN(3) {
						if rng.IntN(2) == 0 {
							ops = counterMutate(rng, ops)
						} else {
							ops = counterPlant(rng, ops, before)
						}
					}
				}
				counterNamed(rng, ops)
				want, werr := counterReference(ops, before)
				got, gerr := CheckCounter(context.Background(), ops, before)
				if errString(werr) != errString(gerr) || !reflect.DeepEqual(got, want) {
					t.Fatalf("history %d: streaming %v\n%+v\nwhole %v\n%+v\n%s", i, gerr, got, werr, want, counterDump(ops, before))
				}
				verdicts[want.Verdict]++
			}
			if verdicts[Invalid] < 500 || verdicts[Valid] < 500 {
				t.Errorf("too one-sided: %v", verdicts)
			}
		})
	}
}

// counterLongHistory is a long simulated run with anomalies planted through it.
func counterLongHistory(seed uint64, ops, planted int) ([]histories.Op, int64) {
	rng := rand.New(rand.NewPCG(seed, 9))
	const before = 1000
	// Some processes hang for good after an unknown increment: a few operations each,
	// and many processes, keep most of them working to the end.
	procs := max(48, ops/1000)
	h := counterSimulate(rng, procs, ops/procs, before, 0.05, 0.002, 0.01)
	for range planted {
		if rng.IntN(2) == 0 {
			h = counterMutate(rng, h)
		} else {
			h = counterPlant(rng, h, before)
		}
	}
	counterNamed(rng, h)
	return h, before
}

// TestCounterLongHistoryEqualsReference: on long histories, whose slots the streaming
// checker writes out to its file, the verdict, figures and explanations are the
// whole-history checker's, with and without anomalies planted.
func TestCounterLongHistoryEqualsReference(t *testing.T) {
	counterSmallSlots(t, 1<<10, 1<<12, 1<<12)
	for _, planted := range []int{0, 3, 40} {
		ops, before := counterLongHistory(uint64(planted), 200_000, planted)
		want, werr := counterReference(ops, before)
		got, gerr := CheckCounter(context.Background(), ops, before)
		if werr != nil || gerr != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%d planted: streaming %v %+v\nwhole %v %+v", planted, gerr, got, werr, want)
		}
		if planted == 0 && want.Verdict != Valid || planted > 0 && want.Verdict != Invalid {
			t.Fatalf("%d planted: %s: %s", planted, want.Verdict, want.Summary)
		}
		stream, serr := CheckStream(context.Background(), nil, sliceNext(ops), Options{Model: "counter", Initial: &before})
		if serr != nil || stream.Verdict != want.Verdict || stream.Summary != want.Summary {
			t.Fatalf("%d planted: CheckStream %v %s: %s, CheckCounter %s: %s", planted, serr, stream.Verdict, stream.Summary, want.Verdict, want.Summary)
		}
	}
}

// TestCounterSpillCorrupt: records that do not read back are an error, not a panic.
func TestCounterSpillCorrupt(t *testing.T) {
	counterSmallSlots(t, 2, 8, 1<<20)
	ops, before := counterLongHistory(1, 2000, 0)
	c := newCounterChecker(before)
	defer c.close()
	for _, op := range ops {
		if err := c.add(op); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.slots.log.buf) == 0 {
		t.Fatal("nothing kept in memory to corrupt")
	}
	for i := range c.slots.log.buf {
		c.slots.log.buf[i] = 0xff
	}
	if _, err := c.result(); err == nil {
		t.Fatal("corrupt records read back without an error")
	}
}

// BenchmarkCounterStream checks a simulated history of about a million events as it
// is read, as `indoubt check` does.
func BenchmarkCounterStream(b *testing.B) {
	ops, before := counterLongHistory(5, 500_000, 0)
	opt := Options{Model: "counter", Initial: &before}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r, err := CheckStream(context.Background(), nil, sliceNext(ops), opt)
		if err != nil || r.Verdict != Valid {
			b.Fatalf("%v %s: %s", err, r.Verdict, r.Summary)
		}
	}
	b.ReportMetric(float64(len(ops))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestCounterSpillWithoutFile: when the file cannot be created the records stay in
// memory, and the check is the same.
func TestCounterSpillWithoutFile(t *testing.T) {
	counterSmallSlots(t, 4, 16, 64)
	spillDir = t.TempDir() + "/missing"
	ops, before := counterLongHistory(2, 20_000, 5)
	want, werr := counterReference(ops, before)
	got, gerr := CheckCounter(context.Background(), ops, before)
	if werr != nil || gerr != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("streaming %v %+v\nwhole %v %+v", gerr, got, werr, want)
	}
}
