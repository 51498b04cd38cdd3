package bench

import (
	"os"
	"strconv"
	"time"
)

// procCPU returns the user plus system CPU time of process pid so far, from
// /proc; ok is false if it cannot be read.
func procCPU(pid int) (d time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	d, err = parseProcStat(b)
	return d, err == nil
}

// procFDs returns the number of open file descriptors of process pid, from
// /proc; ok is false if it cannot be read.
func procFDs(pid int) (n int, ok bool) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, false
	}
	return len(ents), true
}

// machineCPU returns the busy CPU time of the whole machine so far, from
// /proc/stat; ok is false if it cannot be read.
func machineCPU() (d time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	d, err = parseMachineStat(b)
	return d, err == nil
}
