//go:build !unix

package bridge_test

import "time"

// cpuTime is -1: no CPU time measure on this platform.
func cpuTime() time.Duration { return -1 }
