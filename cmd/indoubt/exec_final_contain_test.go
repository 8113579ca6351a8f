package main

import (
	"path/filepath"
	"testing"
)

// TestExecFinalCmdContainsWhatItStarts: what --final-cmd starts in a new session or a
// process group of its own ends with it (the command ran in a process group only, and a
// setsid daemon outlived indoubt, holding the command's output open until the wait gave
// up: "WaitDelay expired before I/O complete"); the final read it printed is used.
func TestExecFinalCmdContainsWhatItStarts(t *testing.T) {
	pids := filepath.Join(t.TempDir(), "pids")
	prog := script(t, "ev invoke apply 0 p-1\nev ok apply 0 p-1\n")
	code, stdout, stderr := invoke(t, execArgsFor(t.TempDir(), "--final-cmd", escapees(pids)+`echo '{"p-1":1}'`, "--", prog)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	waitGone(t, "after --final-cmd ended", readPids(t, pids)...)
}
