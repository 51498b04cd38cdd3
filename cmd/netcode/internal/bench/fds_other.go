//go:build !unix

package bench

// fdLimit reports no limit: this system has no RLIMIT_NOFILE.
func fdLimit() (soft, hard uint64, ok bool) { return 0, 0, false }
