package servers

import (
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
