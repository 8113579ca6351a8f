package main

import (
	"strings"
	"testing"
)

// TestCheckRefusesAJSONKeyTwice: an event line that gives one of its fields twice
// (an ok that says "type" again as fail, "Type" beside "type", which encoding/json
// matches to the same field) and a header that gives a key twice (a second model, a
// second budget in params) are refused at their line: encoding/json kept the last
// silently, and the verdict followed whichever came last.
func TestCheckRefusesAJSONKeyTwice(t *testing.T) {
	header := `{"header":{"format":"indoubt-history/1","workload":"budget","model":"budget","params":{"budget":3}}}`
	invoke0 := `{"index":0,"time":1,"process":0,"type":"invoke","f":"decrement","op_id":"0-0"}`
	ok1 := `{"index":1,"time":2,"process":0,"type":"ok","f":"decrement","op_id":"0-0","value":{"applied":true,"balance":2}}`
	for _, tc := range []struct{ name, history, want string }{
		{"type twice", header + "\n" + invoke0 + "\n" + strings.Replace(ok1, `"type":"ok"`, `"type":"ok","type":"fail"`, 1), `line 3: malformed event: key "type" twice in one object`},
		{"type in another case", header + "\n" + invoke0 + "\n" + strings.Replace(ok1, `"f":`, `"Type":"fail","f":`, 1), `line 3: malformed event: key "Type" twice in one object`},
		{"model twice", strings.Replace(header, `"model":"budget"`, `"model":"budget","model":"register"`, 1) + "\n" + invoke0 + "\n" + ok1, `line 1: malformed header: key "model" twice in one object`},
		{"budget twice", strings.Replace(header, `"budget":3`, `"budget":3,"budget":100`, 1) + "\n" + invoke0 + "\n" + ok1, `line 1: malformed header: key "budget" twice in one object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "h.jsonl", tc.history+"\n")
			wantRefused(t, "h.jsonl "+tc.want, "check", path)
		})
	}
	// The same lines with each key once are read, and valid.
	path := writeFile(t, "h.jsonl", header+"\n"+invoke0+"\n"+ok1+"\n")
	if code, out, errs := invoke(t, "check", path); code != 0 {
		t.Errorf("the history without a key twice: exit %d, %s%s", code, out, errs)
	}
}
