package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/indoubt/indoubt/histories"
)

// ExactlyOnceResponseModel names the exactly-once model that also judges responses: a
// retry that finds its effect already applied must answer with the response the first
// application produced (the same order id), not a new one.
//
//	apply  invoke with op_id, as for ExactlyOnceModel; ok {"response":R}, R any JSON:
//	       what the client was answered
//	read   invoke, then ok with an ExactlyOnceResponses: every op id present, with the
//	       response stored with each of its effects, {"3-41":["order-17"],...}
//
// The counts are those of the exactly-once model (an op id present n times is the
// length of its list), judged the same way. Then every acknowledged apply of an op id
// present in the last final read must have been answered with one of the responses
// stored with it: anomaly kind "response-mismatch" otherwise. Responses compare as
// JSON values, their bytes compacted: "17" and 17 differ.
const ExactlyOnceResponseModel = "exactly-once-response"

// ExactlyOnceResponses is the final state of an ExactlyOnceResponseModel history: for
// each op id present, the response stored with each of its effects.
type ExactlyOnceResponses map[string][]json.RawMessage

// CheckExactlyOnceResponse decides an ExactlyOnceResponseModel history: the checks of
// CheckExactlyOnce on the counts, and the responses of the acknowledged applies held
// to those stored (anomaly kind response-mismatch). Its errors are those of
// CheckExactlyOnce, and an ok apply whose value has no response.
func CheckExactlyOnceResponse(ctx context.Context, ops []histories.Op) (Result, error) {
	counted := make([]histories.Op, len(ops))
	var last ExactlyOnceResponses
	for i, op := range ops {
		counted[i] = op
		if !op.IsClient() || op.Type != histories.OK || op.F != "read" {
			continue
		}
		var st ExactlyOnceResponses
		if err := json.Unmarshal(op.Value, &st); err != nil || st == nil {
			return Result{}, fmt.Errorf("history index %d: read value %q is not an object of op id to the responses stored with its effects: %v", op.Index, op.Value, err)
		}
		counts := ExactlyOnceState{}
		for id, rs := range st {
			counts[id] = int64(len(rs))
		}
		counted[i].Value = histories.Value(counts)
		last = st
	}
	res, err := CheckExactlyOnce(ctx, counted)
	if err != nil || res.Verdict == Unknown && ctx.Err() != nil {
		return res, err
	}
	res.Checker = ExactlyOnceResponseModel
	var mismatches []Anomaly
	for _, op := range ops {
		if !op.IsClient() || op.Type != histories.OK || op.F != "apply" {
			continue
		}
		var v struct {
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal(op.Value, &v); err != nil || v.Response == nil {
			return Result{}, fmt.Errorf("history index %d: ok apply value %q has no response: an %s apply is acknowledged with {\"response\":...}", op.Index, op.Value, ExactlyOnceResponseModel)
		}
		stored, present := last[op.OpID]
		if !present || slices.ContainsFunc(stored, func(s json.RawMessage) bool { return sameJSON(s, v.Response) }) {
			continue
		}
		var shown []string
		for _, s := range stored {
			shown = append(shown, string(compact(s)))
		}
		mismatches = append(mismatches, Anomaly{Kind: "response-mismatch", Ops: []int64{op.Index}, Explanation: fmt.Sprintf(
			"op id %s was acknowledged with response %s, but the final state holds its effect with %s: a retry answered with something other than the original response",
			op.OpID, compact(v.Response), strings.Join(shown, ", "))})
	}
	if len(mismatches) == 0 {
		return res, nil
	}
	res.Anomalies = append(res.Anomalies, mismatches...)
	if res.Verdict == Valid {
		res.Summary = fmt.Sprintf("responses differ (%d response-mismatch): %s", len(mismatches), mismatches[0].Explanation)
	} else {
		res.Summary += fmt.Sprintf("; and %d response-mismatch", len(mismatches))
	}
	res.Verdict = Invalid
	if raw, ok := res.Details["anomalies"]; ok {
		var n int
		json.Unmarshal(raw, &n)
		res.Details["anomalies"] = histories.Value(n + len(mismatches))
	}
	return res, nil
}

func compact(v json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return v
	}
	return b.Bytes()
}

func sameJSON(a, b json.RawMessage) bool { return bytes.Equal(compact(a), compact(b)) }
