//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime returns the process's user plus system CPU time, or 0 if the
// system cannot say.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
