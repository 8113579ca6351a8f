package histories_test

import (
	"fmt"
	"testing"

	"github.com/indoubt/indoubt/histories"
)

func TestFinalReadID(t *testing.T) {
	for i := range 3 {
		id := histories.FinalReadID(i)
		if !histories.IsFinalReadID(id) {
			t.Errorf("IsFinalReadID(%q) = false for the id FinalReadID(%d) makes", id, i)
		}
	}
	for id, want := range map[string]bool{"final": true, "final-0": true, "final-12": true, "0-1": false, "finals": false, "": false, "x-final-0": false} {
		if got := histories.IsFinalReadID(id); got != want {
			t.Errorf("IsFinalReadID(%q) = %v, want %v", id, got, want)
		}
	}
	nem := histories.Op{Process: histories.Nemesis, OpID: "final-0"}
	if nem.IsFinalRead() {
		t.Errorf("a nemesis event is not a final read")
	}
	if op := (histories.Op{Process: 3, OpID: "final-0"}); !op.IsFinalRead() {
		t.Errorf("a client event with op id final-0 is a final read")
	}
}

func ExampleFinalReadID() {
	id := histories.FinalReadID(0)
	fmt.Println(id, histories.IsFinalReadID(id), histories.IsFinalReadID("3-41"))
	// Output: final-0 true false
}
