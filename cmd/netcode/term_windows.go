package main

import (
	"os"

	"golang.org/x/sys/windows"
)

// isTerminalFile reports whether f is a console.
func isTerminalFile(f *os.File) bool {
	return controlFd(f, func(fd uintptr) error {
		var mode uint32
		return windows.GetConsoleMode(windows.Handle(fd), &mode)
	})
}
