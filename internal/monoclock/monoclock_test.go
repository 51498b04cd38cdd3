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

// TestTimeNow: TimeNow's times carry a monotonic reading, never run
// backwards on it, stay within wallRefresh of time.Now's wall clock, and
// come from a fresh wall reading once wallRefresh has passed.
func TestTimeNow(t *testing.T) {
	prev := TimeNow()
	for range 1000 {
		got := TimeNow()
		now := time.Now()
		assert.True(t, hasMonotonic(got), "%v has no monotonic reading", got)
		assert.False(t, got.Before(prev), "%v before %v", got, prev)
		assert.False(t, got.After(now), "%v after time.Now %v", got, now)
		wall := now.Round(0).Sub(got.Round(0)) // Round(0) strips the monotonic reading: wall against wall
		assert.Less(t, wall.Abs(), wallRefresh, "wall readings %v apart", wall)
		prev = got
	}
	// A base older than wallRefresh is replaced by a full reading.
	old := time.Now().Add(-2 * wallRefresh)
	last.Store(&old)
	before := time.Now()
	TimeNow()
	assert.False(t, last.Load().Before(before), "the wall clock was not read again")
}

func BenchmarkTimeNow(b *testing.B) {
	for b.Loop() {
		TimeNow()
	}
}

func BenchmarkTimeNowStd(b *testing.B) {
	for b.Loop() {
		time.Now()
	}
}
