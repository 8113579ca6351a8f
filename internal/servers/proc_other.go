//go:build !linux

package servers

import (
	"errors"
	"syscall"
)

// Servers are launched on Linux only: elsewhere a child cannot be tied to the harness's
// life, nor its exit observed without reaping it. The rest of the module still builds.
func setParentDeathSignal(*syscall.SysProcAttr) error {
	return errors.New("launching servers needs Linux")
}

func waitExitedUnreaped(int) {}

func inNetns(string, func() error) error {
	return errors.New("network namespaces need Linux")
}
