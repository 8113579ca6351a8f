// Command histgen writes synthetic histories with the repository's own history writer.
//
// budget and counter (scripts/bench-check): lines of the size and shape a run writes
// (op_id, conn, attempt, values), from 16 workers, 1% failed and 1% unknown operations,
// 1% reads, and a budget that runs out half way. The history is linearizable: every
// operation takes effect at its completion.
//
// The shapes of the checker's bounds (scripts/bench-register, scripts/probe):
//   - register-seq: one process writing one register, one write after another, valid.
//   - register-info: -writers concurrent writes of distinct values that all end in
//     info, then one read after another of the written values, each once: valid, and
//     every subset and order of the writes is a candidate for a search that enumerates.
//   - exactly-once: one apply after another, then the final read that lists every op id
//     once, on one line: the longest line a run writes.
//   - txn: list-append transactions (Jepsen's :txn ops of appends and reads), 16
//     processes, for reading speed only (the values are not a consistent history).
//
// -format edn writes the same events as a Jepsen history.edn (histories.WriteJepsenEDN).
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"

	"github.com/indoubt/indoubt/histories"
)

func main() {
	workload := flag.String("workload", "budget", "budget, counter, register-seq, register-info, exactly-once or txn")
	events := flag.Int64("events", 1_000_000, "events to write (about two per operation)")
	writers := flag.Int("writers", 200, "register-info: concurrent writes")
	format := flag.String("format", "jsonl", "jsonl (indoubt's history) or edn (Jepsen's history.edn)")
	out := flag.String("out", "", "history file to create")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *out == "" || *format != "jsonl" && *format != "edn" {
		fmt.Fprintln(os.Stderr, "usage: histgen -workload budget|counter|register-seq|register-info|exactly-once|txn [-format jsonl|edn] -events N -out FILE")
		os.Exit(3)
	}
	var err error
	switch *workload {
	case "budget", "counter":
		if *format != "jsonl" {
			err = fmt.Errorf("-workload %s writes jsonl only", *workload)
			break
		}
		err = gen(*workload, *events, *out, *seed)
	case "register-seq", "register-info", "exactly-once", "txn":
		err = genShape(*workload, *format, *events, *writers, *out, *seed)
	default:
		err = fmt.Errorf("unknown -workload %q", *workload)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "histgen:", err)
		os.Exit(3)
	}
}

type open struct {
	process int
	opID    string
	conn    string
	f       string
}

func gen(workload string, events int64, path string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 14))
	budget := events / 4
	h := histories.Header{Workload: workload, Model: workload, Store: "synthetic", Seed: int64(seed)}
	if workload == "budget" {
		h.Params = map[string]json.RawMessage{"budget": histories.Value(budget)}
	} else {
		h.Params = map[string]json.RawMessage{"before": histories.Value(0)}
	}
	w, err := histories.Create(path, h)
	if err != nil {
		return err
	}
	const workers = 16
	slots := make([]*open, workers)
	procs := make([]int, workers)
	conns := make([]string, workers)
	seq := make([]int, workers)
	for i := range procs {
		procs[i] = i
		conns[i] = fmt.Sprintf("127.0.0.1:%d", 40000+i)
	}
	next := workers
	balance, counter := budget, int64(0)
	var t int64
	for n := int64(0); n < events; n++ {
		t += 1000 + rng.Int64N(20000)
		i := rng.IntN(workers)
		if o := slots[i]; o != nil {
			op := histories.Op{Time: t, Process: o.process, F: o.f, OpID: o.opID, Conn: o.conn, Attempt: 1}
			switch p := rng.IntN(100); {
			case p == 0:
				op.Type, op.Error = histories.Fail, "ERROR: could not serialize access (SQLSTATE 40001)"
			case p == 1:
				op.Type, op.Error, op.Attempt = histories.Info, "read tcp 127.0.0.1:40000->127.0.0.1:5432: i/o timeout", 2
				if o.f != "read" && rng.IntN(2) == 0 {
					balance, counter = max(balance-1, 0), counter+1
				}
				procs[i] = next
				next++
			default:
				op.Type = histories.OK
				switch {
				case workload == "budget" && o.f == "read":
					op.Value = histories.Value(map[string]int64{"balance": balance})
				case workload == "budget" && balance > 0:
					balance--
					op.Value = []byte(fmt.Sprintf(`{"applied":true,"balance":%d}`, balance))
				case workload == "budget":
					op.Value = []byte(`{"applied":false,"balance":0}`)
				case o.f == "read":
					op.Value = histories.Value(map[string]int64{"value": counter})
				default:
					counter++
					op.Value = []byte(fmt.Sprintf(`{"read":%d,"wrote":%d}`, counter-1, counter))
				}
			}
			if _, err := w.Write(op); err != nil {
				return err
			}
			slots[i] = nil
			continue
		}
		f := "decrement"
		if workload == "counter" {
			f = "increment"
		}
		if rng.IntN(100) == 0 {
			f = "read"
		}
		o := &open{process: procs[i], opID: fmt.Sprintf("%d-%d", i, seq[i]), conn: conns[i], f: f}
		seq[i]++
		if _, err := w.Write(histories.Op{Time: t, Process: o.process, Type: histories.Invoke, F: f, OpID: o.opID, Conn: o.conn}); err != nil {
			return err
		}
		slots[i] = o
	}
	return w.Close()
}

// genShape writes one of the shapes of the checker's bounds.
func genShape(workload, format string, events int64, writers int, path string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 15))
	var ops []histories.Op
	var t int64
	add := func(op histories.Op) {
		t += 1000 + rng.Int64N(1000)
		op.Index, op.Time = int64(len(ops)), t
		ops = append(ops, op)
	}
	h := histories.Header{Workload: workload, Model: workload, Store: "synthetic", Seed: int64(seed)}
	switch workload {
	case "register-seq":
		h.Workload, h.Model = "register", "register"
		for i := int64(0); 2*i < events; i++ {
			v := histories.Value(i)
			add(histories.Op{Process: 0, Type: histories.Invoke, F: "write", Value: v})
			add(histories.Op{Process: 0, Type: histories.OK, F: "write", Value: v})
		}
	case "register-info":
		h.Workload, h.Model = "register", "register"
		for w := range writers {
			add(histories.Op{Process: w, Type: histories.Invoke, F: "write", Value: histories.Value(w + 1)})
		}
		for w := range writers {
			add(histories.Op{Process: w, Type: histories.Info, F: "write", Error: "conn closed"})
		}
		for i, w := range rng.Perm(writers) {
			p := writers + i%4
			add(histories.Op{Process: p, Type: histories.Invoke, F: "read"})
			add(histories.Op{Process: p, Type: histories.OK, F: "read", Value: histories.Value(w + 1)})
		}
	case "exactly-once":
		final := map[string]int64{}
		for i := int64(0); 2*i+2 < events; i++ {
			id := fmt.Sprintf("%d-%d", i%16, i/16)
			add(histories.Op{Process: int(i % 16), Type: histories.Invoke, F: "apply", OpID: id, Conn: "127.0.0.1:40000"})
			add(histories.Op{Process: int(i % 16), Type: histories.OK, F: "apply", OpID: id, Conn: "127.0.0.1:40000"})
			final[id] = 1
		}
		add(histories.Op{Process: 16, Type: histories.Invoke, F: "read", OpID: histories.FinalReadID(0)})
		add(histories.Op{Process: 16, Type: histories.OK, F: "read", OpID: histories.FinalReadID(0), Value: histories.Value(final)})
	case "txn":
		h.Model = "list-append"
		const procs = 16
		next := make([]int64, 64)
		for i := int64(0); 2*i < events; i++ {
			p := int(i % procs)
			var inv, ok []byte
			inv, ok = append(inv, '[', '['), append(ok, '[', '[')
			for m := range 1 + rng.IntN(4) {
				if m > 0 {
					inv, ok = append(inv, "],["...), append(ok, "],["...)
				}
				k := rng.IntN(len(next))
				if rng.IntN(2) == 0 {
					next[k]++
					s := `"append",` + strconv.Itoa(k) + "," + strconv.FormatInt(next[k], 10)
					inv, ok = append(inv, s...), append(ok, s...)
					continue
				}
				inv = append(inv, `"r",`+strconv.Itoa(k)+",null"...)
				ok = append(ok, `"r",`+strconv.Itoa(k)+",["...)
				for v := max(1, next[k]-5); v <= next[k]; v++ {
					if v > max(1, next[k]-5) {
						ok = append(ok, ',')
					}
					ok = strconv.AppendInt(ok, v, 10)
				}
				ok = append(ok, ']')
			}
			inv, ok = append(inv, ']', ']'), append(ok, ']', ']')
			add(histories.Op{Process: p, Type: histories.Invoke, F: "txn", Value: inv})
			add(histories.Op{Process: p, Type: histories.OK, F: "txn", Value: ok})
		}
	}
	if format == "edn" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		if err := histories.WriteJepsenEDN(bw, ops); err != nil {
			f.Close()
			return err
		}
		if err := bw.Flush(); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	w, err := histories.Create(path, h)
	if err != nil {
		return err
	}
	for _, op := range ops {
		op.Index = 0
		if _, err := w.Write(op); err != nil {
			return err
		}
	}
	return w.Close()
}
