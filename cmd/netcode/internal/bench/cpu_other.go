//go:build !unix && !windows

package bench

import "time"

// cpuTime returns 0: this system has no process CPU clock the bench knows.
func cpuTime() time.Duration { return 0 }
