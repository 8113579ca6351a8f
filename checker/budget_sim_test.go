package checker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/indoubt/indoubt/histories"
)

// budgetSimConfig shapes a simulated budget run.
type budgetSimConfig struct {
	procs  int   // concurrent workers
	ops    int   // operations the workers invoke (the final read not counted)
	budget int64 // initial balance
	readP  float64
	infoP  float64 // chance an operation ends info (before or after it took effect)
	failP  float64
	hangP  float64 // chance an operation still open at the end never completes
	final  bool    // end with a read after every worker stopped
}

// Values shared by every event that carries them, so that big histories stay small.
var (
	budgetSimApplied  = histories.Value(map[string]any{"applied": true, "balance": -1})
	budgetSimRejected = histories.Value(map[string]any{"applied": false, "balance": 0})
)

type budgetSimWorker struct {
	proc    int
	state   int // 0 idle, 1 invoked, 2 took effect
	read    bool
	applied bool
	balance int64
	seq     int
}

// budgetSimulate runs workers against a real sequential account, each operation taking
// effect at one random moment between its invocation and its completion (or, for one
// that ends info, possibly later or never), and returns the history it records: a
// linearizable history by construction.
func budgetSimulate(rng *rand.Rand, cfg budgetSimConfig) []histories.Op {
	var (
		out      []histories.Op
		balance  = cfg.budget
		nextProc = cfg.procs
		zombies  int // decrements that ended info and may still take effect
		issued   int
	)
	emit := func(op histories.Op) {
		op.Index = int64(len(out))
		op.Time = int64(len(out)) * 1000
		out = append(out, op)
	}
	ws := make([]budgetSimWorker, cfg.procs)
	for i := range ws {
		ws[i].proc = i
	}
	takeEffect := func(w *budgetSimWorker) {
		w.state = 2
		if w.read {
			w.balance = balance
			return
		}
		w.applied = balance > 0
		if w.applied {
			balance--
			w.balance = balance
		}
	}
	opID := func(w *budgetSimWorker) string { return fmt.Sprintf("%d-%d", w.proc, w.seq) }
	for {
		busy := 0
		for i := range ws {
			if ws[i].state != 0 {
				busy++
			}
		}
		if issued >= cfg.ops && busy == 0 {
			break
		}
		if zombies > 0 && rng.IntN(6) == 0 {
			zombies--
			if rng.IntN(2) == 0 && balance > 0 {
				balance--
			}
			continue
		}
		w := &ws[rng.IntN(len(ws))]
		f := "decrement"
		if w.read {
			f = "read"
		}
		switch w.state {
		case 0:
			if issued >= cfg.ops {
				continue
			}
			issued++
			w.seq++
			w.read = rng.Float64() < cfg.readP
			f = "decrement"
			if w.read {
				f = "read"
			}
			w.state = 1
			emit(histories.Op{Process: w.proc, Type: histories.Invoke, F: f, OpID: opID(w)})
		case 1:
			if issued >= cfg.ops && rng.Float64() < cfg.hangP {
				// Never completes: it may have taken effect or not.
				if !w.read && rng.IntN(2) == 0 && balance > 0 {
					balance--
				}
				w.state = 0
				w.proc = nextProc
				nextProc++
				continue
			}
			switch r := rng.Float64(); {
			case r < cfg.failP:
				emit(histories.Op{Process: w.proc, Type: histories.Fail, F: f, OpID: opID(w), Error: "definite"})
				w.state = 0
			case r < cfg.failP+cfg.infoP:
				emit(histories.Op{Process: w.proc, Type: histories.Info, F: f, OpID: opID(w), Error: "conn closed"})
				if !w.read && rng.IntN(2) == 0 {
					zombies++
				}
				w.state = 0
				w.proc = nextProc
				nextProc++
			default:
				takeEffect(w)
			}
		case 2:
			if rng.Float64() < cfg.infoP {
				emit(histories.Op{Process: w.proc, Type: histories.Info, F: f, OpID: opID(w), Error: "conn closed"})
				w.proc = nextProc
				nextProc++
			} else {
				var v json.RawMessage
				switch {
				case w.read:
					v = histories.Value(map[string]int64{"balance": w.balance})
				case !w.applied:
					v = budgetSimRejected
				case rng.IntN(2) == 0:
					v = budgetSimApplied
				default:
					v = histories.Value(map[string]any{"applied": true, "balance": w.balance})
				}
				emit(histories.Op{Process: w.proc, Type: histories.OK, F: f, OpID: opID(w), Value: v})
			}
			w.state = 0
		}
	}
	for ; zombies > 0; zombies-- {
		if rng.IntN(2) == 0 && balance > 0 {
			balance--
		}
	}
	if cfg.final {
		emit(histories.Op{Process: nextProc, Type: histories.Invoke, F: "read", OpID: "final"})
		emit(histories.Op{Process: nextProc, Type: histories.OK, F: "read", OpID: "final", Value: histories.Value(map[string]int64{"balance": balance})})
	}
	return out
}

// budgetMutate breaks a history in one of the ways a store or a client could: an
// outcome flipped, a failed or unknown decrement acknowledged, a read off by a little,
// an operation that never happened inserted. The result is still a well-formed history;
// whether it is still linearizable is for the checkers to say.
func budgetMutate(rng *rand.Rand, ops []histories.Op, budget int64) ([]histories.Op, int64) {
	ops = append([]histories.Op(nil), ops...)
	pick := func(match func(histories.Op) bool) int {
		var idx []int
		for i, op := range ops {
			if match(op) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return -1
		}
		return idx[rng.IntN(len(idx))]
	}
	proc := 0
	for _, op := range ops {
		proc = max(proc, op.Process+1)
	}
	insert := func(f string, v json.RawMessage) {
		proc++
		i := rng.IntN(len(ops) + 1)
		j := i + rng.IntN(len(ops)-i+1)
		inv := histories.Op{Process: proc, Type: histories.Invoke, F: f, OpID: "extra"}
		comp := histories.Op{Process: proc, Type: histories.OK, F: f, OpID: "extra", Value: v}
		ops = append(ops[:j], append([]histories.Op{comp}, ops[j:]...)...)
		ops = append(ops[:i], append([]histories.Op{inv}, ops[i:]...)...)
	}
	switch rng.IntN(9) {
	case 0:
		if i := pick(func(op histories.Op) bool { return op.F == "decrement" && op.Type == histories.OK }); i >= 0 {
			o, _ := budgetParseOutcome(ops[i].Value)
			if o.applied {
				ops[i].Value = budgetSimRejected
			} else {
				ops[i].Value = budgetSimApplied
			}
		}
	case 1:
		if i := pick(func(op histories.Op) bool {
			return op.F == "decrement" && op.Type != histories.Invoke && op.Type != histories.OK
		}); i >= 0 {
			ops[i].Type = histories.OK
			ops[i].Value = budgetSimApplied
			if rng.IntN(2) == 0 {
				ops[i].Value = budgetSimRejected
			}
		}
	case 2, 3:
		if i := pick(func(op histories.Op) bool { return op.F == "read" && op.Type == histories.OK }); i >= 0 {
			var r struct{ Balance int64 }
			json.Unmarshal(ops[i].Value, &r)
			d := int64(rng.IntN(2) + 1)
			if rng.IntN(2) == 0 {
				d = -d
			}
			ops[i].Value = histories.Value(map[string]int64{"balance": r.Balance + d})
		}
	case 4:
		insert("decrement", budgetSimApplied)
	case 5:
		insert("decrement", budgetSimRejected)
	case 6:
		insert("read", histories.Value(map[string]int64{"balance": rng.Int64N(budget + 1)}))
	case 7:
		if budget > 0 && rng.IntN(2) == 0 {
			budget--
		} else {
			budget++
		}
	case 8:
		// An unknown decrement that was in fact acknowledged, or the reverse.
		if i := pick(func(op histories.Op) bool { return op.F == "decrement" && op.Type == histories.OK }); i >= 0 {
			ops[i].Type = histories.Info
			ops[i].Value = nil
		}
	}
	for i := range ops {
		ops[i].Index = int64(i)
	}
	return ops, budget
}
