package servers

import (
	"fmt"
	"os"
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

// inNetns runs start on the calling thread (the spawner's, locked) after entering the
// network namespace at path, then returns the thread to the namespace it was in. A
// thread that could not return is of no further use; the spawner refuses to fork
// from it again (spawnerLost).
func inNetns(path string, start func() error) error {
	if spawnerLost != nil {
		return spawnerLost
	}
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer orig.Close()
	target, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("network namespace: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	err = start()
	if rerr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); rerr != nil {
		spawnerLost = fmt.Errorf("the spawner thread could not leave network namespace %s: %w", path, rerr)
	}
	return err
}

// spawnerLost is set, on the spawner thread only, when that thread is stuck in a
// node's namespace.
var spawnerLost error
