package monoclock

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// hasMonotonic reports whether t carries a monotonic reading (its String
// shows it as "m=±...").
func hasMonotonic(t time.Time) bool { return strings.Contains(t.String(), " m=") }

// TestInstants: a time from time.Now comes back equal and with its
// monotonic reading, so a step of the wall clock cannot move it; the
// zero Time is "no deadline"; instants order as the times do.
func TestInstants(t *testing.T) {
	now := time.Now()
	for _, d := range []time.Duration{-time.Hour, -time.Millisecond, 0, time.Second, 24 * time.Hour} {
		at := now.Add(d)
		ns := Of(at)
		assert.NotZero(t, ns)
		back := Time(ns)
		assert.True(t, back.Equal(at), "%v: %v != %v", d, back, at)
		assert.True(t, hasMonotonic(back), "%v: %v has no monotonic reading", d, back)
	}
	assert.Zero(t, Of(time.Time{}))
	assert.Equal(t, int64(-1), Of(origin), "an instant of 0 is not 'no deadline'")
	assert.Less(t, Of(now), Of(now.Add(time.Nanosecond)))
	assert.GreaterOrEqual(t, Now(), Of(now))
	// The wall reading alone (what t.UnixNano() keeps) loses it.
	assert.False(t, hasMonotonic(time.Unix(0, now.UnixNano())))
}
