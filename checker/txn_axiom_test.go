package checker

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// axGolden is the weakest axiomatic level each history of testdata/txn-axiomatic
// violates, 0 for none: a history with one planted anomaly, written to Biswas and
// Enea's axioms.
var axGolden = map[string]axLevel{
	"aborted-read":        axRC,
	"intermediate-read":   axRC,
	"write-read-cycle":    axRC,
	"never-written":       axRC,
	"read-skew-in-txn":    axRC,
	"fractured-read":      axRA,
	"non-repeatable-read": axRA,
	"fractured-read-so":   axRA,
	"causality-so":        axCC,
	"causality-wr-chain":  axCC,
	"long-fork":           0,
	"lost-update":         0,
	"write-skew":          0,
}

// TestAxiomGolden checks each golden history at every axiomatic level, by its
// axiomatic name and by the name that includes it: invalid at the level it violates
// and every stronger one (strict-serializable among them), valid at the weaker ones.
func TestAxiomGolden(t *testing.T) {
	for name, weakest := range axGolden {
		t.Run(name, func(t *testing.T) {
			h, ops, err := histories.ReadFile(filepath.Join("testdata", "txn-axiomatic", name+".jsonl"), false)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []axLevel{axRC, axRA, axCC} {
				want := Valid
				if weakest != 0 && l >= weakest {
					want = Invalid
				}
				named := map[axLevel]string{axRC: "read-committed", axRA: "read-atomic", axCC: "causal"}[l]
				for _, m := range []string{l.model(), named} {
					r, err := Check(context.Background(), h, ops, Options{Txn: TxnOptions{ConsistencyModels: []string{m}}})
					if err != nil {
						t.Fatal(err)
					}
					if r.Verdict != want {
						t.Errorf("%s: %s, want %s: %s\n%v", m, r.Verdict, want, r.Summary, r.Anomalies)
					}
				}
			}
			if weakest != 0 {
				r, err := Check(context.Background(), h, ops, Options{Txn: TxnOptions{ConsistencyModels: []string{"strict-serializable"}}})
				if err != nil {
					t.Fatal(err)
				}
				if r.Verdict != Invalid {
					t.Errorf("strict-serializable: %s, want invalid: %s", r.Verdict, r.Summary)
				}
			}
		})
	}
}
