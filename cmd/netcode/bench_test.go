package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBenchBridgeFlags checks the flags of the bridge load mode that are
// refused before anything starts (the mode itself is tested end to end in
// internal/bench, whose test binary can play the child processes).
func TestBenchBridgeFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown mode", []string{"-bridge", "udp", "-q"}, `bridge mode "udp"`},
		{"baseline", []string{"-bridge", "relay", "-baseline"}, "-baseline does not apply with -bridge"},
		{"window", []string{"-bridge", "transport", "-window", "4"}, "-window does not apply with -bridge"},
		{"flat out", []string{"-bridge", "relay", "-rate", "0"}, "-rate must be positive"},
		{"idle too long", []string{"-bridge", "relay", "-idle", "1m", "-q"}, "shorter than the bridge's idle timeout"},
		{"idle without bridge", []string{"-idle", "5s"}, "-idle applies only with -bridge"},
		{"too small", []string{"-bridge", "relay", "-size", "8", "-q"}, "payload size 8 out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := cli(t, append([]string{"bench"}, tc.args...)...)
			assert.Equal(t, 1, code, out+errs)
			assert.Contains(t, errs, tc.want)
		})
	}
	code, out, _ := cli(t, "bench", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "-bridge relay|transport|wt-relay|wt-transport|wire|wt-wire|websocket")
	assert.Contains(t, out, "-idle")
}
