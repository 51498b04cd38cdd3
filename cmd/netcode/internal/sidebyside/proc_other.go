//go:build !linux

package main

import (
	"errors"
	"time"
)

// procCPU needs Linux's /proc (proc_linux.go).
func procCPU(int) (time.Duration, error) {
	return 0, errors.New("cref -server-only reads server CPU from /proc: Linux only")
}
