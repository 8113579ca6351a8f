package results

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// results.json's decoding errors name the field and the JSON it holds, never a Go
// type; they still unwrap to encoding/json's error.
func TestDecodeErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"workers":"x"}`, "workers is a string, want an integer"},
		{`{"workers":1e400}`, "workers is the number 1e400, want an integer"},
		{`{"faults":{"by_kind":{"a":"b"}}}`, "faults.by_kind is a string, want an integer"},
		{`{"anomalies":[{"ops":["x"]}]}`, "anomalies.ops is a string, want an integer"},
		{`{"interrupted":3}`, "interrupted is a number, want true or false"},
		{`{"store":[]}`, "store is an array, want a string"},
		{`{"started_at":"yesterday"}`, `"yesterday" is not a time in RFC 3339 form`},
		{`{"workload":"budget","final":{"applied":"x"}}`, "final.applied is a string, want an integer"},
		{`{"workload":"budget","final":[]}`, "final is an array, want an object"},
		{`[]`, "the value is an array, want an object"},
	} {
		var r Results
		err := json.Unmarshal([]byte(c.in), &r)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.in, err, c.want)
			continue
		}
		for _, goType := range []string{"Go ", "struct", "int64", "plain", "results."} {
			if strings.Contains(err.Error(), goType) {
				t.Errorf("%s: %q names a Go type (%s)", c.in, err, goType)
			}
		}
		var te *json.UnmarshalTypeError
		if strings.Contains(c.want, "want") && !errors.As(err, &te) {
			t.Errorf("%s: %v does not unwrap to json's error", c.in, err)
		}
	}
	if got := JSONError(json.Unmarshal([]byte(`{not json`), new(map[string]any))); got == nil || got.Error() != "not JSON: byte 2: invalid character 'n' looking for beginning of object key string" {
		t.Errorf("syntax error: %v", got)
	}
	if JSONError(nil) != nil {
		t.Errorf("JSONError(nil) is not nil")
	}
}

func TestJSONErrorText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`history index 1: ok decrement value "{\"applied\":\"yes\"}": json: cannot unmarshal string into Go struct field .applied of type bool`,
			`history index 1: ok decrement value "{\"applied\":\"yes\"}": applied is a string, want true or false`},
		{`value: json: cannot unmarshal array into Go value of type struct { Applied *bool "json:\"applied\""; Balance *int64 "json:\"balance\"" }`,
			`value: the value is an array, want an object`},
		{`x: json: cannot unmarshal number 1e400 into Go value of type int64`, `x: the value is the number 1e400, want an integer`},
		{`x: json: cannot unmarshal object into Go struct field Op.a.b of type []string`, `x: a.b is an object, want an array`},
		{`x: json: cannot unmarshal string into Go value of type map[string]int64`, `x: the value is a string, want an object`},
		{`connection refused`, `connection refused`},
	} {
		if got := JSONErrorText(tc.in); got != tc.want {
			t.Errorf("JSONErrorText(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
