package checker

import (
	"encoding/json"
	"testing"
)

// FuzzCounterValue holds the fast path of counterParseValue to encoding/json: whatever
// it accepts, encoding/json must accept and read the same.
func FuzzCounterValue(f *testing.F) {
	for _, s := range []string{
		`{"read":4,"wrote":5}`, `{"wrote":1}`, `{"value":7}`, ` { "value" : -3 , "x":true} `,
		`{"Wrote":1}`, `{"wrote":1.5}`, `{}`, `null`, `{"wrote":01}`, `{"wrote":1,"wrote":2}`,
		`{"wrote":1,"wrote":null}`, `{"value":-0}`, `{"value":123456789012345678}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := counterScanFlat(b)
		if !ok {
			return
		}
		var want counterValue
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("fast path accepted %q, encoding/json refuses it: %v", b, err)
		}
		if got != want.fields() {
			t.Fatalf("%q: fast path reads %+v, encoding/json %+v", b, got, want.fields())
		}
	})
}

// TestCounterValueFast: the values indoubt writes take the fast path.
func TestCounterValueFast(t *testing.T) {
	for _, s := range []string{`{"read":4,"wrote":5}`, `{"wrote":1}`, `{"value":7}`} {
		if _, ok := counterScanFlat([]byte(s)); !ok {
			t.Errorf("fast path declined %s", s)
		}
	}
}
