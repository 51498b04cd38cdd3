package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestRun runs the demo as the README's first command does, smaller.
func TestRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		t.Run(addr, func(t *testing.T) {
			if err := run(addr, 3, 2); err != nil {
				t.Fatal(err)
			}
		})
	}
}
