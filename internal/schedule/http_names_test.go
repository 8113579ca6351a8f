package schedule

import (
	"testing"

	"github.com/indoubt/indoubt/faults/toxics"
)

// TestAPIFaultNames: at an API layer the faults are written response-cut and
// request-drop; they are the commit faults commit-cut and commit-drop, windows, pins and
// all.
func TestAPIFaultNames(t *testing.T) {
	for _, tt := range []struct {
		spec, name string
		p          float64
		pin        *toxics.Pin
	}{
		{"response-cut:0.3@1s-2s", "commit-cut", 0.3, nil},
		{"Request_Drop:0.5", "commit-drop", 0.5, nil},
		{"response-cut@commit:3", "commit-cut", 1, &toxics.Pin{Kind: toxics.CommitCut, Point: 3}},
		{"request-drop@conn:1/txn:2", "commit-drop", 1, &toxics.Pin{Kind: toxics.CommitDrop, Conn: 1, Txn: 2}},
	} {
		f, err := ParseFault(tt.spec)
		if err != nil {
			t.Fatalf("%s: %v", tt.spec, err)
		}
		if f.Name != tt.name || f.P != tt.p || (tt.pin == nil) != (f.Pin == nil) || (tt.pin != nil && *f.Pin != *tt.pin) {
			t.Errorf("%s: parsed %+v (pin %v), want %s at %v pinned %v", tt.spec, f, f.Pin, tt.name, tt.p, tt.pin)
		}
	}
	if _, err := ParseFault("response-mixed:0.2"); err == nil {
		t.Errorf("an unknown API fault name parsed")
	}
}
