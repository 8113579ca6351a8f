package checker

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

// TestTxnGolden checks every history under testdata/txn (one per anomaly class and
// per model boundary, each header naming its model and the consistency models it is
// checked for) against the .verdict beside it: the verdict, the anomaly types and the
// weakest models violated. -update rewrites them.
func TestTxnGolden(t *testing.T) {
	goldenWalk(t, "txn", func(t *testing.T, h *histories.Header, ops []histories.Op) (Result, string) {
		r, err := Check(context.Background(), h, ops, Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r, txnKinds(t, r)
	})
}

// txnKinds says a transactional Result's anomaly types and weakest violated models as
// a .verdict file writes them: "G2-item; not repeatable-read".
func txnKinds(t *testing.T, r Result) string {
	t.Helper()
	var types, not []string
	for name, into := range map[string]*[]string{"anomaly_types": &types, "not": &not} {
		if raw, ok := r.Details[name]; ok {
			if err := json.Unmarshal(raw, into); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(types) == 0 {
		return ""
	}
	s := strings.Join(types, " ")
	if len(not) > 0 {
		s += "; not " + strings.Join(not, " ")
	}
	return s
}
