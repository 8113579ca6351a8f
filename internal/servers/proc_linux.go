package servers

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setParentDeathSignal makes the kernel kill the child when the thread that forked it
// dies. Go sets it after switching credentials, which would otherwise clear it.
func setParentDeathSignal(attr *syscall.SysProcAttr) error {
	attr.Pdeathsig = syscall.SIGKILL
	return nil
}

// waitExitedUnreaped returns when process pid has exited, leaving it unreaped (a zombie)
// so that its pid cannot be reused until cmd.Wait.
func waitExitedUnreaped(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return
		}
	}
}

// processStart returns the start time of process pid (clock ticks after boot, field 22
// of /proc/PID/stat), which with the pid names one process for good, and whether the
// process is a zombie (it exited and waits for its parent to reap it).
func processStart(pid int) (start uint64, zombie bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, false, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return start, f[0] == "Z" || f[0] == "X", nil
}
