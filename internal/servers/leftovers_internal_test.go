package servers

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// leftover makes a directory in parent with the owner marker o.
func leftover(t *testing.T, parent, kind string, o owner) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "indoubt-"+kind+"-")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(o)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	st, _, err := processStart(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLeftoverJudgesOwnersAndServers checks who counts as gone (an exited pid, a pid now
// held by another process) and who does not (a live owner), that a server which
// survived its harness (as when the parent-death signal failed) is found and killed by
// Remove, and that a marker naming a process that does not work in the directory
// cannot get it killed.
func TestLeftoverJudgesOwnersAndServers(t *testing.T) {
	parent := t.TempDir()
	me := os.Getpid()
	myStart := startTime(t, me)

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	deadOwner := gone.Process.Pid

	live := leftover(t, parent, "live", owner{Pid: me, Start: myStart})
	reused := leftover(t, parent, "reused", owner{Pid: me, Start: myStart + 1})
	// The server claims to be this test process: alive, but not working in the dir.
	impostor := leftover(t, parent, "impostor", owner{Pid: deadOwner, Start: 1, Server: me, ServerStart: myStart})

	survivor := leftover(t, parent, "survivor", owner{Pid: deadOwner, Start: 1, Keep: true})
	sleep := exec.Command("sleep", "600")
	sleep.Dir = survivor
	sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	b, _ := json.Marshal(owner{Pid: deadOwner, Start: 1, Server: sleep.Process.Pid, ServerStart: startTime(t, sleep.Process.Pid), Keep: true})
	if err := os.WriteFile(filepath.Join(survivor, ownerFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// Not a leftover of ours: no marker.
	if err := os.Mkdir(filepath.Join(parent, "indoubt-nomarker"), 0o755); err != nil {
		t.Fatal(err)
	}

	left, err := FindLeftovers(parent)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Leftover{}
	for _, l := range left {
		got[l.Dir] = l
	}
	if _, ok := got[live]; ok || len(left) != 3 {
		t.Fatalf("FindLeftovers: %+v; want reused, impostor and survivor", left)
	}
	if l := got[reused]; l.Owner != me || l.Server != 0 {
		t.Errorf("reused pid: %+v", l)
	}
	if l := got[impostor]; l.Server != 0 {
		t.Errorf("impostor: %+v; want no server to kill", l)
	}
	if l := got[survivor]; l.Server != sleep.Process.Pid || !l.Kept {
		t.Errorf("survivor: %+v; want server %d, kept", l, sleep.Process.Pid)
	}

	// Launches leave kept directories alone.
	reapLeftovers(parent)
	if _, err := os.Stat(survivor); err != nil {
		t.Errorf("kept dir reaped by a launch: %v", err)
	}
	for _, d := range []string{reused, impostor} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s after reaping: %v, want it removed", d, err)
		}
	}

	if err := got[survivor].Remove(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- sleep.Wait() }()
	select {
	case <-done:
		if ws, ok := sleep.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("survivor ended %v, want killed", sleep.ProcessState)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the surviving server still runs after Remove")
	}
	if _, err := os.Stat(survivor); !os.IsNotExist(err) {
		t.Errorf("%s after Remove: %v", survivor, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live owner's dir: %v", err)
	}
}
