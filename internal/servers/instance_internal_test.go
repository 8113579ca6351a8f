package servers

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A server that ignores its shutdown signal shows which signal Stop sent: with
// DiscardSignal and nothing kept, the discard signal ends it at once; kept, it is sent
// the shutdown signal, ignores it, and is killed when the grace runs out.
func TestStopSendsTheDiscardSignalOnlyWhenNothingIsKept(t *testing.T) {
	for _, keep := range []bool{false, true} {
		dir := t.TempDir()
		ready := filepath.Join(dir, "ready")
		proc, err := StartProcess("deaf", exec.Command("sh", "-c", `trap "" TERM; : >"$0"; while :; do sleep 1; done`, ready), Account{})
		if err != nil {
			t.Fatal(err)
		}
		s := &Instance{Name: "deaf", Keep: keep, dirs: []string{dir}, proc: proc,
			StopSignal: syscall.SIGTERM, StopGrace: 1500 * time.Millisecond, DiscardSignal: syscall.SIGKILL}
		// No signal before the shell has set its trap.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the shell never set its trap")
			}
		}
		err = s.Stop()
		switch {
		case !keep && err != nil:
			t.Errorf("not kept: stop = %v, want nil: SIGKILL was the signal asked for", err)
		case keep && (err == nil || !strings.Contains(err.Error(), "killed")):
			t.Errorf("kept: stop = %v, want the report that SIGTERM was ignored and the shell killed", err)
		}
		if err := syscall.Kill(proc.Pid(), 0); err == nil {
			t.Errorf("keep %v: pid %d alive after stop", keep, proc.Pid())
		}
	}
}
