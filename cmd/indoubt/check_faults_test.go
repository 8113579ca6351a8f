package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// blackBoxFiles writes a history as another program would record it (Unix-nanosecond
// times, the client's local address on each line, no final read) and the proxy's
// events for it: payment p-1 was cut after its INSERT committed, and the client
// retried it on a fresh connection; p-2 went through.
func blackBoxFiles(t *testing.T) (history, faults string) {
	t.Helper()
	dir := t.TempDir()
	history = filepath.Join(dir, "history.jsonl")
	faults = filepath.Join(dir, "faults.jsonl")
	h := `{"header":{"format":"indoubt-history/1","workload":"payments","model":"exactly-once","store":"postgres","seed":0}}
{"index":0,"time":1796000000000000100,"process":0,"type":"invoke","f":"apply","op_id":"p-1","conn":"127.0.0.1:50001"}
{"index":1,"time":1796000000000000300,"process":0,"type":"ok","f":"apply","op_id":"p-1","conn":"127.0.0.1:50002","attempt":2}
{"index":2,"time":1796000000000000400,"process":0,"type":"invoke","f":"apply","op_id":"p-2","conn":"127.0.0.1:50002"}
{"index":3,"time":1796000000000000500,"process":0,"type":"ok","f":"apply","op_id":"p-2","conn":"127.0.0.1:50002","attempt":1}
`
	f := `{"time":"2026-11-30T00:53:20.000000150Z","conn":"127.0.0.1:50001","conn_index":0,"protocol":"postgres","kind":"commit-cut","truth":"applied","statement":"INSERT INTO payments (tag, amount) VALUES ('p-1', 1);","tag":"INSERT 0 1"}
`
	if err := os.WriteFile(history, []byte(h), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(faults, []byte(f), 0o644); err != nil {
		t.Fatal(err)
	}
	return history, faults
}

// TestCheckFaultsAndFinal checks a black-box history with the final state from
// --final and the proxy's events from --faults: the duplicate is named with the
// proxy's proof, in text and in JSON; the right final state is valid, with the same
// ground truth printed beside it.
func TestCheckFaultsAndFinal(t *testing.T) {
	history, faults := blackBoxFiles(t)
	dir := filepath.Dir(history)
	dup := filepath.Join(dir, "dup.json")
	once := filepath.Join(dir, "once.json")
	os.WriteFile(dup, []byte(`{"p-1":2,"p-2":1}`), 0o644)
	os.WriteFile(once, []byte(`{"p-1":1,"p-2":1}`), 0o644)

	code, out, errs := invoke(t, "check", "--final", dup, "--faults", faults, history)
	if code != 1 {
		t.Fatalf("exit %d, want 1: %s%s", code, out, errs)
	}
	for _, want := range []string{
		"duplicate: op id p-1 is present twice",
		"    the proxy: operation p-1 (invoked at history event 0) is present 2 times in the final state: it took effect 2 times",
		"ground truth (" + faults + "): 1 fault events, 1 joined",
		"commit faults: 1 cut after the server committed (1 changed rows, 0 changed nothing",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	code, out, _ = invoke(t, "check", "--json", "--final", dup, "--faults", faults, history)
	var res struct {
		Verdict     string
		Anomalies   []struct{ Kind string }
		GroundTruth struct {
			Evidence struct {
				AppliedTwice []struct {
					OpID string `json:"op_id"`
				} `json:"applied_twice"`
			}
			Commits struct {
				ChangedRows int64 `json:"changed_rows"`
			}
		} `json:"ground_truth"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if code != 1 || res.Verdict != "invalid" || len(res.GroundTruth.Evidence.AppliedTwice) != 1 || res.GroundTruth.Evidence.AppliedTwice[0].OpID != "p-1" || res.GroundTruth.Commits.ChangedRows != 1 {
		t.Errorf("json: exit %d %+v", code, res)
	}

	// With a final state that holds p-1 once, the history is valid, and the proxy's
	// cut of p-1's committed INSERT is a commit its acknowledged retry did not repeat:
	// a replay, never called a second application.
	code, out, errs = invoke(t, "check", "--final", once, "--faults", faults, history)
	if code != 0 || !strings.Contains(out, "replayed: 1 operations") || strings.Contains(out, "applied more than once") || strings.Contains(out, "took effect 2 times") {
		t.Errorf("exit %d: %s%s", code, out, errs)
	}
}

// TestCheckFaultsRefuses lists the inputs --faults and --final refuse with one line
// and exit 3.
func TestCheckFaultsRefuses(t *testing.T) {
	history, faults := blackBoxFiles(t)
	dir := filepath.Dir(history)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"p-1":`), 0o644)
	garbage := filepath.Join(dir, "garbage.jsonl")
	os.WriteFile(garbage, []byte("not json\n"), 0o644)
	relative := filepath.Join(dir, "relative.jsonl")
	b, _ := os.ReadFile(history)
	os.WriteFile(relative, []byte(strings.ReplaceAll(string(b), `"time":17960000000000`, `"time":`)), 0o644)
	for _, args := range [][]string{
		{"check", "--final", bad, history},
		{"check", "--final", filepath.Join(dir, "missing.json"), history},
		{"check", "--faults", garbage, history},
		{"check", "--faults", filepath.Join(dir, "missing.jsonl"), history},
		{"check", "--final", filepath.Join(dir, "garbage.jsonl"), history},
		{"check", "--faults", faults, relative},
		{"check", history}, // no final read, no --final
	} {
		code, out, errs := invoke(t, args...)
		if code != 3 || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}
