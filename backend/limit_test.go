package backend

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/time/rate"
)

// TestLimiters drives the per-user limiter on explicit time: buckets
// refill at the rate, the table stays within its bound, users whose bucket
// has refilled are forgotten first, and new users wait while every tracked
// user is active.
func TestLimiters(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	l := newLimiters(rate.Limit(2), 2, 3) // 2 per second, burst 2, 3 users

	type step struct {
		at   time.Duration
		user uint64
		ok   bool
		wait time.Duration
	}
	steps := []step{
		{0, 1, true, 0},
		{0, 1, true, 0},
		{0, 1, false, 500 * time.Millisecond}, // bucket empty: one token in 0.5 s
		{250 * time.Millisecond, 1, false, 250 * time.Millisecond},
		{500 * time.Millisecond, 1, true, 0},
		{500 * time.Millisecond, 2, true, 0},
		{500 * time.Millisecond, 3, true, 0},
		// The table is full and every bucket is below its burst: a fourth
		// user waits for a refill period.
		{500 * time.Millisecond, 4, false, 500 * time.Millisecond},
		// A second later every bucket is full again: the sweep forgets them
		// and user 4 gets in.
		{1500 * time.Millisecond, 4, true, 0},
	}
	for i, s := range steps {
		ok, wait := l.allow(s.user, t0.Add(s.at))
		assert.Equal(t, s.ok, ok, "step %d", i)
		assert.Equal(t, s.wait, wait, "step %d", i)
		assert.LessOrEqual(t, len(l.users), 3, "step %d", i)
	}
	assert.Len(t, l.users, 1)
}

func TestRetrySeconds(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {1000 * time.Hour, 86400},
	} {
		assert.Equal(t, tc.want, retrySeconds(tc.d), "%v", tc.d)
	}
}

func TestWantsText(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   bool
	}{
		{nil, false},
		{[]string{"*/*"}, false},
		{[]string{"text/plain"}, true},
		{[]string{"Text/Plain; charset=utf-8"}, true},
		{[]string{"text/plain", "application/octet-stream"}, false},
		{[]string{"text/plain;q=0"}, false},
		{[]string{"text/html, text/plain;q=0.5"}, true},
	} {
		assert.Equal(t, tc.want, wantsText(tc.accept), "%q", tc.accept)
	}
}

func FuzzWantsText(f *testing.F) {
	f.Add("text/plain;q=0.5, application/octet-stream;q=0")
	f.Add(";;,,q=")
	f.Fuzz(func(t *testing.T, accept string) {
		wantsText([]string{accept})
	})
}
