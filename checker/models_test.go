package checker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// TestModelsGolden checks every history under testdata/models against the verdict
// beside it: each part judged on its view, the verdict the worst of theirs.
func TestModelsGolden(t *testing.T) {
	goldenWalk(t, "models", func(t *testing.T, h *histories.Header, ops []histories.Op) (Result, string) {
		r, err := Check(context.Background(), h, ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var parts []PartResult
		if err := json.Unmarshal(r.Details["models"], &parts); err != nil || len(parts) != 2 {
			t.Fatalf("details.models %s: %v", r.Details["models"], err)
		}
		for _, p := range parts {
			if !strings.Contains(r.Summary, p.Name+" ("+p.Model+") "+p.Verdict.String()) {
				t.Errorf("the summary does not give %s's verdict: %s", p.Name, r.Summary)
			}
		}
		return r, anomalyKinds(r)
	})
}

func TestModelsVerdictIsTheWorst(t *testing.T) {
	for _, c := range []struct{ a, b, want Verdict }{
		{Valid, Valid, Valid}, {Valid, Unknown, Unknown}, {Unknown, Invalid, Invalid}, {Invalid, Valid, Invalid},
	} {
		if got := worse(c.a, c.b); got != c.want {
			t.Errorf("worse(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
	// A part with nothing to check is unknown, and so is the whole.
	ops := []histories.Op{
		{Index: 0, Process: 0, Type: histories.Invoke, F: "reserve", OpID: "r1"},
		{Index: 1, Process: 0, Type: histories.OK, F: "reserve", OpID: "r1", Value: json.RawMessage(`{"applied":true}`)},
		{Index: 2, Process: 1, Type: histories.Invoke, F: "read", OpID: "final"},
		{Index: 3, Process: 1, Type: histories.OK, F: "read", OpID: "final", Value: json.RawMessage(`{"r1":1}`)},
	}
	r, err := CheckModels(context.Background(), ops, []Part{
		{Name: "reservations", Model: ExactlyOnceModel, Functions: map[string]string{"reserve": "apply", "read": "read"}},
		{Name: "visits", Model: "counter", Params: map[string]json.RawMessage{"before": json.RawMessage("0")}, Functions: map[string]string{"visit": "increment"}},
	}, Options{})
	if err != nil || r.Verdict != Unknown {
		t.Fatalf("got %v %v: %s", r.Verdict, err, r.Summary)
	}
}

func TestModelsMalformed(t *testing.T) {
	for name, params := range map[string]string{
		"no list":       `{}`,
		"empty":         `{"models":[]}`,
		"nameless":      `{"models":[{"model":"budget"}]}`,
		"twice":         `{"models":[{"name":"a","model":"counter"},{"name":"a","model":"counter"}]}`,
		"nested":        `{"models":[{"name":"a","model":"models"}]}`,
		"no model":      `{"models":[{"name":"a"}]}`,
		"unknown model": `{"models":[{"name":"a","model":"nope","functions":{"x":"y"}}]}`,
		"part's params": `{"models":[{"name":"a","model":"budget","functions":{"decrement":"decrement"}}]}`,
	} {
		var p map[string]json.RawMessage
		if err := json.Unmarshal([]byte(params), &p); err != nil {
			t.Fatal(err)
		}
		h := &histories.Header{Model: ModelsModel, Params: p}
		ops := []histories.Op{{Index: 0, Process: 0, Type: histories.Invoke, F: "decrement"}, {Index: 1, Process: 0, Type: histories.Info, F: "decrement"}}
		if _, err := Check(context.Background(), h, ops, Options{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
