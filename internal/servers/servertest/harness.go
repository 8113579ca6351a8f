package servertest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The helpers below are for the tests of the launchers themselves: a server that must
// die with a harness killed by SIGKILL, a failed start that must leave nothing behind.

// ReachableDir returns a fresh directory, removed when the test ends, that a server's
// unprivileged account can enter: t.TempDir's parent is root-only, and a launcher
// refuses a parent its server cannot reach.
func ReachableDir(tb testing.TB) string {
	tb.Helper()
	d := tb.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return d
}

// Rerun starts this test binary again to run only the test named, with env added, and
// returns it and the first line it prints; the child is killed and reaped when the test
// ends. A test that kills its harness with SIGKILL runs the harness so: it launches in
// the child, which prints what the parent needs and waits to be killed.
func Rerun(tb testing.TB, test string, env ...string) (*exec.Cmd, string) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		tb.Fatalf("child: %v", err)
	}
	return cmd, line
}

// procState returns the state letter and process group of a process from /proc, ""
// if there is none.
func procState(pid int) (state string, pgrp int) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0
	}
	// The command name is in parentheses and may hold spaces; fields follow the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 3 {
		return "", 0
	}
	pgrp, _ = strconv.Atoi(f[2])
	return f[0], pgrp
}

// Alive reports whether process pid runs. A zombie is dead: in a container nobody may
// reap an orphan.
func Alive(pid int) bool {
	st, _ := procState(pid)
	return st != "" && st != "Z"
}

// GroupAlive returns the live processes of process group pgid.
func GroupAlive(pgid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, pg := procState(pid); pg == pgid && st != "" && st != "Z" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Eventually polls cond every 20 ms for up to 10 s and reports whether it held.
func Eventually(cond func() bool) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// NothingLeft fails the test when dir holds anything, or a live process has dir on
// its command line or works under it: what a failed start must not leave behind. A process killed with
// its group may still be exiting when the start returns (a child the leader had just
// forked, on a loaded machine): it has 10 s to be gone.
func NothingLeft(tb testing.TB, dir string) {
	tb.Helper()
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	var procs []string
	Eventually(func() bool {
		procs = processesNaming(dir)
		return len(procs) == 0
	})
	if left = append(left, procs...); len(left) > 0 {
		tb.Errorf("left behind: %v", left)
	}
}

// processesNaming lists the live processes with dir on their command line or their
// working directory under it: a PostgreSQL backend rewrites its command line
// ("postgres: user db host ...") but works in the data directory.
func processesNaming(dir string) []string {
	var found []string
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !Alive(pid) {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if strings.Contains(string(b), dir) || cwd == dir || strings.HasPrefix(cwd, dir+"/") {
			found = append(found, fmt.Sprintf("pid %d (in %s): %s", pid, cwd, strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	return found
}

// Listener is a live process holding a listening TCP socket.
type Listener struct {
	Pid     int
	Pgid    int
	Cmdline string // its arguments, joined by spaces
}

// Listeners returns the live processes holding a socket that listens on TCP port, found
// through /proc/net/tcp and tcp6 and each process's descriptors. A port a killed server
// freed can be taken at once by another server launched on the machine (another test
// binary's): this tells the two apart.
func Listeners(port int) []Listener {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			// sl local_address rem_address st ... inode (the 10th field); 0A is LISTEN.
			if len(fs) < 10 || fs[3] != "0A" {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
				inodes["socket:["+fs[9]+"]"] = true
			}
		}
	}
	var out []Listener
	if len(inodes) == 0 {
		return nil
	}
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(filepath.Join("/proc", e.Name(), "fd"))
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc", e.Name(), "fd", fd.Name())); err == nil && inodes[target] {
				st, pgid := procState(pid)
				if st == "" || st == "Z" {
					break
				}
				b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				out = append(out, Listener{Pid: pid, Pgid: pgid, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))})
				break
			}
		}
	}
	return out
}
