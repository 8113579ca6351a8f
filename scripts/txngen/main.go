// Command txngen writes a synthetic transactional history, list-append or rw-register,
// for scripts/bench-txn and for trying the checkers: -workers clients run
// transactions of 1 to -max-mops micro-ops (reads with probability -reads, else
// appends or writes of values unique per key) over -keys active keys, each key
// retired after -writes-per-key writes for a fresh one, so that lists stay short, as
// Elle's own generator does.
//
// The simulated database applies each transaction at its completion, all at once:
// the history is strictly serializable. -fail and -info make that fraction of
// transactions fail (not applied) or end unknown (applied or not, at random; the
// client then continues as a fresh process, as Jepsen's do). -stale makes that
// fraction of transactions read the state as it was at their invocation while still
// writing at their completion, which plants real anomalies wherever another
// transaction wrote in between (G-single, G2-item, lost updates); with -fcw such a
// transaction fails instead when a key it writes was written since, as snapshot
// isolation's first committer wins: the history is then snapshot isolated but not
// serializable.
//
// Output is indoubt's JSONL, written by the repository's own history writer, or
// Jepsen EDN (-format edn), one op map per line with keyword functions, which Elle
// reads.
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

type options struct {
	model          string
	txns           int64
	workers        int
	keys           int
	writesPerKey   int
	maxMops        int
	reads          float64
	fail, info     float64
	stale          float64
	fcw            bool
	format, out    string
	seed           uint64
	consistencyCMs string
}

func main() {
	var o options
	flag.StringVar(&o.model, "model", "list-append", "list-append or rw-register")
	flag.Int64Var(&o.txns, "txns", 100_000, "transactions to write")
	flag.IntVar(&o.workers, "workers", 16, "concurrent clients")
	flag.IntVar(&o.keys, "keys", 16, "active keys at any time")
	flag.IntVar(&o.writesPerKey, "writes-per-key", 32, "writes after which a key is retired for a fresh one")
	flag.IntVar(&o.maxMops, "max-mops", 4, "most micro-ops per transaction")
	flag.Float64Var(&o.reads, "reads", 0.5, "probability that a micro-op is a read")
	flag.Float64Var(&o.fail, "fail", 0.01, "fraction of transactions that fail")
	flag.Float64Var(&o.info, "info", 0.01, "fraction of transactions whose outcome is unknown")
	flag.Float64Var(&o.stale, "stale", 0, "fraction of transactions that read their invocation's snapshot (planted anomalies)")
	flag.BoolVar(&o.fcw, "fcw", false, "first committer wins: a stale transaction that would overwrite a newer write fails instead")
	flag.StringVar(&o.format, "format", "jsonl", "jsonl (indoubt) or edn (Jepsen)")
	flag.StringVar(&o.out, "out", "", "history file to create")
	flag.Uint64Var(&o.seed, "seed", 1, "random seed")
	flag.StringVar(&o.consistencyCMs, "consistency-models", "", "jsonl: models the header asks the checker for, comma-separated (default: the checker's)")
	flag.Parse()
	if o.out == "" || o.model != "list-append" && o.model != "rw-register" || o.format != "jsonl" && o.format != "edn" ||
		o.workers < 1 || o.keys < 1 || o.maxMops < 1 || o.writesPerKey < 1 || o.txns < 1 {
		fmt.Fprintln(os.Stderr, "usage: txngen -model list-append|rw-register -txns N -out FILE [-format jsonl|edn] [-stale F] [-fcw] (see -h)")
		os.Exit(3)
	}
	if err := gen(o); err != nil {
		fmt.Fprintln(os.Stderr, "txngen:", err)
		os.Exit(3)
	}
}

// mop is one micro-op: f is 'a' (append), 'w' (write) or 'r' (read).
type mop struct {
	f   byte
	key int64
	val int64
}

// txn is a transaction in flight on a worker.
type txn struct {
	process int
	mops    []mop
	stale   bool
	snap    map[int64]int   // stale: each key's list length (or register value) at invocation
	snapW   map[int64]int64 // stale: each key's count of writes at invocation
}

// db is the simulated database.
type db struct {
	lists   map[int64][]int64
	regs    map[int64]int64
	written map[int64]int64 // per key, the count of writes applied, for first committer wins
	next    map[int64]int64 // per key, the next value to write
}

// sink writes events in the chosen format.
type sink interface {
	write(process int, typ histories.Type, value []byte, errText string) error
	close() error
}

func gen(o options) error {
	rng := rand.New(rand.NewPCG(o.seed, 27))
	var out sink
	var err error
	if o.format == "jsonl" {
		out, err = newJSONL(o)
	} else {
		out, err = newEDN(o.out)
	}
	if err != nil {
		return err
	}
	d := &db{lists: map[int64][]int64{}, regs: map[int64]int64{}, written: map[int64]int64{}, next: map[int64]int64{}}
	pool := make([]int64, o.keys)
	writes := make([]int, o.keys)
	for i := range pool {
		pool[i] = int64(i)
	}
	fresh := int64(o.keys)
	workers := make([]*txn, o.workers)
	procs := make([]int, o.workers)
	for i := range procs {
		procs[i] = i
	}
	nextProc := o.workers
	var started, done int64
	var buf []byte
	for done < o.txns {
		i := rng.IntN(o.workers)
		t := workers[i]
		if t == nil {
			if started >= o.txns {
				continue
			}
			started++
			t = &txn{process: procs[i], stale: rng.Float64() < o.stale}
			n := 1 + rng.IntN(o.maxMops)
			for j := 0; j < n; j++ {
				slot := rng.IntN(len(pool))
				k := pool[slot]
				if rng.Float64() < o.reads {
					t.mops = append(t.mops, mop{f: 'r', key: k})
					continue
				}
				f := byte('a')
				if o.model == "rw-register" {
					f = 'w'
				}
				d.next[k]++
				t.mops = append(t.mops, mop{f: f, key: k, val: d.next[k]})
				if writes[slot]++; writes[slot] >= o.writesPerKey {
					pool[slot], writes[slot] = fresh, 0
					fresh++
				}
			}
			if t.stale {
				t.snap, t.snapW = map[int64]int{}, map[int64]int64{}
				for _, m := range t.mops {
					if _, ok := t.snap[m.key]; !ok {
						t.snap[m.key] = d.state(o.model, m.key)
						t.snapW[m.key] = d.written[m.key]
					}
				}
			}
			workers[i] = t
			buf = appendTxn(buf[:0], o, t.mops, nil, nil)
			if err := out.write(t.process, histories.Invoke, buf, ""); err != nil {
				return err
			}
			continue
		}
		workers[i] = nil
		done++
		switch p := rng.Float64(); {
		case p < o.fail || t.stale && o.fcw && d.conflicts(t):
			if err := out.write(t.process, histories.Fail, nil, "ERROR: could not serialize access (SQLSTATE 40001)"); err != nil {
				return err
			}
		case p < o.fail+o.info:
			if rng.IntN(2) == 0 {
				d.apply(o.model, t)
			}
			if err := out.write(t.process, histories.Info, nil, "read tcp: i/o timeout"); err != nil {
				return err
			}
			procs[i] = nextProc
			nextProc++
		default:
			results := d.apply(o.model, t)
			buf = appendTxn(buf[:0], o, t.mops, results, d)
			if err := out.write(t.process, histories.OK, buf, ""); err != nil {
				return err
			}
		}
	}
	return out.close()
}

// state is what a snapshot keeps of a key: a list's length or a register's value.
func (d *db) state(model string, k int64) int {
	if model == "list-append" {
		return len(d.lists[k])
	}
	v, ok := d.regs[k]
	if !ok {
		return -1
	}
	return int(v)
}

// conflicts reports whether a stale transaction writes a key written since its
// snapshot.
func (d *db) conflicts(t *txn) bool {
	for _, m := range t.mops {
		if m.f != 'r' && d.written[m.key] != t.snapW[m.key] {
			return true
		}
	}
	return false
}

// readResult is what one read returned: a list prefix (n elements of key's list, then
// the transaction's own appends) or a register's value (-1: never written).
type readResult struct {
	n   int
	own []int64
	reg int64
}

// apply runs t at once and returns what its reads saw. A stale transaction's read of
// a key it has not written yet sees its snapshot; once it has written the key, the key
// as it is, so that every list read stays a prefix of the key's list.
func (d *db) apply(model string, t *txn) []readResult {
	res := make([]readResult, len(t.mops))
	own := map[int64][]int64{}
	ownReg := map[int64]int64{}
	for i, m := range t.mops {
		switch m.f {
		case 'r':
			if model == "list-append" {
				n := len(d.lists[m.key]) - len(own[m.key])
				if t.stale && len(own[m.key]) == 0 {
					n = t.snap[m.key]
				}
				res[i] = readResult{n: n, own: append([]int64(nil), own[m.key]...)}
			} else if v, ok := ownReg[m.key]; ok {
				res[i] = readResult{reg: v}
			} else if t.stale {
				res[i] = readResult{reg: int64(t.snap[m.key])}
			} else if v, ok := d.regs[m.key]; ok {
				res[i] = readResult{reg: v}
			} else {
				res[i] = readResult{reg: -1}
			}
		case 'a':
			d.lists[m.key] = append(d.lists[m.key], m.val)
			own[m.key] = append(own[m.key], m.val)
			d.written[m.key]++
		case 'w':
			d.regs[m.key] = m.val
			ownReg[m.key] = m.val
			d.written[m.key]++
		}
	}
	return res
}

// appendTxn appends a transaction's value as JSON: reads null on invocation (results
// nil), else what they saw.
func appendTxn(b []byte, o options, mops []mop, results []readResult, d *db) []byte {
	b = append(b, '[')
	for i, m := range mops {
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
		b = strconv.AppendInt(b, m.key, 10)
		b = append(b, ',')
		switch {
		case m.f != 'r':
			b = strconv.AppendInt(b, m.val, 10)
		case results == nil:
			b = append(b, "null"...)
		case o.model == "list-append":
			r := results[i]
			b = append(b, '[')
			for j, e := range d.lists[m.key][:r.n] {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, e, 10)
			}
			for j, e := range r.own {
				if j > 0 || r.n > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, e, 10)
			}
			b = append(b, ']')
		case results[i].reg < 0:
			b = append(b, "null"...)
		default:
			b = strconv.AppendInt(b, results[i].reg, 10)
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

// jsonlSink writes indoubt's JSONL with histories.Writer.
type jsonlSink struct {
	w *histories.Writer
	t int64
}

func newJSONL(o options) (*jsonlSink, error) {
	h := histories.Header{Workload: o.model, Model: o.model, Store: "synthetic", Seed: int64(o.seed)}
	if o.consistencyCMs != "" {
		b, _ := json.Marshal(splitComma(o.consistencyCMs))
		h.Params = map[string]json.RawMessage{"consistency_models": b}
	}
	w, err := histories.Create(o.out, h)
	if err != nil {
		return nil, err
	}
	return &jsonlSink{w: w}, nil
}

func (s *jsonlSink) write(process int, typ histories.Type, value []byte, errText string) error {
	s.t += 1000
	op := histories.Op{Time: s.t, Process: process, Type: typ, F: "txn", Error: errText}
	if value != nil {
		op.Value = append(json.RawMessage(nil), value...)
	}
	_, err := s.w.Write(op)
	return err
}

func (s *jsonlSink) close() error { return s.w.Close() }

// ednSink writes Jepsen EDN, one op map per line.
type ednSink struct {
	f     *os.File
	w     *bufio.Writer
	index int64
	line  []byte
}

func newEDN(path string) (*ednSink, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &ednSink{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (s *ednSink) write(process int, typ histories.Type, value []byte, errText string) error {
	b := s.line[:0]
	b = append(b, "{:index "...)
	b = strconv.AppendInt(b, s.index, 10)
	b = append(b, ", :time "...)
	b = strconv.AppendInt(b, (s.index+1)*1000, 10)
	b = append(b, ", :type :"...)
	b = append(b, typ.String()...)
	b = append(b, ", :process "...)
	b = strconv.AppendInt(b, int64(process), 10)
	b = append(b, ", :f :txn"...)
	if value != nil {
		b = append(b, ", :value "...)
		b = ednValue(b, value)
	}
	if errText != "" {
		b = append(b, ", :error "...)
		b = strconv.AppendQuote(b, errText)
	}
	b = append(b, "}\n"...)
	s.line = b
	s.index++
	_, err := s.w.Write(b)
	return err
}

// ednValue rewrites a transaction's JSON as EDN: functions as keywords, commas and
// brackets kept (EDN reads commas as spaces), null as nil.
func ednValue(b, value []byte) []byte {
	for i := 0; i < len(value); i++ {
		switch {
		case value[i] == '"':
			j := i + 1
			for value[j] != '"' {
				j++
			}
			b = append(b, ':')
			b = append(b, value[i+1:j]...)
			i = j
		case value[i] == ',':
			b = append(b, ' ')
		case value[i] == 'n' && i+4 <= len(value) && string(value[i:i+4]) == "null":
			b = append(b, "nil"...)
			i += 3
		default:
			b = append(b, value[i])
		}
	}
	return b
}

func (s *ednSink) close() error {
	if err := s.w.Flush(); err != nil {
		s.f.Close()
		return err
	}
	return s.f.Close()
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
