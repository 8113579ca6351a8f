package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCleanRelativeDirEndsItsServer: `indoubt clean --dir RELATIVE`, run as the binary
// from the directory the relative path starts at, resolves the path first, so that a
// leftover's server still working in it (its parent-death signal failed) is known by
// the absolute directory it works in: the server is ended and the directory removed.
// Read relative, the directory was removed and its server left running in it.
func TestCleanRelativeDirEndsItsServer(t *testing.T) {
	root := t.TempDir()
	parent := filepath.Join(root, "servers")
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(parent, fmt.Sprintf("indoubt-redis-%d-leftover", gone.Process.Pid))
	for _, d := range []string{dir, filepath.Join(root, "runs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The server: a process working in the directory, in a process group of its own.
	server := exec.Command("sleep", "600")
	server.Dir = dir
	server.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- server.Wait() }()
	defer func() { _ = server.Process.Kill() }()
	// The marker a launch writes (internal/servers' owner file): a launcher gone, the
	// server it tracked.
	marker, err := json.Marshal(map[string]any{"pid": gone.Process.Pid, "start": 1, "server": server.Process.Pid, "server_start": procStart(t, server.Process.Pid)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".indoubt-owner"), marker, 0o644); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestRunAsBinary$")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "INDOUBT_TEST_ARGS="+strings.Join([]string{"clean", "--dir", "servers", "--out", "runs"}, "\x1f"))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("indoubt clean --dir servers: %v; stdout %q, stderr %q", err, out.String(), errb.String())
	}
	want := "removed " + dir + " ("
	if !strings.HasPrefix(out.String(), want) || !strings.Contains(out.String(), fmt.Sprintf("server pid %d still running", server.Process.Pid)) {
		t.Errorf("stdout %q; want %q... naming server pid %d", out.String(), want, server.Process.Pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s after clean: %v", dir, err)
	}
	// Ended by clean: the wait below only bounds a test that would otherwise hang.
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("server %d still running in the removed %s", server.Process.Pid, dir)
	}
}

// procStart is the start time of process pid, in clock ticks since boot: field 22 of
// /proc/PID/stat.
func procStart(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
