package runner

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/indoubt/indoubt/faults/toxics"
	"github.com/indoubt/indoubt/internal/rundir"
)

// TestNemesisWriteFailureIsKept: a fault event that cannot be written to faults.jsonl
// (a full disk) is not dropped in silence: flush returns the error, and the run fails
// with it (runIn) rather than publish evidence with a hole in it.
func TestNemesisWriteFailureIsKept(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	n := &nemesis{w: rundir.NewFaultWriter(f), byKind: map[string]int64{}}
	defer f.Close()
	for range 3 {
		n.onEvent(toxics.Event{Time: time.Now(), Conn: "127.0.0.1:5", Kind: toxics.CommitCut, Truth: toxics.Applied, Statement: "commit"})
	}
	if n.byKind["commit-cut"] != 3 {
		t.Errorf("counted %v, want the 3 events", n.byKind)
	}
	if err := n.flush(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("flush: %v, want the disk's ENOSPC", err)
	}
	if err := (*nemesis)(nil).flush(); err != nil {
		t.Errorf("a run without a nemesis: %v", err)
	}
}
