//go:build windows

package bench

import (
	"time"

	"golang.org/x/sys/windows"
)

// cpuTime returns the process's user plus kernel CPU time, or 0 if the
// system cannot say.
func cpuTime() time.Duration {
	var creation, exit, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &creation, &exit, &kernel, &user); err != nil {
		return 0
	}
	// A Filetime counts 100-nanosecond intervals.
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}

// contextSwitches reports that this system's count is not known.
func contextSwitches() (uint64, bool) { return 0, false }
