package checker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// ModelsModel names a history held to several models at once, in a history's header
// and in Options.Model: a service's operation often has more than one promise to keep
// (a reservation made exactly once, and the stock it takes conserved). Its header's
// params hold "models", a list of Part: each a name, a model of its own with its own
// params, and which of the history's functions it reads under which of its names.
//
//	{"model":"models","params":{"models":[
//	  {"name":"stock","model":"budget","params":{"budget":10,"amounts":true},
//	   "functions":{"reserve":"decrement","read":"read"}},
//	  {"name":"reservations","model":"exactly-once",
//	   "functions":{"reserve":"apply","read":"read"}}]}}
//
// Each part sees the history's events whose function it maps, renamed, and nemesis
// events; every other event is not its business. A value that is a JSON object with
// the part's name as a key gives the part that member ({"stock":{"balance":3},
// "reservations":{"0-1":1}} for a final read); any other value is given whole to every
// part (a reserve's {"applied":true}, which exactly-once does not read). Each part is
// checked as a history of its own model; the verdict is the worst of theirs (invalid,
// then unknown, then valid), the anomalies are all of theirs, each explanation led by
// its part's name, Details["models"] holds each part's PartResult, and the summary
// gives the deciding part's summary, then the other parts' verdicts.
const ModelsModel = "models"

// Part is one model of a ModelsModel history.
type Part struct {
	// Name names the part in its verdict and anomalies, and is the key of its member in
	// a value that holds one per part.
	Name string `json:"name"`
	// Model is the part's model (any model Check knows but ModelsModel) and Params its
	// header params.
	Model  string                     `json:"model"`
	Params map[string]json.RawMessage `json:"params,omitempty"`
	// Functions maps the history's functions to the model's ("reserve" -> "apply"). A
	// function the map does not name is left out of the part's view. Nil: every
	// function, under its own name.
	Functions map[string]string `json:"functions,omitempty"`
}

// PartResult is one part's judgement, in a ModelsModel Result's Details["models"].
type PartResult struct {
	Name    string  `json:"name"`
	Model   string  `json:"model"`
	Verdict Verdict `json:"verdict"`
	Summary string  `json:"summary"`
	// Anomalies is how many anomalies the part's checker found.
	Anomalies int `json:"anomalies"`
	// Details are the part's checker's figures.
	Details map[string]json.RawMessage `json:"details,omitempty"`
}

// ModelsParams returns the header params of a ModelsModel history of parts.
func ModelsParams(parts ...Part) map[string]json.RawMessage {
	return map[string]json.RawMessage{"models": histories.Value(parts)}
}

// modelsFromHeader reads the parts of a ModelsModel history's header and checks them.
func modelsFromHeader(h *histories.Header) ([]Part, error) {
	if h == nil {
		return nil, errors.New("models history: no header to read params.models from")
	}
	raw, ok := h.Params["models"]
	if !ok {
		return nil, errors.New("models history: header has no params.models (a list of {name, model, params, functions})")
	}
	var parts []Part
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) == 0 {
		return nil, fmt.Errorf("models history: params.models %s is not a list of {name, model, params, functions} (%v)", short(raw), err)
	}
	seen := map[string]bool{}
	for i, p := range parts {
		switch {
		case p.Name == "":
			return nil, fmt.Errorf("models history: params.models[%d] has no name", i)
		case seen[p.Name]:
			return nil, fmt.Errorf("models history: params.models[%d]: name %q given twice", i, p.Name)
		case p.Model == ModelsModel:
			return nil, fmt.Errorf("models history: params.models[%d] (%s): a part cannot itself be %s", i, p.Name, ModelsModel)
		case p.Model == "":
			return nil, fmt.Errorf("models history: params.models[%d] (%s) names no model", i, p.Name)
		}
		seen[p.Name] = true
	}
	return parts, nil
}

func short(b []byte) string {
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// View is the history p sees: nemesis events, and the client events whose function p
// maps, renamed, each value narrowed to p's member where it is an object that has
// one. ops is not changed.
func (p Part) View(ops []histories.Op) []histories.Op {
	out := make([]histories.Op, 0, len(ops))
	for _, op := range ops {
		if !op.IsClient() {
			out = append(out, op)
			continue
		}
		if p.Functions != nil {
			f, ok := p.Functions[op.F]
			if !ok {
				continue
			}
			op.F = f
		}
		op.Value = p.member(op.Value)
		out = append(out, op)
	}
	return out
}

// member is p's member of v, when v is an object that has one; else v.
func (p Part) member(v json.RawMessage) json.RawMessage {
	if t := strings.TrimSpace(string(v)); !strings.HasPrefix(t, "{") {
		return v
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(v, &m) != nil {
		return v
	}
	if mv, ok := m[p.Name]; ok {
		return mv
	}
	return v
}

// CheckModels holds ops to every part, each as a history of its own model (see
// ModelsModel), and joins their results: the worst verdict, every anomaly led by its
// part's name, Details["models"] the parts' PartResults in order, and a summary led by
// the part that decided the verdict. opt applies to every part (its Model and Final excepted: a
// final state is appended to ops before the parts see it). The error names the part
// whose history cannot be checked.
func CheckModels(ctx context.Context, ops []histories.Op, parts []Part, opt Options) (Result, error) {
	if opt.Final != nil {
		ops = WithFinalRead(ops, opt.Final)
	}
	sub := opt
	sub.Model, sub.Final, sub.Budget, sub.Initial, sub.VisualizePath, sub.bounds = "", nil, nil, nil, "", nil
	res := Result{Checker: ModelsModel, Verdict: Valid, Anomalies: []Anomaly{}}
	var each []PartResult
	found := 0
	for _, p := range parts {
		h := &histories.Header{Format: histories.FormatV1, Model: p.Model, Params: p.Params}
		r, err := Check(ctx, h, p.View(ops), sub)
		if err != nil {
			return Result{}, fmt.Errorf("%s (%s): %w", p.Name, p.Model, err)
		}
		n := AnomalyCount(r)
		found += n
		each = append(each, PartResult{Name: p.Name, Model: p.Model, Verdict: r.Verdict, Summary: r.Summary, Anomalies: n, Details: r.Details})
		res.Verdict = worse(res.Verdict, r.Verdict)
		for _, a := range r.Anomalies {
			a.Explanation = p.Name + ": " + a.Explanation
			res.Anomalies = append(res.Anomalies, a)
		}
	}
	// The part that decided the verdict leads, in full; the others by their verdicts.
	lead := 0
	for i, p := range each {
		if p.Verdict == res.Verdict {
			lead = i
			break
		}
	}
	clauses := []string{fmt.Sprintf("%s (%s) %s: %s", each[lead].Name, each[lead].Model, each[lead].Verdict, each[lead].Summary)}
	for i, p := range each {
		if i != lead {
			clauses = append(clauses, fmt.Sprintf("%s (%s) %s", p.Name, p.Model, p.Verdict))
		}
	}
	res.Summary = strings.Join(clauses, "; ")
	res.Details = map[string]json.RawMessage{"models": histories.Value(each), "anomalies": histories.Value(found)}
	return res, nil
}

// worse is the worse of two verdicts: invalid, then unknown, then valid.
func worse(a, b Verdict) Verdict {
	rank := func(v Verdict) int {
		switch v {
		case Invalid:
			return 3
		case Unknown:
			return 2
		case Valid:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// AnomalyCount is how many anomalies r's checker found: its Details["anomalies"] when
// it counts them there (it may list fewer), else the anomalies listed.
func AnomalyCount(r Result) int {
	if raw, ok := r.Details["anomalies"]; ok {
		var n int
		if json.Unmarshal(raw, &n) == nil && n >= len(r.Anomalies) {
			return n
		}
	}
	return len(r.Anomalies)
}

// checkModelsModel is Check's case of ModelsModel.
func checkModelsModel(ctx context.Context, h *histories.Header, ops []histories.Op, opt Options) (Result, error) {
	parts, err := modelsFromHeader(h)
	if err != nil {
		return Result{}, err
	}
	return CheckModels(ctx, ops, parts, opt)
}
