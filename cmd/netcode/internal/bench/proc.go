package bench

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: clock ticks of
// USER_HZ, which Linux fixes at 100 per second on every architecture Go
// supports (sysconf(_SC_CLK_TCK) returns it).
const userHZ = 100

// maxTicks is the most ticks a time.Duration holds.
const maxTicks = uint64(1<<63-1) / uint64(time.Second/userHZ)

// parseProcStat returns the user plus system CPU time of a process from the
// contents of its /proc/<pid>/stat (see proc(5)): the second field, the
// command name, is in parentheses and may itself hold spaces and
// parentheses, so the fields are counted from the last ')'; utime and
// stime are the 14th and 15th fields.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	// Fields from the 3rd (state) on.
	fields := bytes.Fields(b[i+1:])
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, errors.New("proc stat: too few fields")
	}
	var ticks uint64
	for _, f := range [...][]byte{fields[utime], fields[stime]} {
		v, err := strconv.ParseUint(string(f), 10, 63)
		if err != nil {
			return 0, errors.New("proc stat: bad CPU time " + strconv.Quote(string(f)))
		}
		ticks += v
	}
	if ticks > maxTicks {
		return 0, errors.New("proc stat: CPU time out of range")
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// parseMachineStat returns the busy CPU time of the whole machine, all
// CPUs together, from the contents of /proc/stat (see proc(5)): the first
// line, "cpu", counts user, nice, system, idle, iowait, irq, softirq and
// steal ticks (and guest time, already in user); busy is all but idle and
// iowait.
func parseMachineStat(b []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	fields := bytes.Fields(line)
	if len(fields) < 9 || string(fields[0]) != "cpu" {
		return 0, errors.New("proc stat: no cpu line")
	}
	var ticks uint64
	for i, f := range fields[1:9] {
		v, err := strconv.ParseUint(string(f), 10, 63)
		if err != nil {
			return 0, errors.New("proc stat: bad CPU time " + strconv.Quote(string(f)))
		}
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if v > maxTicks || ticks+v > maxTicks {
			return 0, errors.New("proc stat: CPU time out of range")
		}
		ticks += v
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}
