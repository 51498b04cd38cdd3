//go:build !linux

package hydro

import "testing"

// reportCPU reports nothing here: the thread's CPU time is read on Linux
// only (cpu_linux_test.go).
func reportCPU(*testing.B) func() { return func() {} }
