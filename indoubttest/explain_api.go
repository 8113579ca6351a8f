package indoubttest

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/indoubt/indoubt/checker"
	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
)

// apiNotes says, for each request an API proxy cut (toxics.HTTP, HTTP2) whose
// Idempotency-Key is an operation's id, what became of it, when the history proves it:
// handled more than once, by the final state's count for the key; or answered from the
// key's stored response, by the client's ok value with "replayed": true. Keys the proof
// does not reach get no sentence.
func apiNotes(ops []histories.Op, events []toxics.Event) []string {
	final := finalState(ops)
	replayed := map[string]bool{}
	for _, op := range ops {
		if op.Type != histories.OK || op.OpID == "" {
			continue
		}
		var v struct {
			Replayed bool `json:"replayed"`
		}
		if json.Unmarshal(op.Value, &v) == nil && v.Replayed {
			replayed[op.OpID] = true
		}
	}
	cuts := map[string][]*toxics.Request{}
	var keys []string
	for _, e := range events {
		r := e.Request
		if e.Kind != toxics.CommitCut || r == nil || r.IdempotencyKey == "" {
			continue
		}
		if cuts[r.IdempotencyKey] == nil {
			keys = append(keys, r.IdempotencyKey)
		}
		cuts[r.IdempotencyKey] = append(cuts[r.IdempotencyKey], r)
	}
	var out []string
	for _, k := range keys {
		r := cuts[k][0]
		cut := fmt.Sprintf("its first response was cut after the service answered %d", r.Status)
		if n := len(cuts[k]); n > 1 {
			cut = fmt.Sprintf("%d of its responses were cut, the first after the service answered %d", n, r.Status)
		}
		switch n := final[k]; {
		case n >= 2:
			out = append(out, fmt.Sprintf("request %s was handled %s: %s (%s %s)", k, times(n), cut, r.Method, r.Path))
		case replayed[k]:
			out = append(out, fmt.Sprintf("request %s: %s; the retry was answered from the key's stored response (a replay)", k, cut))
		}
	}
	sort.Strings(out)
	return out
}

// finalState is the count per op id of the last ok read of an exactly-once state, nil
// when there is none.
func finalState(ops []histories.Op) checker.ExactlyOnceState {
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		if op.Type != histories.OK || op.F != "read" {
			continue
		}
		var s checker.ExactlyOnceState
		if json.Unmarshal(op.Value, &s) == nil {
			return s
		}
	}
	return nil
}

func times(n int64) string {
	if n == 2 {
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
