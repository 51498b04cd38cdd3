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

// contextSwitches returns how many times the process's threads have given
// up the CPU, voluntarily or not (getrusage); ok is false if the system
// cannot say.
func contextSwitches() (n uint64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return uint64(ru.Nvcsw) + uint64(ru.Nivcsw), true
}
