// Command histgen writes a synthetic budget or counter history with the repository's own
// history writer, for scripts/bench-check: lines of the size and shape a run writes
// (op_id, conn, attempt, values), from 16 workers, 1% failed and 1% unknown operations,
// 1% reads, and a budget that runs out half way. The history is linearizable: every
// operation takes effect at its completion.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/indoubt/indoubt/histories"
)

func main() {
	workload := flag.String("workload", "budget", "budget or counter")
	events := flag.Int64("events", 1_000_000, "events to write (about two per operation)")
	out := flag.String("out", "", "history file to create")
	seed := flag.Uint64("seed", 1, "random seed")
	flag.Parse()
	if *out == "" || *workload != "budget" && *workload != "counter" {
		fmt.Fprintln(os.Stderr, "usage: histgen -workload budget|counter -events N -out FILE")
		os.Exit(3)
	}
	if err := gen(*workload, *events, *out, *seed); err != nil {
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
