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
