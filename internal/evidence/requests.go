package evidence

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/histories"
)

// requestClaims says, for each API request whose response the proxy cut after the
// service answered (an event with a Request, a status and an Idempotency-Key that is an
// operation's id), what became of it, when the history proves it:
//
//   - "request K was handled twice: its first response was cut after the service
//     answered 201 (POST /payments)", when the final state holds K two or more times;
//   - "request K: its first response was cut after the service answered 201; the retry
//     was answered from the key's stored response (a replay)", when K's acknowledged
//     completion says "replayed": true and the final state, when the history has one,
//     holds K once.
//
// counts is the final state's count per op id (nil without one). A key neither proof
// reaches gets no sentence. The sentences are sorted, for a stable results.json.
func requestClaims(events []FaultEvent, ops []histories.Op, counts map[string]int64) []string {
	cuts := map[string][]*toxics.Request{}
	var keys []string
	for _, e := range events {
		r := e.Request
		if e.Kind != toxics.CommitCut.String() || e.Truth != toxics.Applied.String() || r == nil || r.IdempotencyKey == "" || r.Status == 0 {
			continue
		}
		if cuts[r.IdempotencyKey] == nil {
			keys = append(keys, r.IdempotencyKey)
		}
		cuts[r.IdempotencyKey] = append(cuts[r.IdempotencyKey], r)
	}
	if len(keys) == 0 {
		return nil
	}
	replayed := map[string]bool{}
	for _, op := range ops {
		if !op.IsClient() || op.Type != histories.OK || op.OpID == "" || cuts[op.OpID] == nil {
			continue
		}
		var v struct {
			Replayed bool `json:"replayed"`
		}
		if len(op.Value) > 0 && op.Value[0] == '{' && json.Unmarshal(op.Value, &v) == nil && v.Replayed {
			replayed[op.OpID] = true
		}
	}
	var out []string
	for _, k := range keys {
		r := cuts[k][0]
		cut := fmt.Sprintf("its first response was cut after the service answered %d", r.Status)
		if n := len(cuts[k]); n > 1 {
			cut = fmt.Sprintf("%d of its responses were cut, the first after the service answered %d", n, r.Status)
		}
		n, counted := counts[k]
		switch {
		case counted && n >= 2:
			out = append(out, fmt.Sprintf("request %s was handled %s: %s (%s %s)", k, timesWord(n), cut, r.Method, r.Path))
		case replayed[k] && (counts == nil || counted && n == 1):
			out = append(out, fmt.Sprintf("request %s: %s; the retry was answered from the key's stored response (a replay)", k, cut))
		}
	}
	slices.Sort(out)
	return out
}

// timesWord says n times in words: twice, 3 times.
func timesWord(n int64) string {
	if n == 2 {
		return "twice"
	}
	return fmt.Sprintf("%d times", n)
}
