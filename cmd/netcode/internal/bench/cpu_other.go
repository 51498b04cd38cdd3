//go:build !unix && !windows

package bench

import "time"

// cpuTime returns 0: this system has no process CPU clock the bench knows.
func cpuTime() time.Duration { return 0 }

// contextSwitches reports that this system's count is not known.
func contextSwitches() (uint64, bool) { return 0, false }
