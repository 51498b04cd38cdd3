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
	const maxTicks = uint64(1<<63-1) / uint64(time.Second/userHZ)
	if ticks > maxTicks {
		return 0, errors.New("proc stat: CPU time out of range")
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}
