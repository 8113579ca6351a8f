package budget

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// TestOutcomeAppendJSON: the hand-written encoding is encoding/json's, byte for byte,
// and histories.Value takes it.
func TestOutcomeAppendJSON(t *testing.T) {
	for _, o := range []Outcome{
		{}, {Applied: true, Balance: 41}, {Balance: -1}, {Applied: true, Balance: math.MaxInt64, Conflicts: 3},
		{Balance: math.MinInt64, Replayed: true}, {Applied: true, Conflicts: -2, Replayed: true},
	} {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("%+v: AppendJSON %s, encoding/json %s", o, got, want)
		}
		if got := histories.Value(o); string(got) != string(want) {
			t.Errorf("%+v: histories.Value %s, encoding/json %s", o, got, want)
		}
	}
}

// FuzzPlainOutcome: what the fast path reads, encoding/json reads the same.
func FuzzPlainOutcome(f *testing.F) {
	for _, s := range []string{`{"applied":true,"balance":41}`, `{"applied":false,"balance":0}`, `{"applied":true,"balance":-1}`,
		`{"applied":true,"balance":+1}`, `{"applied":true,"balance":01}`, `{"applied":true,"balance":-0}`, `{"applied":true,"balance":1,"replayed":true}`,
		`{"applied":true,"balance":99999999999999999999}`, `{"applied":true,"balance":1 }`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		got, ok := plainOutcome(v)
		if !ok {
			return
		}
		var want Outcome
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatalf("fast path read %q, encoding/json refuses it: %v", v, err)
		}
		if got != want {
			t.Fatalf("%q: fast %+v, encoding/json %+v", v, got, want)
		}
	})
}

// TestPlainOutcomeTakesAppendJSON: the outcomes a store reports take the fast path.
func TestPlainOutcomeTakesAppendJSON(t *testing.T) {
	for _, o := range []Outcome{{Applied: true, Balance: 41}, {Balance: 0}, {Applied: true, Balance: -1}} {
		if got, ok := plainOutcome(o.AppendJSON(nil)); !ok || got != o {
			t.Errorf("%+v: fast path %+v %v", o, got, ok)
		}
	}
}
