//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminalFile reports whether f is a terminal.
func isTerminalFile(f *os.File) bool {
	return controlFd(f, func(fd uintptr) error {
		_, err := unix.IoctlGetTermios(int(fd), unix.TIOCGETA)
		return err
	})
}
