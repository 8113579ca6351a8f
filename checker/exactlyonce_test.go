package checker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// checkGoldenDir checks every history under testdata/<dir> with Check and the header's
// model against the verdict and anomaly kinds (distinct, sorted, comma separated) in the
// .verdict file beside it; -update rewrites them.
func checkGoldenDir(t *testing.T, dir string) {
	goldenWalk(t, dir, func(t *testing.T, h *histories.Header, ops []histories.Op) (Result, string) {
		r := checkAll(t, h, ops)
		var kinds []string
		for _, a := range r.Anomalies {
			if !slices.Contains(kinds, a.Kind) {
				kinds = append(kinds, a.Kind)
			}
		}
		slices.Sort(kinds)
		return r, strings.Join(kinds, ",")
	})
}

func TestExactlyOnceGolden(t *testing.T) { checkGoldenDir(t, ExactlyOnceModel) }

// TestExactlyOnceNamesTheDuplicate holds the explanation to what a user needs first:
// the op id applied twice, and the events of the operation and of the read.
func TestExactlyOnceNamesTheDuplicate(t *testing.T) {
	h, ops, err := histories.ReadFile(filepath.Join("testdata", ExactlyOnceModel, "duplicate.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Check(context.Background(), h, ops, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Anomalies) != 1 || r.Anomalies[0].Kind != "duplicate" {
		t.Fatalf("anomalies %+v", r.Anomalies)
	}
	a := r.Anomalies[0]
	if !strings.Contains(a.Explanation, "op id 0-1 is present twice") || !slices.Equal(a.Ops, []int64{0, 2, 6, 7}) {
		t.Errorf("explanation %q, ops %v", a.Explanation, a.Ops)
	}
	if !strings.HasPrefix(r.Summary, "not exactly once (1 duplicate): op id 0-1") {
		t.Errorf("summary %q", r.Summary)
	}
}

// TestExactlyOnceFinal checks a history without a final read: an error that says how
// to give one, and the verdict once Options.Final gives it.
func TestExactlyOnceFinal(t *testing.T) {
	h, ops, err := histories.ReadFile(filepath.Join("testdata", ExactlyOnceModel, "duplicate.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	ops = ops[:6]
	_, err = Check(context.Background(), h, ops, Options{})
	if !errors.Is(err, errNoFinalRead) || !strings.Contains(err.Error(), "--final") {
		t.Fatalf("no final read: %v", err)
	}
	for final, want := range map[string]Verdict{`{"0-1":1,"1-1":1}`: Valid, `{"0-1":2,"1-1":1}`: Invalid, `{}`: Invalid} {
		r, err := Check(context.Background(), h, ops, Options{Final: []byte(final)})
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != want {
			t.Errorf("final %s: %s, want %s (%s)", final, r.Verdict, want, r.Summary)
		}
	}
	if _, err := Check(context.Background(), h, ops, Options{Final: []byte(`[1,2]`)}); err == nil || !strings.Contains(err.Error(), "not an exactly-once state") {
		t.Errorf("a list as final state: %v", err)
	}
}

// TestExactlyOnceRefuses lists histories that are not of the model.
func TestExactlyOnceRefuses(t *testing.T) {
	for name, ops := range map[string][]histories.Op{
		"no op id": {
			{Index: 0, Process: 0, Type: histories.Invoke, F: "apply"},
			{Index: 1, Process: 0, Type: histories.OK, F: "apply"},
		},
		"unknown function": {
			{Index: 0, Process: 0, Type: histories.Invoke, F: "decrement", OpID: "a"},
		},
		"negative count": {
			{Index: 0, Process: 0, Type: histories.Invoke, F: "read"},
			{Index: 1, Process: 0, Type: histories.OK, F: "read", Value: []byte(`{"a":-1}`)},
		},
	} {
		if _, err := CheckExactlyOnce(context.Background(), ops); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// exactlyOnceLiteral is the model as its definition reads, by brute force: some choice
// of the unknown applies (info or never completed) that applied makes every op id
// present once if an apply of it is ok or was chosen, and absent otherwise, and the
// final state is exactly that.
func exactlyOnceLiteral(ops []histories.Op) Verdict {
	type apply struct {
		id      string
		outcome histories.Type
	}
	byProc := map[int]*apply{}
	var applies []*apply
	var final map[string]int64
	for _, op := range ops {
		if op.F == "read" {
			if op.Type == histories.OK && op.Process == 1000 {
				final = map[string]int64{}
				for id, n := range parseState(op.Value) {
					if n != 0 {
						final[id] = n
					}
				}
			}
			continue
		}
		if op.Type == histories.Invoke {
			a := &apply{id: op.OpID, outcome: histories.Info}
			byProc[op.Process] = a
			applies = append(applies, a)
			continue
		}
		byProc[op.Process].outcome = op.Type
	}
	var unsure []*apply
	for _, a := range applies {
		if a.outcome == histories.Info {
			unsure = append(unsure, a)
		}
	}
	for mask := 0; mask < 1<<len(unsure); mask++ {
		state := map[string]int64{}
		for _, a := range applies {
			if a.outcome == histories.OK {
				state[a.id] = 1
			}
		}
		for i, a := range unsure {
			if mask&(1<<i) != 0 {
				state[a.id] = 1
			}
		}
		if fmt.Sprint(state) == fmt.Sprint(final) {
			return Valid
		}
	}
	return Invalid
}

func parseState(v []byte) ExactlyOnceState {
	var s ExactlyOnceState
	if err := jsonUnmarshal(v, &s); err != nil {
		panic(err)
	}
	return s
}

// randomExactlyOnce makes a small history: up to seven applies over a few op ids (so
// that some share one), their completions in random order, reads during the run with
// states of no meaning, and a final read of a state that is often, not always, right.
func randomExactlyOnce(rng *rand.Rand) []histories.Op {
	var ops []histories.Op
	emit := func(p int, typ histories.Type, f, id string, v []byte) {
		ops = append(ops, histories.Op{Index: int64(len(ops)), Time: int64(len(ops)), Process: p, Type: typ, F: f, OpID: id, Value: v})
	}
	n := 1 + rng.IntN(7)
	ids := []string{"a", "b", "c", "d", "e"}
	outcomes := make([]histories.Type, n)
	opIDs := make([]string, n)
	var pending []int
	for i := range n {
		opIDs[i] = ids[rng.IntN(len(ids))]
		outcomes[i] = []histories.Type{histories.OK, histories.Fail, histories.Info, 0}[rng.IntN(4)]
		emit(i, histories.Invoke, "apply", opIDs[i], nil)
		pending = append(pending, i)
		if i < n-1 && rng.IntN(3) == 0 { // a later apply begins after it: not a final read
			emit(500+i, histories.Invoke, "read", "", nil)
			emit(500+i, histories.OK, "read", "", []byte(fmt.Sprintf(`{"%s":%d}`, ids[rng.IntN(5)], rng.IntN(3))))
		}
	}
	rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
	for _, i := range pending {
		if outcomes[i] != 0 {
			emit(i, outcomes[i], "apply", opIDs[i], nil)
		}
	}
	state := map[string]int64{}
	for i := range n {
		switch outcomes[i] {
		case histories.OK:
			state[opIDs[i]] = 1
		case histories.Info, 0:
			if rng.IntN(2) == 0 {
				state[opIDs[i]] = 1
			}
		}
	}
	if rng.IntN(3) == 0 { // disturb it: a duplicate, a loss, a phantom
		state[ids[rng.IntN(len(ids))]] = int64(rng.IntN(3))
	}
	emit(1000, histories.Invoke, "read", "final", nil)
	emit(1000, histories.OK, "read", "final", histories.Value(state))
	return ops
}

// TestExactlyOnceDifferential holds the checker to the literal model on thousands of
// random small histories.
func TestExactlyOnceDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 1))
	counts := map[Verdict]int{}
	for i := range 5000 {
		ops := randomExactlyOnce(rng)
		r, err := CheckExactlyOnce(context.Background(), ops)
		if err != nil {
			t.Fatalf("history %d: %v", i, err)
		}
		if want := exactlyOnceLiteral(ops); r.Verdict != want {
			for _, op := range ops {
				t.Logf("%+v %s", op, op.Value)
			}
			t.Fatalf("history %d: checker %s, literal model %s: %s", i, r.Verdict, want, r.Summary)
		}
		counts[r.Verdict]++
	}
	if counts[Valid] < 1000 || counts[Invalid] < 500 {
		t.Errorf("the generator is lopsided: %v", counts)
	}
	t.Logf("verdicts %v", counts)
}

var jsonUnmarshal = json.Unmarshal
