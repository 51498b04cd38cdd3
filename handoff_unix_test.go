//go:build unix

package netcode_test

import "syscall"

// contextSwitches is the number of context switches of the process's
// threads so far, voluntary and not, and the CPU time they used, in
// nanoseconds.
func contextSwitches() (switches, cpuNanos uint64, ok bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0, false
	}
	return uint64(ru.Nvcsw + ru.Nivcsw), uint64(ru.Utime.Nano() + ru.Stime.Nano()), true
}
