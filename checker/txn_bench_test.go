package checker

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// genTxnHistory simulates a strictly serializable database under workers clients:
// each transaction of 1 to 4 micro-ops (half reads) over keys active keys, a key
// retired after 32 writes, applied whole at its completion; 1% fail, 1% end unknown
// (applied or not). stale of them instead read the state of their invocation, which
// plants G-single, G2-item and lost-update anomalies. The shape of scripts/txngen's.
func genTxnHistory(model string, txns, workers, keys int, stale float64, seed uint64) []histories.Op {
	rng := rand.New(rand.NewPCG(seed, 3))
	type mop struct {
		f byte
		k int64
		v int64
	}
	type txn struct {
		proc int
		mops []mop
		snap map[int64]int
	}
	lists := map[int64][]int64{}
	regs := map[int64]int64{}
	next := map[int64]int64{}
	pool := make([]int64, keys)
	writes := make([]int, keys)
	for i := range pool {
		pool[i] = int64(i)
	}
	fresh := int64(keys)
	busy := make([]*txn, workers)
	procs := make([]int, workers)
	for i := range procs {
		procs[i] = i
	}
	nextProc := workers
	var ops []histories.Op
	emit := func(p int, t histories.Type, v []byte) {
		ops = append(ops, histories.Op{Index: int64(len(ops)), Time: int64(len(ops)), Process: p, Type: t, F: TxnFunction, Value: v})
	}
	encode := func(t *txn, results map[int][]byte) []byte {
		b := []byte{'['}
		for i, m := range t.mops {
			if i > 0 {
				b = append(b, ',')
			}
			switch m.f {
			case 'a':
				b = append(b, `["append",`...)
			case 'w':
				b = append(b, `["w",`...)
			default:
				b = append(b, `["r",`...)
			}
			b = strconv.AppendInt(b, m.k, 10)
			b = append(b, ',')
			switch {
			case m.f != 'r':
				b = strconv.AppendInt(b, m.v, 10)
			case results == nil:
				b = append(b, "null"...)
			default:
				b = append(b, results[i]...)
			}
			b = append(b, ']')
		}
		return append(b, ']')
	}
	started, done := 0, 0
	for done < txns {
		i := rng.IntN(workers)
		t := busy[i]
		if t == nil {
			if started == txns {
				continue
			}
			started++
			t = &txn{proc: procs[i]}
			for n := 1 + rng.IntN(4); n > 0; n-- {
				slot := rng.IntN(keys)
				k := pool[slot]
				if rng.IntN(2) == 0 {
					t.mops = append(t.mops, mop{f: 'r', k: k})
					continue
				}
				next[k]++
				f := byte('a')
				if model == RWRegisterModel {
					f = 'w'
				}
				t.mops = append(t.mops, mop{f: f, k: k, v: next[k]})
				if writes[slot]++; writes[slot] == 32 {
					pool[slot], writes[slot] = fresh, 0
					fresh++
				}
			}
			if rng.Float64() < stale {
				t.snap = map[int64]int{}
				for _, m := range t.mops {
					if model == ListAppendModel {
						t.snap[m.k] = len(lists[m.k])
					} else if v, ok := regs[m.k]; ok {
						t.snap[m.k] = int(v)
					} else {
						t.snap[m.k] = -1
					}
				}
			}
			busy[i] = t
			emit(t.proc, histories.Invoke, encode(t, nil))
			continue
		}
		busy[i] = nil
		done++
		apply := func() map[int][]byte {
			res := map[int][]byte{}
			own := map[int64]int{}
			for j, m := range t.mops {
				switch {
				case m.f == 'a':
					lists[m.k] = append(lists[m.k], m.v)
					own[m.k]++
				case m.f == 'w':
					regs[m.k] = m.v
					own[m.k]++
				case model == ListAppendModel:
					n := len(lists[m.k])
					if s, ok := t.snap[m.k]; ok && own[m.k] == 0 {
						n = s
					}
					res[j], _ = json.Marshal(lists[m.k][:n])
				default:
					v, ok := regs[m.k]
					if s, stale := t.snap[m.k]; stale && own[m.k] == 0 {
						v, ok = int64(s), s >= 0
					}
					if ok {
						res[j] = strconv.AppendInt(nil, v, 10)
					} else {
						res[j] = []byte("null")
					}
				}
			}
			return res
		}
		switch p := rng.IntN(100); {
		case p == 0:
			emit(t.proc, histories.Fail, nil)
		case p == 1:
			if rng.IntN(2) == 0 {
				apply()
			}
			emit(t.proc, histories.Info, nil)
			procs[i] = nextProc
			nextProc++
		default:
			emit(t.proc, histories.OK, encode(t, apply()))
		}
	}
	return ops
}

// BenchmarkCheckListAppend checks a valid list-append history of 100,000 transactions
// from 16 clients for strict serializability, from events already in memory (the
// end-to-end figure from a file is scripts/bench-txn's).
func BenchmarkCheckListAppend(b *testing.B) {
	benchTxn(b, ListAppendModel, 0)
}

// BenchmarkCheckListAppendAnomalies is BenchmarkCheckListAppend with 1% of the
// transactions reading a stale snapshot, each a planted anomaly to find and explain.
func BenchmarkCheckListAppendAnomalies(b *testing.B) {
	benchTxn(b, ListAppendModel, 0.01)
}

// BenchmarkCheckRWRegister is BenchmarkCheckListAppend for registers.
func BenchmarkCheckRWRegister(b *testing.B) {
	benchTxn(b, RWRegisterModel, 0)
}

func benchTxn(b *testing.B, model string, stale float64) {
	const txns = 100_000
	ops := genTxnHistory(model, txns, 16, 16, stale, 1)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	var r Result
	for i := 0; i < b.N; i++ {
		var err error
		if r, err = checkTxn(context.Background(), model, ops, TxnOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := cpuTime() - cpu0
	if want := Valid; stale == 0 && r.Verdict != want || stale > 0 && r.Verdict != Invalid {
		b.Fatalf("verdict %s: %s", r.Verdict, r.Summary)
	}
	b.ReportMetric(float64(txns)*float64(b.N)/b.Elapsed().Seconds(), "txns/s")
	// The machine is shared: CPU time (every thread of the process, the collector's
	// included) is the steadier figure.
	b.ReportMetric(float64(txns)*float64(b.N)/cpu.Seconds(), "txns/cpu-s")
}

// cpuTime returns the user and system time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
