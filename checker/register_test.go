package checker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/indoubt/indoubt/histories"
)

// registerOptionsFor reads the model and initial value from a history's header, as
// `indoubt check` does.
func registerOptionsFor(t *testing.T, h *histories.Header) RegisterOptions {
	t.Helper()
	var opt RegisterOptions
	if h == nil {
		return opt
	}
	opt.Model = h.Model
	if raw, ok := h.Params["initial"]; ok {
		var v int64
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatalf("header initial %s: %v", raw, err)
		}
		opt.Initial = &v
	}
	return opt
}

// TestRegisterGolden checks every history in testdata/register against the .verdict
// file beside it; the name of each file says what it must be, a second, independent
// statement of the verdict.
func TestRegisterGolden(t *testing.T) {
	goldenWalk(t, "register", func(t *testing.T, hdr *histories.Header, ops []histories.Op) (Result, string) {
		res, err := CheckRegister(context.Background(), ops, registerOptionsFor(t, hdr))
		if err != nil {
			t.Fatal(err)
		}
		name := t.Name()
		for _, v := range []Verdict{Valid, Invalid} {
			if strings.HasSuffix(name, "-"+v.String()) && res.Verdict != v {
				t.Errorf("verdict %v, the file name says %v: %s", res.Verdict, v, res.Summary)
			}
		}
		return res, anomalyKinds(res)
	})
}

func registerOps(t *testing.T, jsonl string) []histories.Op {
	t.Helper()
	r, err := histories.NewReader(strings.NewReader(jsonl), "test")
	if err != nil {
		t.Fatal(err)
	}
	ops, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func TestRegisterAnomalyNamesKeyAndOps(t *testing.T) {
	_, ops, err := histories.ReadFile(filepath.Join("testdata", "register", "keys-and-nemesis.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := CheckRegister(context.Background(), ops, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Invalid || len(res.Anomalies) != 1 {
		t.Fatalf("got %v with %d anomalies, want invalid with one", res.Verdict, len(res.Anomalies))
	}
	a := res.Anomalies[0]
	if !strings.HasPrefix(a.Explanation, "key b: read 1 by process 2 (events 12-13)") {
		t.Errorf("explanation %q does not start with the key and the stale read", a.Explanation)
	}
	// The stale read and the write that made it stale.
	for _, want := range []int64{8, 9, 12, 13} {
		found := false
		for _, i := range a.Ops {
			found = found || i == want
		}
		if !found {
			t.Errorf("anomaly ops %v lack event %d", a.Ops, want)
		}
	}
	var details struct {
		Keys        int      `json:"keys"`
		InvalidKeys []string `json:"invalid_keys"`
	}
	if err := json.Unmarshal(mustJSON(t, res.Details), &details); err != nil {
		t.Fatal(err)
	}
	if details.Keys != 2 || len(details.InvalidKeys) != 1 || details.InvalidKeys[0] != "b" {
		t.Errorf("details %+v, want 2 keys with b invalid", details)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRegisterModelErrors(t *testing.T) {
	for _, tc := range []struct {
		name, model, history, want string
	}{
		{"cas needs cas-register", RegisterModel,
			`{"index":0,"process":0,"type":"invoke","f":"cas","value":[1,2]}`, "cas needs model cas-register"},
		{"unknown model", "queue", "", "unknown model"},
		{"unknown function", "",
			`{"index":0,"process":0,"type":"invoke","f":"increment","value":1}`, `unknown register operation "increment"`},
		{"write of a string", "",
			`{"index":0,"process":0,"type":"invoke","f":"write","value":"x"}`, "write value"},
		{"cas of one integer", "",
			`{"index":0,"process":0,"type":"invoke","f":"cas","value":1}`, "not [from, to]"},
		{"read of a float", "",
			"{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"}\n{\"index\":1,\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"value\":1.5}", "read value"},
		{"completion without invocation", "",
			`{"index":4,"process":0,"type":"ok","f":"read","value":1}`, "history index 4: ok completion of process 0 without an open invocation"},
		{"two open operations", "",
			"{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"}\n{\"index\":1,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"}", "process 0 invokes while"},
		{"completion of another key", "",
			"{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\",\"key\":\"a\"}\n{\"index\":1,\"process\":0,\"type\":\"ok\",\"f\":\"read\",\"key\":\"b\",\"value\":1}", "does not match"},
		{"completion of another function", "",
			"{\"index\":0,\"process\":0,\"type\":\"invoke\",\"f\":\"read\"}\n{\"index\":1,\"process\":0,\"type\":\"ok\",\"f\":\"write\",\"value\":1}", "does not match"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Event by event, not through histories.Reader, which refuses some of
			// these at their line before a checker sees them.
			var ops []histories.Op
			for _, line := range strings.Split(tc.history, "\n") {
				if line == "" {
					continue
				}
				var op histories.Op
				if err := json.Unmarshal([]byte(line), &op); err != nil {
					t.Fatal(err)
				}
				ops = append(ops, op)
			}
			_, err := CheckRegister(context.Background(), ops, RegisterOptions{Model: tc.model})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestRegisterEDNNilReadCarriesNoInformation reads Knossos's convention end to end: a
// nil read in EDN is accepted whatever the register holds, while the same history from
// the log format, where nil means absent, is not linearizable.
func TestRegisterEDNNilReadCarriesNoInformation(t *testing.T) {
	edn := `[{:type :invoke, :f :write, :process 0, :value 3}
 {:type :ok, :f :write, :process 0, :value 3}
 {:type :invoke, :f :read, :process 1, :value nil}
 {:type :ok, :f :read, :process 1, :value nil}]`
	ops, err := histories.ReadJepsenEDN(strings.NewReader(edn), "nil.edn", histories.JepsenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := CheckRegister(context.Background(), ops, RegisterOptions{})
	if err != nil || res.Verdict != Valid {
		t.Fatalf("EDN: %v %v (%s), want valid", res.Verdict, err, res.Summary)
	}
	log := "INFO  jepsen.util - 0\t:invoke\t:write\t3\nINFO  jepsen.util - 0\t:ok\t:write\t3\n" +
		"INFO  jepsen.util - 1\t:invoke\t:read\tnil\nINFO  jepsen.util - 1\t:ok\t:read\tnil\n"
	ops, err = histories.ReadJepsenLog(strings.NewReader(log), "nil.log", histories.JepsenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err = CheckRegister(context.Background(), ops, RegisterOptions{})
	if err != nil || res.Verdict != Invalid {
		t.Fatalf("log: %v %v (%s), want invalid", res.Verdict, err, res.Summary)
	}
}

// TestRegisterEDNIndependentKeys checks Jepsen's independent [key value] tuples as keys.
func TestRegisterEDNIndependentKeys(t *testing.T) {
	edn := `{:type :invoke, :f :write, :process 0, :value [1 3]}
{:type :ok, :f :write, :process 0, :value [1 3]}
{:type :invoke, :f :cas, :process 0, :value [2 [3 4]]}
{:type :fail, :f :cas, :process 0, :value [2 [3 4]]}
{:type :invoke, :f :write, :process 2, :value [1 9]}
{:type :info, :f :write, :process 2, :value nil, :error :timeout}
{:type :invoke, :f :read, :process 1, :value [1 nil]}
{:type :ok, :f :read, :process 1, :value [1 3]}
{:type :invoke, :f :read, :process 1, :value [2 nil]}
{:type :ok, :f :read, :process 1, :value [2 3]}`
	ops, err := histories.ReadJepsenEDN(strings.NewReader(edn), "independent.edn", histories.JepsenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := CheckRegister(context.Background(), ops, RegisterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Key 1 holds 3; key 2 was never written, so reading 3 there is impossible.
	if res.Verdict != Invalid || len(res.Anomalies) != 1 || !strings.HasPrefix(res.Anomalies[0].Explanation, "key 2: read 3") {
		t.Fatalf("got %v %+v, want key 2 invalid", res.Verdict, res.Anomalies)
	}
}

// registerHardHistory is a history no search settles quickly: writers concurrent
// writes that all succeed, and a read concurrent with them all that returns a value
// none wrote. At each write's completion any subset of the others may have taken
// effect before it, so a search keeps exponentially many orders (porcupine its cache,
// the register search its configurations) before the read refuses them all. (Writes
// of unknown outcome do not make a history hard for the register search: it uses one
// only where a read needs it.)
func registerHardHistory(writers int) string {
	var b strings.Builder
	i := 0
	ev := func(format string, a ...any) {
		fmt.Fprintf(&b, `{"index":%d,`, i)
		fmt.Fprintf(&b, format, a...)
		b.WriteString("}\n")
		i++
	}
	ev(`"process":0,"type":"invoke","f":"read"`)
	for w := 1; w <= writers; w++ {
		ev(`"process":%d,"type":"invoke","f":"write","value":%d`, w, w)
	}
	for w := 1; w <= writers; w++ {
		ev(`"process":%d,"type":"ok","f":"write","value":%d`, w, w)
	}
	ev(`"process":0,"type":"ok","f":"read","value":-1`)
	return b.String()
}

func TestRegisterTimeoutIsUnknown(t *testing.T) {
	ops := registerOps(t, registerHardHistory(22))
	start := time.Now()
	res, err := CheckRegister(context.Background(), ops, RegisterOptions{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Unknown {
		t.Fatalf("verdict %v after %v (%s), want unknown", res.Verdict, time.Since(start), res.Summary)
	}
	if !strings.Contains(res.Summary, "timeout") {
		t.Errorf("summary %q does not mention the timeout", res.Summary)
	}
	// A small version of the same shape is decided, and invalid.
	small := registerOps(t, registerHardHistory(3))
	res, err = CheckRegister(context.Background(), small, RegisterOptions{Timeout: 10 * time.Second})
	if err != nil || res.Verdict != Invalid {
		t.Fatalf("small hard history: %v %v, want invalid", res.Verdict, err)
	}
}

func TestRegisterVisualization(t *testing.T) {
	_, ops, err := histories.ReadFile(filepath.Join("testdata", "register", "keys-and-nemesis.jsonl"), false)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	path := filepath.Join(t.TempDir(), "linearizability.html")
	res, err := CheckRegister(context.Background(), ops, RegisterOptions{Visualize: &page, VisualizePath: path})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Invalid {
		t.Fatalf("verdict %v, want invalid", res.Verdict)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(file, page.Bytes()) {
		t.Errorf("the file and the writer got different pages")
	}
	for _, want := range []string{"<html", `"Tag":"nemesis"`, `"Description":"partition"`, `"Description":"heal"`,
		"b: read 1", "a: write 1", "process 2, events 12-13"} {
		if !bytes.Contains(file, []byte(want)) {
			t.Errorf("visualization lacks %q", want)
		}
	}
	_, err = CheckRegister(context.Background(), ops, RegisterOptions{VisualizePath: filepath.Join(t.TempDir(), "missing", "x.html")})
	if err == nil {
		t.Errorf("writing into a missing folder succeeded")
	}
}

// TestRegisterStopsWhenCancelled cancels a search that would run for minutes: it must
// end within a second as unknown, saying it was interrupted.
func TestRegisterStopsWhenCancelled(t *testing.T) {
	ops := registerOps(t, registerHardHistory(22))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	res, err := Check(ctx, nil, ops, Options{Model: CASRegisterModel})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != Unknown || !strings.Contains(res.Summary, "interrupted") {
		t.Fatalf("verdict %v (%s), want unknown, interrupted", res.Verdict, res.Summary)
	}
	if took > 300*time.Millisecond+time.Second {
		t.Fatalf("the check took %v to notice the cancellation", took)
	}
}

// TestExactCheckersStopWhenCancelled: the exact checkers need no search, but a check
// asked for after its context ended still says it was interrupted.
func TestExactCheckersStopWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	budget, before := int64(3), int64(0)
	for _, model := range []string{"budget", "counter"} {
		res, err := Check(ctx, nil, nil, Options{Model: model, Budget: &budget, Initial: &before})
		if err != nil || res.Verdict != Unknown || !strings.Contains(res.Summary, "interrupted") {
			t.Errorf("%s: %v %q %v, want unknown, interrupted", model, res.Verdict, res.Summary, err)
		}
	}
}
