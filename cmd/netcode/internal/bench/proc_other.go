//go:build !linux

package bench

import "time"

// procCPU reports that this system has no /proc: the bench falls back to
// the CPU time the child process reports of itself.
func procCPU(int) (time.Duration, bool) { return 0, false }

// procFDs reports that this system has no /proc: descriptors are not
// counted.
func procFDs(int) (int, bool) { return 0, false }

// machineCPU reports that this system has no /proc: the machine's busy
// time is not measured.
func machineCPU() (time.Duration, bool) { return 0, false }
