package main

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses, utime 150 and stime 25
	// ticks: 1.75 s.
	line := "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 25 0 0 20 0 3 0 100 1000000 200 18446744073709551615\n"
	got, err := parseProcStat(line)
	if err != nil || got != 1750*time.Millisecond {
		t.Errorf("parseProcStat = %v, %v; want 1.75s", got, err)
	}
	for _, bad := range []string{"", "4242 S 1 2", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 1234 0 0 0 a 25 0"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) did not fail", bad)
		}
	}
}

// TestProcCPU reads this process's CPU time from /proc and checks it
// against getrusage's, within the ticks /proc counts in.
func TestProcCPU(t *testing.T) {
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
	}
	before := cpuTime()
	got, err := procCPU(os.Getpid())
	after := cpuTime()
	if err != nil {
		t.Fatal(err)
	}
	const tick = time.Second / clockTicks
	if got < before-2*tick || got > after+2*tick {
		t.Errorf("/proc says %v of CPU, getrusage %v to %v", got, before, after)
	}
}
