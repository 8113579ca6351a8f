package checker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

func TestExactlyOnceResponse(t *testing.T) {
	apply := func(p int, id, resp string) []histories.Op {
		return []histories.Op{
			{Process: p, Type: histories.Invoke, F: "apply", OpID: id},
			{Process: p, Type: histories.OK, F: "apply", OpID: id, Value: json.RawMessage(`{"response":` + resp + `}`)},
		}
	}
	read := func(st string) []histories.Op {
		return []histories.Op{
			{Process: 9, Type: histories.Invoke, F: "read", OpID: "final-0"},
			{Process: 9, Type: histories.OK, F: "read", OpID: "final-0", Value: json.RawMessage(st)},
		}
	}
	for _, c := range []struct {
		name, state string
		want        Verdict
		kinds       []string
	}{
		{"the original responses", `{"0-1":["order-1"],"1-1":["order-2"]}`, Valid, nil},
		{"a retry answered with a new order id", `{"0-1":["order-1"],"1-1":["order-7"]}`, Invalid, []string{"response-mismatch"}},
		{"a duplicate, answered with one of its orders", `{"0-1":["order-1"],"1-1":["order-2","order-3"]}`, Invalid, []string{"duplicate"}},
		{"a lost effect", `{"0-1":["order-1"]}`, Invalid, []string{"lost"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ops := append(append(apply(0, "0-1", `"order-1"`), apply(1, "1-1", `"order-2"`)...), read(c.state)...)
			for i := range ops {
				ops[i].Index = int64(i)
			}
			res, err := CheckExactlyOnceResponse(context.Background(), ops)
			if err != nil || res.Verdict != c.want {
				t.Fatalf("verdict %v, err %v: %s", res.Verdict, err, res.Summary)
			}
			var kinds []string
			for _, a := range res.Anomalies {
				kinds = append(kinds, a.Kind)
			}
			if strings.Join(kinds, " ") != strings.Join(c.kinds, " ") {
				t.Errorf("anomalies %v, want %v", kinds, c.kinds)
			}
			if c.want == Invalid && res.Checker != ExactlyOnceResponseModel {
				t.Errorf("checker %q", res.Checker)
			}
		})
	}
	t.Run("an ok apply without a response", func(t *testing.T) {
		ops := append([]histories.Op{{Process: 0, Type: histories.Invoke, F: "apply", OpID: "0-1"}, {Process: 0, Type: histories.OK, F: "apply", OpID: "0-1", Value: json.RawMessage(`41`)}}, read(`{"0-1":["x"]}`)...)
		for i := range ops {
			ops[i].Index = int64(i)
		}
		if _, err := CheckExactlyOnceResponse(context.Background(), ops); err == nil {
			t.Fatal("checked an apply without a response")
		}
	})
}
