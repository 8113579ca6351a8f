package checker

import (
	"bytes"
	"encoding/json"
	"strconv"
	"testing"
)

// FuzzTxnDecode holds the transaction value decoder to encoding/json: whatever it
// accepts, encoding/json reads as the same micro-ops (same functions, keys and values,
// compared by their canonical JSON), and it never panics on anything.
func FuzzTxnDecode(f *testing.F) {
	for _, s := range []string{
		`[["append","x",1],["r","y",[1,2]]]`,
		`[["w",3,-7],["r",3,null],["r","z"]]`,
		`[ ["append" , "x" , 12 ] ]`,
		`[["r",["anti",1],[1,2,3]],["append",{"a":1},"first"]]`,
		`[["r","x",[1e3,1.5,-0,18446744073709551616]]]`,
		`[["append","\u0078",1],["r","x",[01]]]`,
		`null`, `[]`, `[[]]`, `[["r"]]`, `[["q","x",1]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := txnDecoder{in: newTxnInterner()}
		if err := d.decode(b); err != nil {
			return
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if len(bytes.TrimSpace(b)) == 0 {
			if len(d.mops) != 0 {
				t.Fatalf("empty value gave %d micro-ops", len(d.mops))
			}
			return
		}
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("decoder accepted %q, encoding/json refuses it: %v", b, err)
		}
		if dec.More() {
			t.Fatalf("decoder accepted %q with data after the value", b)
		}
		mops, _ := v.([]any)
		if v != nil && len(mops) != len(d.mops) {
			t.Fatalf("%q: %d micro-ops, encoding/json reads %d", b, len(d.mops), len(mops))
		}
		canon := func(x any) string {
			if n, ok := x.(json.Number); ok {
				if i, err := strconv.ParseInt(n.String(), 10, 64); err == nil {
					return strconv.FormatInt(i, 10)
				}
				return n.String()
			}
			out, err := json.Marshal(x)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}
		for i, m := range d.mops {
			arr, ok := mops[i].([]any)
			if !ok || len(arr) < 2 || len(arr) > 3 {
				t.Fatalf("%q: micro-op %d is %v to encoding/json", b, i, mops[i])
			}
			if f, _ := arr[0].(string); f != m.kind.String() {
				t.Fatalf("%q: micro-op %d function %v, decoder %s", b, i, arr[0], m.kind)
			}
			if got, want := d.in.keyText[m.key], canon(arr[1]); got != want {
				t.Fatalf("%q: micro-op %d key %s, encoding/json %s", b, i, got, want)
			}
			if len(arr) == 2 || arr[2] == nil {
				if m.hasValue {
					t.Fatalf("%q: micro-op %d has a value to the decoder only", b, i)
				}
				continue
			}
			if list, ok := arr[2].([]any); ok && m.kind == mopRead {
				if !m.isList || m.len != len(list) {
					t.Fatalf("%q: micro-op %d read %v, decoder %d elements", b, i, list, m.len)
				}
				for j, e := range list {
					if got, want := d.in.valueJSON(d.list[m.list+j]), canon(e); got != want {
						t.Fatalf("%q: micro-op %d element %d %s, encoding/json %s", b, i, j, got, want)
					}
				}
				continue
			}
			if got, want := d.in.valueJSON(m.val), canon(arr[2]); got != want {
				t.Fatalf("%q: micro-op %d value %s, encoding/json %s", b, i, got, want)
			}
		}
	})
}
