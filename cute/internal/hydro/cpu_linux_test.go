//go:build linux

package hydro

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// reportCPU makes a benchmark report the CPU time of its own thread per
// operation (cpu-ns/op) as well as the wall time: on a machine shared
// with other work the wall time measures the contention as much as the
// code. Use as defer reportCPU(b)() before the loop.
func reportCPU(b *testing.B) func() {
	runtime.LockOSThread()
	start := threadCPU()
	return func() {
		used := threadCPU() - start
		runtime.UnlockOSThread()
		if b.N > 0 {
			b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
		}
	}
}

// threadCPU is the CPU time the calling thread has used.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	const rusageThread = 1 // RUSAGE_THREAD
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
