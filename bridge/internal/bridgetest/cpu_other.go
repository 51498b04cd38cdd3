//go:build !unix

package bridgetest

import "time"

// CPUTime is -1: no CPU time measure on this platform.
func CPUTime() time.Duration { return -1 }
