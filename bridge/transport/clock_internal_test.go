package transport

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestWriteDeadlineMonotonic is issue 32's one-clock rule for the
// WebSocket client: the write deadline a WriteTo waits for is the one
// set, with its monotonic reading, so that a step of the wall clock
// between SetWriteDeadline and WriteTo moves it no more than it moves
// package net's (kept as Unix nanoseconds, as before, it came back
// without one: an hour's step ahead expired it at once).
func TestWriteDeadlineMonotonic(t *testing.T) {
	var c Conn
	_, ok := c.writeDeadline()
	assert.False(t, ok, "none by default")
	for _, d := range []time.Duration{-time.Second, 0, 50 * time.Millisecond, time.Hour} {
		set := time.Now().Add(d)
		assert.NoError(t, c.SetWriteDeadline(set))
		got, ok := c.writeDeadline()
		assert.True(t, ok)
		assert.True(t, got.Equal(set), "%v: %v, set %v", d, got, set)
		assert.Contains(t, got.String(), " m=", "%v: measured on the monotonic clock", d)
		assert.InDelta(t, time.Until(set), time.Until(got), float64(time.Millisecond))
	}
	assert.NoError(t, c.SetWriteDeadline(time.Time{}))
	_, ok = c.writeDeadline()
	assert.False(t, ok, "cleared")
}
