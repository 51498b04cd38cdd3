//go:build unix

package bench

import "syscall"

// fdLimit returns the process's limit on open file descriptors (soft and
// hard). The Go runtime has already raised the soft limit to the hard one
// when the program started (Go 1.19 and later), so the soft limit is what
// this process can use.
func fdLimit() (soft, hard uint64, ok bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, 0, false
	}
	return uint64(rl.Cur), uint64(rl.Max), true
}
