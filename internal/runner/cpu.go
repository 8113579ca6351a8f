package runner

import (
	"syscall"
	"time"
)

// processCPU returns the CPU time, user and system, that the whole process has used so
// far (getrusage RUSAGE_SELF: every thread), or 0 where the system does not say.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
