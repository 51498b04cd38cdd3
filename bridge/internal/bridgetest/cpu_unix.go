//go:build unix

package bridgetest

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time the process has used, user and system.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return -1
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
