//go:build !linux && !darwin && !dragonfly && !freebsd && !netbsd && !openbsd && !windows

package main

import "os"

// isTerminalFile reports whether f is a character device: on this system
// the tool has no terminal ioctl, and a terminal is a character device (so
// is /dev/null, which is harmless here).
func isTerminalFile(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
