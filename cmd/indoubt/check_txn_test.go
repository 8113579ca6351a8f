package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeSkew is a list-append history of write skew: valid under snapshot isolation,
// G2-item under serializability.
const writeSkew = `{"header":{"format":"indoubt-history/1","workload":"list-append","model":"list-append","seed":1}}
{"index":0,"time":0,"process":0,"type":"invoke","f":"txn","value":[["r","x",null],["r","y",null],["append","x",1]]}
{"index":1,"time":1,"process":1,"type":"invoke","f":"txn","value":[["r","x",null],["r","y",null],["append","y",1]]}
{"index":2,"time":2,"process":0,"type":"ok","f":"txn","value":[["r","x",[]],["r","y",[]],["append","x",1]]}
{"index":3,"time":3,"process":1,"type":"ok","f":"txn","value":[["r","x",[]],["r","y",[]],["append","y",1]]}
{"index":4,"time":4,"process":2,"type":"invoke","f":"txn","value":[["r","x",null],["r","y",null]]}
{"index":5,"time":5,"process":2,"type":"ok","f":"txn","value":[["r","x",[1]],["r","y",[1]]]}
`

// TestCheckTxn runs indoubt check on transactional histories: the models asked for
// decide the exit code, the cycle prints one line per edge, Jepsen EDN with keyword
// micro-ops reads the same, and bad options are refused before the history is read.
func TestCheckTxn(t *testing.T) {
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "skew.jsonl")
	if err := os.WriteFile(jsonl, []byte(writeSkew), 0o644); err != nil {
		t.Fatal(err)
	}
	edn := filepath.Join(dir, "skew.edn")
	if err := os.WriteFile(edn, []byte(`{:index 0, :type :invoke, :process 0, :f :txn, :value [[:r :x nil] [:r :y nil] [:append :x 1]]}
{:index 1, :type :invoke, :process 1, :f :txn, :value [[:r :x nil] [:r :y nil] [:append :y 1]]}
{:index 2, :type :ok, :process 0, :f :txn, :value [[:r :x []] [:r :y []] [:append :x 1]]}
{:index 3, :type :ok, :process 1, :f :txn, :value [[:r :x []] [:r :y []] [:append :y 1]]}
{:index 4, :type :invoke, :process 2, :f :txn, :value [[:r :x nil] [:r :y nil]]}
{:index 5, :type :ok, :process 2, :f :txn, :value [[:r :x [1]] [:r :y [1]]]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"snapshot isolation holds", []string{"--consistency-models", "snapshot-isolation", jsonl}, 0, []string{"valid (list-append)", "not complete for this model: snapshot-isolation", "appends that no read saw not searched"}},
		{"serializable does not", []string{"--consistency-models", "serializable,snapshot-isolation", jsonl}, 1,
			[]string{"violates repeatable-read", "G2-item: a cycle of 2 transactions", "\n    T1 < T2: T1 read key y = []"}},
		{"default is strict serializability", []string{jsonl}, 1, []string{"G2-item 1"}},
		{"EDN", []string{"--format", "jepsen-edn", "--model", "list-append", edn}, 1, []string{"G2-item 1"}},
		{"anomalies alone", []string{"--anomalies", "G1", jsonl}, 0, []string{"valid"}},
		{"unknown model", []string{"--consistency-models", "serialisable", jsonl}, 3, nil},
		{"unknown anomaly", []string{"--anomalies", "G3", jsonl}, 3, nil},
		{"wrong model for the history", []string{"--model", "rw-register", jsonl}, 3, nil},
		{"version-order search out of steps", []string{"--order-search-steps", "1", "--consistency-models", "serializable", filepath.Join("..", "..", "checker", "testdata", "txn-search", "write-skew.jsonl")}, 2,
			[]string{"unknown (rw-register)", "ran out of steps (--order-search-steps 1 for each region"}},
		{"negative steps", []string{"--order-search-steps", "-1", jsonl}, 3, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"check"}, c.args...), &out, &errb)
			code := exitCode(err, &errb)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, c.code, out.String(), errb.String())
			}
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if c.code == 3 && (strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 || errb.Len() == 0) {
				t.Errorf("want one line on stderr, got %q", errb.String())
			}
		})
	}
}
