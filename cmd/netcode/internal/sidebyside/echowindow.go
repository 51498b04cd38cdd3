package main

// What the one-process Go harnesses (apiecho.go, cuteecho.go) share: the
// warm-up and measured window, and the result line in cbench's format.

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"sync/atomic"
	"time"
)

// echoWindow waits out warmup, then measures a window of duration with
// measuring set: the process's CPU time and the wall time it lasted. With
// cpuprofile it writes the window's CPU profile to that file.
func echoWindow(warmup, duration time.Duration, cpuprofile string, measuring *atomic.Bool) (cpu, wall time.Duration, err error) {
	time.Sleep(warmup) // nothing to wait for but the time
	if cpuprofile != "" {
		f, err := os.Create(cpuprofile)
		if err != nil {
			return 0, 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, 0, err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0, wall0 := cpuTime(), time.Now()
	measuring.Store(true)
	time.Sleep(duration)
	measuring.Store(false)
	return cpuTime() - cpu0, time.Since(wall0), nil
}

// printEchoResult prints one result line in cbench's format (parseCbench)
// for echoes in a window of cpu and wall time, with the round trips' p50
// and p99 from rtts, which it sorts.
func printEchoResult(w io.Writer, name string, clients, window, size int, echoes uint64, cpu, wall time.Duration, rtts []time.Duration) error {
	if echoes == 0 || len(rtts) == 0 || cpu <= 0 {
		return fmt.Errorf("%s: no echo in the window", name)
	}
	slices.Sort(rtts)
	q := func(f float64) int64 { return rtts[int(f*float64(len(rtts)-1))].Microseconds() }
	_, err := fmt.Fprintf(w, "result clients=%d window=%d size=%d echoes_per_second=%.0f echoes_per_cpu_second=%.0f cpu_seconds=%.3f wall_seconds=%.3f p50_us=%d p99_us=%d\n",
		clients, window, size, float64(echoes)/wall.Seconds(), float64(echoes)/cpu.Seconds(), cpu.Seconds(), wall.Seconds(), q(0.5), q(0.99))
	return err
}
