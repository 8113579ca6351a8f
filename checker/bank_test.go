package checker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

func TestBankGolden(t *testing.T) { checkGoldenDir(t, BankModel) }

// TestBankNamesTheDuplicate holds the final-mismatch explanation to naming the
// transfer whose second application explains the balances.
func TestBankNamesTheDuplicate(t *testing.T) {
	h, ops, err := histories.ReadFile(filepath.Join("testdata", BankModel, "duplicate.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), h, ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Anomalies) != 1 || r.Anomalies[0].Kind != "final-mismatch" {
		t.Fatalf("anomalies %+v", r.Anomalies)
	}
	if e := r.Anomalies[0].Explanation; !strings.Contains(e, "transfer a->b 3 (0-1) applied once more than allowed") {
		t.Errorf("explanation %q", e)
	}
	// The same history without its final read, given the balances with Options.Final.
	r, err = Check(context.Background(), h, ops[:8], Options{Final: []byte(`{"a":4,"b":12,"c":4}`)})
	if err != nil || r.Verdict != Invalid {
		t.Fatalf("with Final: %v %v", r.Verdict, err)
	}
	r, err = Check(context.Background(), h, ops[:8], Options{Final: []byte(`{"a":7,"b":9,"c":4}`)})
	if err != nil || r.Verdict != Valid {
		t.Fatalf("with a right Final: %v %v %s", r.Verdict, err, r.Summary)
	}
}

// TestBankRefuses lists histories that are not of the model.
func TestBankRefuses(t *testing.T) {
	p := BankParams{Accounts: Balances{"a": 1, "b": 1}}
	tr := func(v string) []histories.Op {
		return []histories.Op{{Index: 0, Process: 0, Type: histories.Invoke, F: "transfer", Value: []byte(v)}}
	}
	rd := func(v string) []histories.Op {
		return []histories.Op{{Index: 0, Process: 0, Type: histories.Invoke, F: "read"}, {Index: 1, Process: 0, Type: histories.OK, F: "read", Value: []byte(v)}}
	}
	for name, ops := range map[string][]histories.Op{
		"unknown account":   tr(`{"from":"a","to":"z","amount":1}`),
		"negative amount":   tr(`{"from":"a","to":"b","amount":-1}`),
		"not a transfer":    tr(`[1]`),
		"read omits b":      rd(`{"a":2}`),
		"read names z":      rd(`{"a":1,"b":1,"z":0}`),
		"read not balances": rd(`7`),
	} {
		if _, err := CheckBank(context.Background(), ops, p); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := Check(context.Background(), &histories.Header{Model: BankModel}, nil, Options{}); err == nil || !strings.Contains(err.Error(), "params.accounts") {
		t.Errorf("no accounts: %v", err)
	}
}

// TestBankManyUnknown checks that grouping transfers of one shape keeps the search
// small: 600 unknown transfers among three accounts decide in moments.
func TestBankManyUnknown(t *testing.T) {
	p := BankParams{Accounts: Balances{"a": 10000, "b": 10000, "c": 10000}}
	var ops []histories.Op
	pairs := [][2]string{{"a", "b"}, {"b", "c"}, {"c", "a"}}
	for i := range 600 {
		pr := pairs[i%3]
		v := histories.Value(Transfer{From: pr[0], To: pr[1], Amount: int64(1 + i%2)})
		ops = append(ops, histories.Op{Index: int64(2 * i), Process: i, Type: histories.Invoke, F: "transfer", Value: v, OpID: fmt.Sprint(i)},
			histories.Op{Index: int64(2*i + 1), Process: i, Type: histories.Info, F: "transfer", OpID: fmt.Sprint(i)})
	}
	final := histories.Value(Balances{"a": 10000 - 100, "b": 10000 + 50, "c": 10000 + 50})
	r, err := CheckBank(context.Background(), WithFinalRead(ops, final), p)
	if err != nil || r.Verdict != Valid {
		t.Fatalf("%v %v %s", r.Verdict, err, r.Summary)
	}
	final = histories.Value(Balances{"a": 10000 - 2000, "b": 10000 + 2000, "c": 10000})
	if r, _ = CheckBank(context.Background(), WithFinalRead(ops, final), p); r.Verdict != Invalid {
		t.Fatalf("more than every unknown transfer could move: %v %s", r.Verdict, r.Summary)
	}
}

// bankLiteral is the model as its definition reads, by brute force: every ok read
// conserves the total and keeps the floor, and some choice of the unknown transfers,
// each applied or not, with the acknowledged ones applied once, gives the final read.
func bankLiteral(ops []histories.Op, p BankParams) Verdict {
	var total int64
	for _, b := range p.Accounts {
		total += b
	}
	type tr struct {
		t       Transfer
		outcome histories.Type
	}
	byProc := map[int]*tr{}
	var trs []*tr
	var final Balances
	for _, op := range ops {
		if op.F == "read" {
			if op.Type != histories.OK {
				continue
			}
			var b Balances
			_ = json.Unmarshal(op.Value, &b)
			var sum int64
			for a, v := range b {
				sum += v
				if v < p.floor(a) {
					return Invalid
				}
			}
			if sum != total {
				return Invalid
			}
			if op.Process == 1000 {
				final = b
			}
			continue
		}
		if op.Type == histories.Invoke {
			x := &tr{outcome: histories.Info}
			_ = json.Unmarshal(op.Value, &x.t)
			byProc[op.Process] = x
			trs = append(trs, x)
			continue
		}
		byProc[op.Process].outcome = op.Type
	}
	if final == nil {
		return Valid
	}
	var unsure []*tr
	for _, x := range trs {
		if x.outcome == histories.Info {
			unsure = append(unsure, x)
		}
	}
	for mask := 0; mask < 1<<len(unsure); mask++ {
		b := Balances{}
		for a, v := range p.Accounts {
			b[a] = v
		}
		apply := func(t Transfer) { b[t.From] -= t.Amount; b[t.To] += t.Amount }
		for _, x := range trs {
			if x.outcome == histories.OK {
				apply(x.t)
			}
		}
		for i, x := range unsure {
			if mask&(1<<i) != 0 {
				apply(x.t)
			}
		}
		if fmt.Sprint(b) == fmt.Sprint(final) {
			return Valid
		}
	}
	return Invalid
}

// randomBank makes a small bank history: two or three accounts, up to eight transfers
// of 1 to 3 with random outcomes, reads during the run (mostly conserving), and a final
// read of balances from a random choice of applications, sometimes disturbed by a
// duplicate or a loss.
func randomBank(rng *rand.Rand) ([]histories.Op, BankParams) {
	names := []string{"a", "b", "c"}[:2+rng.IntN(2)]
	p := BankParams{Accounts: Balances{}, Floor: -int64(rng.IntN(2)) * 3}
	var total int64
	for _, a := range names {
		p.Accounts[a] = int64(rng.IntN(6))
		total += p.Accounts[a]
	}
	var ops []histories.Op
	emit := func(proc int, typ histories.Type, f string, v []byte) {
		ops = append(ops, histories.Op{Index: int64(len(ops)), Time: int64(len(ops)), Process: proc, Type: typ, F: f, Value: v, OpID: fmt.Sprint(proc)})
	}
	n := rng.IntN(9)
	trs := make([]Transfer, n)
	outcomes := make([]histories.Type, n)
	cur := Balances{}
	for a, v := range p.Accounts {
		cur[a] = v
	}
	for i := range n {
		from := rng.IntN(len(names))
		to := (from + 1 + rng.IntN(len(names)-1)) % len(names)
		trs[i] = Transfer{From: names[from], To: names[to], Amount: int64(1 + rng.IntN(3))}
		outcomes[i] = []histories.Type{histories.OK, histories.Fail, histories.Info, 0}[rng.IntN(4)]
		emit(i, histories.Invoke, "transfer", histories.Value(trs[i]))
		if i < n-1 && rng.IntN(3) == 0 {
			b := Balances{}
			for a, v := range cur {
				b[a] = v
			}
			if rng.IntN(4) == 0 {
				b[names[0]]--
			}
			emit(500+i, histories.Invoke, "read", nil)
			emit(500+i, histories.OK, "read", histories.Value(b))
		}
	}
	for i := range n {
		if outcomes[i] != 0 {
			emit(i, outcomes[i], "transfer", nil)
		}
	}
	apply := func(t Transfer) { cur[t.From] -= t.Amount; cur[t.To] += t.Amount }
	for i := range n {
		switch {
		case outcomes[i] == histories.OK, (outcomes[i] == histories.Info || outcomes[i] == 0) && rng.IntN(2) == 0:
			apply(trs[i])
		}
	}
	if n > 0 && rng.IntN(3) == 0 {
		t := trs[rng.IntN(n)]
		if rng.IntN(2) == 0 {
			t.From, t.To = t.To, t.From // a loss
		}
		apply(t)
	}
	emit(1000, histories.Invoke, "read", nil)
	emit(1000, histories.OK, "read", histories.Value(cur))
	return ops, p
}

// TestBankDifferential holds the checker to the literal model on thousands of random
// small histories.
func TestBankDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 2))
	counts := map[Verdict]int{}
	for i := range 5000 {
		ops, p := randomBank(rng)
		r, err := CheckBank(context.Background(), ops, p)
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		if want := bankLiteral(ops, p); r.Verdict != want {
			for _, op := range ops {
				t.Logf("%d p%d %s %s %s", op.Index, op.Process, op.Type, op.F, op.Value)
			}
			t.Fatalf("history %d (%+v): checker %s, literal model %s: %s", i, p, r.Verdict, want, r.Summary)
		}
		counts[r.Verdict]++
	}
	if counts[Valid] < 1000 || counts[Invalid] < 1000 {
		t.Errorf("the generator is lopsided: %v", counts)
	}
	t.Logf("verdicts %v", counts)
}
